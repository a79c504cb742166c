// Licensed under the Apache License, Version 2.0.
//
// control.js: the control port of the tests' Node.js identity providers
// (t/idp/idp.js, t/oidcp/provider.mjs): plain HTTP, JSON in and out.
//
//   http.createServer(controlHandler(routes, 'realm', realms))
//
// routes: {"METHOD /path": (scope, body) => answer, or its promise};
// the query parameter named (realm, issuer) picks the scope from the Map
// (its key '' when the parameter is absent).  Answers 200 with the
// route's answer; 404 when no route fits; 400 {"error": ...} for an
// unknown scope, a body that is no JSON, or a route that throws (its
// message).  A body over 64 KiB ends the connection.
'use strict';

const BODY_MAX = 64 * 1024;

function reply(res, status, obj) {
  const text = JSON.stringify(obj);
  res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(text) });
  res.end(text);
}

function controlHandler(routes, param, scopes) {
  return (req, res) => {
    const url = new URL(req.url || '/', 'http://control');
    const route = routes[`${req.method} ${url.pathname}`];
    if (!route) {
      reply(res, 404, { error: `no control endpoint ${req.method} ${req.url}` });
      return;
    }
    const scope = scopes.get(url.searchParams.get(param) ?? '');
    if (!scope) {
      reply(res, 400, { error: `no ${param} ${url.searchParams.get(param)}` });
      return;
    }
    const chunks = [];
    let size = 0;
    req.on('data', (c) => {
      size += c.length;
      if (size > BODY_MAX) req.destroy();
      else chunks.push(c);
    });
    req.on('end', async () => {
      let body = {};
      const text = Buffer.concat(chunks).toString('utf8').trim();
      try {
        if (text !== '') body = JSON.parse(text);
      } catch (e) {
        reply(res, 400, { error: `bad JSON: ${e.message}` });
        return;
      }
      try {
        reply(res, 200, await route(scope, body ?? {}));
      } catch (e) {
        reply(res, 400, { error: e.message });
      }
    });
  };
}

module.exports = { controlHandler };
