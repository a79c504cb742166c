#!/usr/bin/env node
// Licensed under the Apache License, Version 2.0.
//
// idp.js: the identity provider of mod_lessons' JWKS URL tests (issue 8),
// built on npm oauth2-mock-server (pinned in package.json and
// package-lock.json: it issues typ JWT tokens through a real
// client-credentials grant, serves a JWKS and rotates keys while
// running).  Runs on Node 18.12 and later.
//
//   node t/idp/idp.js --port P --control-port C --cert FILE --key FILE
//
// Its modules: make idp-deps installs them in build/idp/node_modules;
// t/tools/integration.sh copies them next to its copy of this file and
// names that directory in LESSONS_TEST_IDP (empty without them, so a test
// can skip).  In the work tree: NODE_PATH=build/idp/node_modules node ...
// t/idp/selftest.sh exercises everything below.
//
// The provider speaks HTTPS on 127.0.0.1:P with the given certificate
// (the caller makes a test CA and a certificate for IP:127.0.0.1 with
// openssl) and starts with one RS256 key.  Its paths are the mock's:
//   GET  /.well-known/openid-configuration   discovery (jwks_uri, issuer)
//   GET  /jwks                                the public keys
//   POST /token                               the token endpoint
// The issuer is https://127.0.0.1:P.  When both listeners are up, one line
// "idp ready https://127.0.0.1:P" goes to stdout.  SIGTERM or SIGINT
// closes both and exits 0.
//
// Tokens: a real client-credentials grant, no client authentication:
//   curl --cacert ca.crt -d grant_type=client_credentials \
//        -d aud=lessons -d scope='read write' https://127.0.0.1:P/token
// answers {"access_token": ..., "token_type": "Bearer", ...}.  The mock
// signs with header {kid, typ: "JWT", alg: the key's}; its claims are iss,
// iat, nbf (iat - 10), exp (iat + 3600), and scope and aud from the
// request.  The signing key is the one added last by POST /keys (or
// chosen with POST /signing): idp.js hands the mock that kid for every
// token (the mock alone would rotate through its keys).
//
// Control, plain HTTP on 127.0.0.1:C, JSON in and out:
//   GET  /state          {issuer, running, kids, keys: [{kid, alg}],
//                         jwks_requests_by_query: {"": N, "x": M},
//                         signing_kid, jwks_requests, discovery_requests,
//                         token_requests, token_header, token_claims,
//                         jwks_fault}
//   POST /keys           {"alg": "RS256"|"ES256"|..., "kid"?: "...",
//                         "sign"?: false}: generate and publish a key; it
//                         signs the next tokens unless "sign" is false.
//                         Answers {kid, alg}.
//   POST /keys/remove    {"kid": "..."}: unpublish a key.  The mock cannot
//                         drop a key, so the provider is rebuilt with the
//                         smaller set and its listener restarted on the
//                         same port, in this process.  Removing the
//                         signing key makes the last one left sign.
//   POST /signing        {"kid": "..."}: that key signs the next tokens.
//   POST /token-header   header members for the next tokens, until the
//                         next call: {"typ": "at+jwt"} (the refusal test),
//                         {"typ": null} (no typ), {"kid": "other"} (a kid
//                         the JWKS lacks), {} back to the mock's header.
//                         Such tokens are re-signed here with the same key
//                         and claims, since the mock always writes typ JWT.
//   POST /token-claims   claims merged into the next tokens ({"sub": "x",
//                         "exp": 1}); {} for none.
//   POST /jwks-fault     how /jwks answers: {"status": 500},
//                         {"body": "not json"}, {"size": N} (the real
//                         JWKS padded with spaces to N bytes, up to
//                         16 MiB), {"delay_ms": 3000} (before answering;
//                         combines with the others), or {} for the real
//                         thing.  Requests still count.
//   POST /stop           close the HTTPS listener (open connections too)
//   POST /start          listen again on the same port
//   POST /reset-count    zero the request counts
// Each POST answers the state (or {kid, alg} for /keys); a bad request
// answers 400 {"error": ...}.
'use strict';

const fs = require('node:fs');
const http = require('node:http');
const https = require('node:https');
const { OAuth2Server } = require('oauth2-mock-server');
const jose = require('jose');

const HOST = '127.0.0.1';
const ALGS = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512'];
const JWKS_PATH = '/jwks';
const DISCOVERY_PATH = '/.well-known/openid-configuration';
const TOKEN_PATH = '/token';
const BODY_MAX = 64 * 1024;

function usage(msg) {
  if (msg) process.stderr.write(`idp: ${msg}\n`);
  process.stderr.write('usage: node idp.js --port P --control-port C --cert FILE --key FILE\n');
  process.exit(2);
}

