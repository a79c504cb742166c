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
// openssl) and starts with one RS256 key.  Its paths:
//   GET  /.well-known/openid-configuration   discovery (jwks_uri, issuer)
//   GET  /jwks                                the public keys
//   POST /token                               the token endpoint
//   POST /introspect                          token introspection (RFC
//                                             7662, client_secret_basic)
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
//   POST /metadata       what discovery answers (issue 20): {"issuer":
//                         "..."|null} (null: no issuer member),
//                         {"jwks_uri": "..."|null},
//                         {"introspection_endpoint": "..."|null},
//                         {"openid": false}
//                         (404 at /.well-known/openid-configuration),
//                         {"oauth": true} (RFC 8414's metadata at
//                         /.well-known/oauth-authorization-server, with
//                         the realm's path after it), {"status": N},
//                         {"body": "text"}, {"delay_ms": N}; any mix, or
//                         {} for the document as it is.  Both places
//                         count their requests (discovery_requests,
//                         oauth_metadata_requests).
//   POST /opaque         {"claims"?: {...}}: an opaque token (random
//                         base64url, no dots) the introspection endpoint
//                         answers for: active, with iss, aud "lessons",
//                         sub "alice", scope "lessons", client_id, iat and
//                         exp (iat + 3600), the claims given merged over
//                         them (null drops one).  Answers {"token"}.
//   POST /opaque/revoke  {"token": "..."}: from now on it is inactive (an
//                         opaque token, or a JWT of this realm).
//   POST /introspection  how /introspect answers (RFC 7662):
//                         {"client_id", "secret"} it takes (default
//                         lessons-api / introspect-secret), {"status": N}
//                         (with {"error": "code"}: its JSON body's error),
//                         {"body": "text"}, {"delay_ms": N}; {} for the
//                         real thing.  {"limit_per_s": N}: a provider
//                         that throttles the client, answering 429 to
//                         its requests past N in one second (counted in
//                         introspect_limited), as real ones do.
//                         introspect_requests counts the answers,
//                         introspect_hint and introspect_auth say what
//                         the last request sent.
//   POST /stop           close the HTTPS listener (open connections too)
//   POST /start          listen again on the same port
//   POST /reset-count    zero the request counts
// Each POST answers the state (or {kid, alg} for /keys); a bad request
// answers 400 {"error": ...}.
//
// Realms: one provider, several issuers on one origin, as Keycloak has
// them.  POST /realms {"name": "school"} makes a realm with its own RS256
// key; its issuer is https://127.0.0.1:P/realms/school, and every path
// above is also served under /realms/school (discovery, /jwks, /token).
// Every control endpoint takes ?realm=NAME (none: the root issuer, as
// above); GET /state?realm=NAME is that realm's state.
'use strict';

const fs = require('node:fs');
const http = require('node:http');
const https = require('node:https');
const { OAuth2Server } = require('oauth2-mock-server');
const jose = require('jose');
const { controlHandler } = require('./control.js');

const HOST = '127.0.0.1';
const ALGS = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512'];
const JWKS_PATH = '/jwks';
const DISCOVERY_PATH = '/.well-known/openid-configuration';
const OAUTH_PATH = '/.well-known/oauth-authorization-server';
const TOKEN_PATH = '/token';
const INTROSPECT_PATH = '/introspect';

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

// One issuer: the root one (prefix '') or a realm (prefix /realms/NAME).
function newRealm(name) {
  const prefix = name === '' ? '' : `/realms/${name}`;
  return {
    name,
    prefix,
    iss: `${issuerUrl}${prefix}`,
    keys: [],               // private JWKs, in the order they were added
    signingKid: undefined,
    header: {},             // POST /token-header
    claims: {},             // POST /token-claims
    fault: {},              // POST /jwks-fault
    metadata: {},           // POST /metadata
    jwks: 0,
    jwksByQuery: {},        // the same, per query string
    discovery: 0,
    oauth: 0,
    token: 0,
    opaque: new Map(),      // POST /opaque: token -> {claims, revoked}
    introspection: {},      // POST /introspection
    introspect: 0,
    introspectLimited: 0,   // answered 429 (limit_per_s)
    introspectWindow: { start: 0, count: 0 },
    introspectHint: null,
    introspectAuth: null,
    mock: undefined,        // the oauth2-mock-server of its key set
  };
}