function parseArgs(argv) {
  const a = {};
  for (let i = 0; i < argv.length; i += 2) {
    const name = argv[i];
    const value = argv[i + 1];
    if (value === undefined) usage(`${name} needs a value`);
    switch (name) {
      case '--port': a.port = Number(value); break;
      case '--control-port': a.controlPort = Number(value); break;
      case '--cert': a.cert = value; break;
      case '--key': a.key = value; break;
      default: usage(`unknown option ${name}`);
    }
  }
  for (const p of ['port', 'controlPort']) {
    if (!Number.isInteger(a[p]) || a[p] < 1 || a[p] > 65535) usage('--port and --control-port must be 1..65535');
  }
  if (!a.cert || !a.key) usage('--cert and --key are required');
  return a;
}

const args = parseArgs(process.argv.slice(2));
const tls = { cert: fs.readFileSync(args.cert), key: fs.readFileSync(args.key) };
const issuerUrl = `https://${HOST}:${args.port}`;

function log(msg) {
  process.stderr.write(`idp: ${msg}\n`);
}

// ------------------------------------------------------------- state

const state = {
  keys: [],                 // private JWKs, in the order they were added
  signingKid: undefined,
  header: {},               // POST /token-header
  claims: {},               // POST /token-claims
  fault: {},                // POST /jwks-fault
  jwks: 0,
  jwksByQuery: {},          // the same, per query string
  discovery: 0,
  token: 0,
};

let mock;                   // the oauth2-mock-server of the current key set
let server = null;          // its HTTPS listener, when running
const sockets = new Set();

function publicState() {
  return {
    issuer: issuerUrl,
    running: server !== null,
    kids: state.keys.map((k) => k.kid),
    keys: state.keys.map((k) => ({ kid: k.kid, alg: k.alg })),
    signing_kid: state.signingKid ?? null,
    jwks_requests: state.jwks,
    jwks_requests_by_query: state.jwksByQuery,
    discovery_requests: state.discovery,
    token_requests: state.token,
    token_header: state.header,
    token_claims: state.claims,
    jwks_fault: state.fault,
  };
}

// A mock holding exactly state.keys.  Never started itself: its request
// handler is served by our listener, which can drop open connections on
// stop (the mock's own server waits for them) and counts requests.
async function buildMock() {
  const m = new OAuth2Server();
  for (const k of state.keys) {
    await m.issuer.keys.add(k);
  }
  m.issuer.url = issuerUrl;
  const original = m.issuer.buildToken.bind(m.issuer);
  m.issuer.buildToken = async (opts) => {
    const jwt = await original({ ...opts, kid: state.signingKid });
    return Object.keys(state.header).length ? resign(jwt) : jwt;
  };
  m.service.on('beforeTokenSigning', (token) => {
    Object.assign(token.payload, state.claims);
  });
  return m;
}

// The mock's token with the header of POST /token-header: same key,
// same claims.
async function resign(jwt) {
  const payload = jose.decodeJwt(jwt);
  const old = jose.decodeProtectedHeader(jwt);
  const jwk = state.keys.find((k) => k.kid === old.kid);
  if (!jwk) throw new Error(`signing key ${old.kid} is gone`);
  const header = { alg: old.alg, typ: 'JWT', kid: old.kid };
  for (const name of ['typ', 'kid']) {
    if (Object.prototype.hasOwnProperty.call(state.header, name)) {
      if (state.header[name] === null) delete header[name];
      else header[name] = state.header[name];
    }
  }
  const key = await jose.importJWK(jwk, jwk.alg);
  return new jose.SignJWT(payload).setProtectedHeader(header).sign(key);
}

function providerRequest(req, res) {
  const path = (req.url || '').split('?')[0];
  if (path === JWKS_PATH) {
    state.jwks++;
    // Per query string too, so a test can tell its keys URLs apart.
    const query = (req.url || '').split('?')[1] ?? '';
    state.jwksByQuery[query] = (state.jwksByQuery[query] ?? 0) + 1;
    const f = state.fault;
    const answer = () => {
      if (f.status !== undefined) {
        res.writeHead(f.status, { 'Content-Type': 'application/json' });
        res.end('{"error":"jwks fault"}');
      } else if (f.body !== undefined) {
        res.writeHead(200, { 'Content-Type': 'application/json' });
        res.end(String(f.body));
      } else if (f.size !== undefined) {
        const text = JSON.stringify({ keys: mock.issuer.keys.toJSON() });
        res.writeHead(200, { 'Content-Type': 'application/json' });
        res.end(text.padEnd(f.size, ' '));
      } else {
        mock.service.requestHandler(req, res);
      }
    };
    if (f.delay_ms) setTimeout(answer, f.delay_ms);
    else answer();
    return;
  }
  if (path === DISCOVERY_PATH) state.discovery++;
  if (path === TOKEN_PATH) state.token++;
  mock.service.requestHandler(req, res);
}

function startProvider() {
  if (server) return Promise.resolve();
  const s = https.createServer(tls, providerRequest);
  s.on('connection', (sock) => {
    sockets.add(sock);
    sock.on('close', () => sockets.delete(sock));
  });
  return new Promise((resolve, reject) => {
    s.once('error', reject);
    s.listen(args.port, HOST, () => {
      s.removeListener('error', reject);
      server = s;
      resolve();
    });
  });
}