const realms = new Map([['', newRealm('')]]);
let server = null;          // the HTTPS listener, when running
const sockets = new Set();

function publicState(realm) {
  return {
    realm: realm.name,
    issuer: realm.iss,
    running: server !== null,
    kids: realm.keys.map((k) => k.kid),
    keys: realm.keys.map((k) => ({ kid: k.kid, alg: k.alg })),
    signing_kid: realm.signingKid ?? null,
    jwks_requests: realm.jwks,
    jwks_requests_by_query: realm.jwksByQuery,
    discovery_requests: realm.discovery,
    oauth_metadata_requests: realm.oauth,
    token_requests: realm.token,
    introspect_requests: realm.introspect,
    introspect_limited: realm.introspectLimited,
    introspect_hint: realm.introspectHint,
    introspect_auth: realm.introspectAuth,
    introspection: realm.introspection,
    token_header: realm.header,
    token_claims: realm.claims,
    jwks_fault: realm.fault,
    metadata: realm.metadata,
    realms: [...realms.keys()].filter((n) => n !== ''),
  };
}

// A mock holding exactly the realm's keys.  Never started itself: its
// request handler is served by our listener, which can drop open
// connections on stop (the mock's own server waits for them) and counts
// requests.
async function buildMock(realm) {
  const m = new OAuth2Server();
  for (const k of realm.keys) {
    await m.issuer.keys.add(k);
  }
  m.issuer.url = realm.iss;
  const original = m.issuer.buildToken.bind(m.issuer);
  m.issuer.buildToken = async (opts) => {
    const jwt = await original({ ...opts, kid: realm.signingKid });
    return Object.keys(realm.header).length ? resign(realm, jwt) : jwt;
  };
  m.service.on('beforeTokenSigning', (token) => {
    Object.assign(token.payload, realm.claims);
  });
  return m;
}

// The mock's token with the header of POST /token-header: same key,
// same claims.
async function resign(realm, jwt) {
  const payload = jose.decodeJwt(jwt);
  const old = jose.decodeProtectedHeader(jwt);
  const jwk = realm.keys.find((k) => k.kid === old.kid);
  if (!jwk) throw new Error(`signing key ${old.kid} is gone`);
  const header = { alg: old.alg, typ: 'JWT', kid: old.kid };
  for (const name of ['typ', 'kid']) {
    if (Object.prototype.hasOwnProperty.call(realm.header, name)) {
      if (realm.header[name] === null) delete header[name];
      else header[name] = realm.header[name];
    }
  }
  const key = await jose.importJWK(jwk, jwk.alg);
  return new jose.SignJWT(payload).setProtectedHeader(header).sign(key);
}

// The realm's metadata as POST /metadata shapes it, answered after its
// delay.  place: 'openid' or 'oauth'.
function metadataRequest(realm, place, res) {
  const m = realm.metadata;
  const answer = () => {
    if (place === 'openid' ? m.openid === false : m.oauth !== true) {
      res.writeHead(404, { 'Content-Type': 'application/json' });
      res.end('{"error":"not here"}');
      return;
    }
    if (m.status !== undefined) {
      res.writeHead(m.status, { 'Content-Type': 'application/json' });
      res.end('{"error":"metadata fault"}');
      return;
    }
    let text = m.body;
    if (text === undefined) {
      const doc = {
        issuer: realm.iss,
        jwks_uri: `${realm.iss}${JWKS_PATH}`,
        token_endpoint: `${realm.iss}${TOKEN_PATH}`,
        introspection_endpoint: `${realm.iss}${INTROSPECT_PATH}`,
        grant_types_supported: ['client_credentials'],
        response_types_supported: ['code'],
        subject_types_supported: ['public'],
        id_token_signing_alg_values_supported: ['RS256'],
      };
      for (const name of ['issuer', 'jwks_uri', 'introspection_endpoint']) {
        if (Object.prototype.hasOwnProperty.call(m, name)) {
          if (m[name] === null) delete doc[name];
          else doc[name] = m[name];
        }
      }
      text = JSON.stringify(doc);
    }
    res.writeHead(200, { 'Content-Type': 'application/json' });
    res.end(String(text));
  };
  if (m.delay_ms) setTimeout(answer, m.delay_ms);
  else answer();
}

// RFC 6749 2.3.1: each part of Basic's user:password form-decoded.
function basicCredentials(header) {
  const m = /^Basic ([A-Za-z0-9+/=]+)$/.exec(header || '');
  if (!m) return null;
  const text = Buffer.from(m[1], 'base64').toString('utf8');
  const i = text.indexOf(':');
  if (i < 0) return null;
  const dec = (v) => decodeURIComponent(v.replace(/\+/g, ' '));
  try {
    return { id: dec(text.slice(0, i)), secret: dec(text.slice(i + 1)) };
  } catch (e) {
    return null;
  }
}

// RFC 7662 2: a form POST, the client authenticated; the answer for an
// opaque token of POST /opaque, for a JWT of this realm its claims while
// not expired, else {"active": false}.
function introspectRequest(realm, req, res) {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    const f = realm.introspection;
    const want = { id: f.client_id ?? 'lessons-api', secret: f.secret ?? 'introspect-secret' };
    const cred = basicCredentials(req.headers.authorization);
    const form = new URLSearchParams(Buffer.concat(chunks).toString('utf8'));
    realm.introspectHint = form.get('token_type_hint');
    realm.introspectAuth = cred ? `${cred.id}:${cred.secret === want.secret ? 'right' : 'wrong'} secret` : 'none';
    const send = (status, doc) => {
      res.writeHead(status, { 'Content-Type': 'application/json' });
      res.end(typeof doc === 'string' ? doc : JSON.stringify(doc));
    };
    const answer = () => {
      if (req.method !== 'POST') return send(405, { error: 'POST only' });
      if (!cred || cred.id !== want.id || cred.secret !== want.secret) {
        return send(401, { error: 'invalid_client' });
      }
      realm.introspect++;
      if (f.limit_per_s !== undefined) {
        const w = realm.introspectWindow;
        const now = Date.now();
        if (now - w.start >= 1000) {
          w.start = now;
          w.count = 0;
        }
        if (++w.count > f.limit_per_s) {
          realm.introspectLimited++;
          return send(429, { error: 'slow_down' });
        }
      }
      if (f.status !== undefined) return send(f.status, { error: f.error || 'introspection fault' });
      if (f.body !== undefined) return send(200, String(f.body));
      const token = form.get('token') ?? '';
      const o = realm.opaque.get(token);
      if (o) return send(200, o.revoked ? { active: false } : { active: true, ...o.claims });
      try {
        const claims = jose.decodeJwt(token);
        if (claims.iss === realm.iss && !(realm.revokedJwts ?? new Set()).has(token)
            && (claims.exp ?? 0) > Date.now() / 1000) {
          return send(200, { active: true, ...claims });
        }
      } catch (e) { /* not a JWT */ }
      return send(200, { active: false });
    };
    if (f.delay_ms) setTimeout(answer, f.delay_ms);
    else answer();
  });
}

function jwksRequest(realm, req, res) {
  realm.jwks++;
  // Per query string too, so a test can tell its keys URLs apart.
  const query = (req.url || '').split('?')[1] ?? '';
  realm.jwksByQuery[query] = (realm.jwksByQuery[query] ?? 0) + 1;
  const f = realm.fault;
  const answer = () => {
    if (f.status !== undefined) {
      res.writeHead(f.status, { 'Content-Type': 'application/json' });
      res.end('{"error":"jwks fault"}');
    } else if (f.body !== undefined) {
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end(String(f.body));
    } else if (f.size !== undefined) {
      const text = JSON.stringify({ keys: realm.mock.issuer.keys.toJSON() });
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end(text.padEnd(f.size, ' '));
    } else {
      realm.mock.service.requestHandler(req, res);
    }
  };
  if (f.delay_ms) setTimeout(answer, f.delay_ms);
  else answer();
}

// The realm a path belongs to (the longest prefix), and the path within.
function realmOf(path) {
  let best = realms.get('');
  for (const r of realms.values()) {
    if (r.prefix && (path === r.prefix || path.startsWith(`${r.prefix}/`))
        && r.prefix.length > best.prefix.length) {
      best = r;
    }
  }
  return [best, path.slice(best.prefix.length) || '/'];
}