function stopProvider() {
  if (!server) return Promise.resolve();
  const s = server;
  server = null;
  return new Promise((resolve) => {
    s.close(() => resolve());
    for (const sock of sockets) sock.destroy();
    sockets.clear();
  });
}

// ----------------------------------------------------------- control

async function addKey(body) {
  const alg = body.alg ?? 'RS256';
  if (!ALGS.includes(alg)) throw new Error(`alg must be one of ${ALGS.join(', ')}`);
  if (body.kid !== undefined && (typeof body.kid !== 'string' || body.kid === '')) {
    throw new Error('kid must be a non-empty string');
  }
  if (body.kid !== undefined && state.keys.some((k) => k.kid === body.kid)) {
    throw new Error(`kid ${body.kid} exists`);
  }
  const jwk = await mock.issuer.keys.generate(alg, body.kid !== undefined ? { kid: body.kid } : undefined);
  state.keys.push(jwk);
  if (body.sign !== false) state.signingKid = jwk.kid;
  log(`added ${alg} key ${jwk.kid}${body.sign !== false ? ' (signing)' : ''}`);
  return { kid: jwk.kid, alg };
}

async function removeKey(body) {
  const i = state.keys.findIndex((k) => k.kid === body.kid);
  if (i < 0) throw new Error(`no key ${body.kid}`);
  state.keys.splice(i, 1);
  if (state.signingKid === body.kid) {
    state.signingKid = state.keys.length ? state.keys[state.keys.length - 1].kid : undefined;
  }
  const wasRunning = server !== null;
  await stopProvider();
  mock = await buildMock();
  if (wasRunning) await startProvider();
  log(`removed key ${body.kid}${wasRunning ? ', provider restarted' : ''}`);
  return publicState();
}

function plainObject(body, what) {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    throw new Error(`${what} takes a JSON object`);
  }
  return body;
}

const routes = {
  'GET /state': async () => publicState(),
  'POST /keys': addKey,
  'POST /keys/remove': removeKey,
  'POST /signing': async (body) => {
    if (!state.keys.some((k) => k.kid === body.kid)) throw new Error(`no key ${body.kid}`);
    state.signingKid = body.kid;
    return publicState();
  },
  'POST /token-header': async (body) => {
    plainObject(body, '/token-header');
    for (const [name, v] of Object.entries(body)) {
      if (!['typ', 'kid'].includes(name)) throw new Error('only typ and kid can be set');
      if (v !== null && typeof v !== 'string') throw new Error(`${name} must be a string or null`);
    }
    state.header = { ...body };
    return publicState();
  },
  'POST /token-claims': async (body) => {
    state.claims = { ...plainObject(body, '/token-claims') };
    return publicState();
  },
  'POST /jwks-fault': async (body) => {
    plainObject(body, '/jwks-fault');
    if (body.status !== undefined && !(Number.isInteger(body.status) && body.status >= 100 && body.status <= 599)) {
      throw new Error('status must be 100..599');
    }
    if (body.size !== undefined && !(Number.isInteger(body.size) && body.size >= 0 && body.size <= 16 * 1024 * 1024)) {
      throw new Error('size must be 0..16777216');
    }
    if (body.delay_ms !== undefined && !(Number.isInteger(body.delay_ms) && body.delay_ms >= 0 && body.delay_ms <= 60000)) {
      throw new Error('delay_ms must be 0..60000');
    }
    state.fault = { ...body };
    return publicState();
  },
  'POST /stop': async () => {
    await stopProvider();
    log('provider stopped');
    return publicState();
  },
  'POST /start': async () => {
    await startProvider();
    log('provider started');
    return publicState();
  },
  'POST /reset-count': async () => {
    state.jwks = 0;
    state.jwksByQuery = {};
    state.discovery = 0;
    state.token = 0;
    return publicState();
  },
};

function reply(res, status, obj) {
  const text = JSON.stringify(obj);
  res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(text) });
  res.end(text);
}

function controlRequest(req, res) {
  const route = routes[`${req.method} ${(req.url || '').split('?')[0]}`];
  if (!route) {
    reply(res, 404, { error: `no control endpoint ${req.method} ${req.url}` });
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
      reply(res, 200, await route(body ?? {}));
    } catch (e) {
      reply(res, 400, { error: e.message });
    }
  });
}

// ------------------------------------------------------------- main

let control = null;

async function shutdown(sig) {
  log(`${sig}: stopping`);
  await stopProvider();
  if (control) {
    control.close();
    control.closeAllConnections?.();
  }
  process.exit(0);
}

async function main() {
  mock = await buildMock();
  await addKey({ alg: 'RS256' });
  await startProvider();
  control = http.createServer(controlRequest);
  await new Promise((resolve, reject) => {
    control.once('error', reject);
    control.listen(args.controlPort, HOST, resolve);
  });
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
  process.stdout.write(`idp ready ${issuerUrl}\n`);
}

main().catch((e) => {
  log(`cannot start: ${e.message}`);
  process.exit(1);
});