function providerRequest(req, res) {
  const [path, query] = (req.url || '').split('?');
  // RFC 8414 3.1: the well-known path goes between host and issuer path.
  if (path === OAUTH_PATH || path.startsWith(`${OAUTH_PATH}/`)) {
    const realm = [...realms.values()].find((r) => `${OAUTH_PATH}${r.prefix}` === path);
    if (!realm) {
      res.writeHead(404, { 'Content-Type': 'application/json' });
      res.end('{"error":"no such issuer"}');
      return;
    }
    realm.oauth++;
    metadataRequest(realm, 'oauth', res);
    return;
  }
  const [realm, sub] = realmOf(path);
  req.url = query === undefined ? sub : `${sub}?${query}`;
  if (sub === JWKS_PATH) {
    jwksRequest(realm, req, res);
    return;
  }
  if (sub === DISCOVERY_PATH) {
    realm.discovery++;
    metadataRequest(realm, 'openid', res);
    return;
  }
  if (sub === INTROSPECT_PATH) {
    introspectRequest(realm, req, res);
    return;
  }
  if (sub === TOKEN_PATH) realm.token++;
  realm.mock.service.requestHandler(req, res);
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

async function addKey(realm, body) {
  const alg = body.alg ?? 'RS256';
  if (!ALGS.includes(alg)) throw new Error(`alg must be one of ${ALGS.join(', ')}`);
  if (body.kid !== undefined && (typeof body.kid !== 'string' || body.kid === '')) {
    throw new Error('kid must be a non-empty string');
  }
  if (body.kid !== undefined && realm.keys.some((k) => k.kid === body.kid)) {
    throw new Error(`kid ${body.kid} exists`);
  }
  const jwk = await realm.mock.issuer.keys.generate(alg, body.kid !== undefined ? { kid: body.kid } : undefined);
  realm.keys.push(jwk);
  if (body.sign !== false) realm.signingKid = jwk.kid;
  log(`${realm.iss}: added ${alg} key ${jwk.kid}${body.sign !== false ? ' (signing)' : ''}`);
  return { kid: jwk.kid, alg };
}

async function removeKey(realm, body) {
  const i = realm.keys.findIndex((k) => k.kid === body.kid);
  if (i < 0) throw new Error(`no key ${body.kid}`);
  realm.keys.splice(i, 1);
  if (realm.signingKid === body.kid) {
    realm.signingKid = realm.keys.length ? realm.keys[realm.keys.length - 1].kid : undefined;
  }
  const wasRunning = server !== null;
  await stopProvider();
  realm.mock = await buildMock(realm);
  if (wasRunning) await startProvider();
  log(`${realm.iss}: removed key ${body.kid}${wasRunning ? ', provider restarted' : ''}`);
  return publicState(realm);
}

async function addRealm(body) {
  const name = body.name;
  if (typeof name !== 'string' || !/^[A-Za-z0-9_-]{1,64}$/.test(name)) {
    throw new Error('name must be 1 to 64 of A-Z a-z 0-9 _ -');
  }
  if (realms.has(name)) throw new Error(`realm ${name} exists`);
  const realm = newRealm(name);
  realm.mock = await buildMock(realm);
  realms.set(name, realm);
  await addKey(realm, { alg: body.alg ?? 'RS256' });
  return publicState(realm);
}

function plainObject(body, what) {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    throw new Error(`${what} takes a JSON object`);
  }
  return body;
}

function checkInt(v, name, min, max) {
  if (v !== undefined && !(Number.isInteger(v) && v >= min && v <= max)) {
    throw new Error(`${name} must be ${min}..${max}`);
  }
}

const routes = {
  'GET /state': async (realm) => publicState(realm),
  'POST /realms': async (_realm, body) => addRealm(body),
  'POST /keys': addKey,
  'POST /keys/remove': removeKey,
  'POST /signing': async (realm, body) => {
    if (!realm.keys.some((k) => k.kid === body.kid)) throw new Error(`no key ${body.kid}`);
    realm.signingKid = body.kid;
    return publicState(realm);
  },
  'POST /token-header': async (realm, body) => {
    plainObject(body, '/token-header');
    for (const [name, v] of Object.entries(body)) {
      if (!['typ', 'kid'].includes(name)) throw new Error('only typ and kid can be set');
      if (v !== null && typeof v !== 'string') throw new Error(`${name} must be a string or null`);
    }
    realm.header = { ...body };
    return publicState(realm);
  },
  'POST /token-claims': async (realm, body) => {
    realm.claims = { ...plainObject(body, '/token-claims') };
    return publicState(realm);
  },
  'POST /jwks-fault': async (realm, body) => {
    plainObject(body, '/jwks-fault');
    checkInt(body.status, 'status', 100, 599);
    checkInt(body.size, 'size', 0, 16 * 1024 * 1024);
    checkInt(body.delay_ms, 'delay_ms', 0, 60000);
    checkInt(body.limit_per_s, 'limit_per_s', 0, 100000);
    realm.fault = { ...body };
    return publicState(realm);
  },
  'POST /metadata': async (realm, body) => {
    plainObject(body, '/metadata');
    for (const [name, v] of Object.entries(body)) {
      if (['issuer', 'jwks_uri', 'introspection_endpoint'].includes(name)) {
        if (v !== null && typeof v !== 'string') throw new Error(`${name} must be a string or null`);
      } else if (['openid', 'oauth'].includes(name)) {
        if (typeof v !== 'boolean') throw new Error(`${name} must be true or false`);
      } else if (name === 'body') {
        if (typeof v !== 'string') throw new Error('body must be a string');
      } else if (!['status', 'delay_ms'].includes(name)) {
        throw new Error(`unknown member ${name}`);
      }
    }
    checkInt(body.status, 'status', 100, 599);
    checkInt(body.delay_ms, 'delay_ms', 0, 60000);
    realm.metadata = { ...body };
    return publicState(realm);
  },
  'POST /opaque': async (realm, body) => {
    plainObject(body, '/opaque');
    const now = Math.floor(Date.now() / 1000);
    const claims = {
      iss: realm.iss, aud: 'lessons', sub: 'alice', scope: 'lessons',
      client_id: 'app', iat: now, exp: now + 3600,
      ...plainObject(body.claims ?? {}, 'claims'),
    };
    for (const [k, v] of Object.entries(claims)) if (v === null) delete claims[k];
    const token = require('node:crypto').randomBytes(24).toString('base64url');
    realm.opaque.set(token, { claims, revoked: false });
    return { token };
  },
  'POST /opaque/revoke': async (realm, body) => {
    const o = realm.opaque.get(body.token);
    if (o) o.revoked = true;
    else if (typeof body.token === 'string' && body.token.split('.').length === 3) {
      realm.revokedJwts = realm.revokedJwts ?? new Set();
      realm.revokedJwts.add(body.token);
    } else throw new Error('no such token');
    return publicState(realm);
  },
  'POST /introspection': async (realm, body) => {
    plainObject(body, '/introspection');
    for (const name of Object.keys(body)) {
      if (!['client_id', 'secret', 'status', 'error', 'body', 'delay_ms', 'limit_per_s'].includes(name)) {
        throw new Error(`unknown member ${name}`);
      }
    }
    if (body.error !== undefined && typeof body.error !== 'string') {
      throw new Error('error: a string');
    }
    checkInt(body.status, 'status', 100, 599);
    checkInt(body.delay_ms, 'delay_ms', 0, 60000);
    realm.introspection = { ...body };
    return publicState(realm);
  },
  'POST /stop': async (realm) => {
    await stopProvider();
    log('provider stopped');
    return publicState(realm);
  },
  'POST /start': async (realm) => {
    await startProvider();
    log('provider started');
    return publicState(realm);
  },
  'POST /reset-count': async (realm) => {
    realm.jwks = 0;
    realm.jwksByQuery = {};
    realm.discovery = 0;
    realm.oauth = 0;
    realm.token = 0;
    realm.introspect = 0;
    realm.introspectLimited = 0;
    return publicState(realm);
  },
};

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
  const root = realms.get('');
  root.mock = await buildMock(root);
  await addKey(root, { alg: 'RS256' });
  await startProvider();
  control = http.createServer(controlHandler(routes, 'realm', realms));
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
