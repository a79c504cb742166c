#!/usr/bin/env node
// Licensed under the Apache License, Version 2.0.
//
// provider.mjs: the OpenID Certified oidc-provider (npm, pinned in
// package.json and package-lock.json beside this file) as the identity
// provider of t/api/oidc_provider.t (issue 41): what no one here wrote
// issues the tokens the module must take.  Nothing of the provider's
// behaviour is changed; this file only configures it, serves it over
// TLS, counts its requests and, on the control port, changes its keys.
//
//   node provider.mjs --port P --other-port Q --control-port C
//                     --cert FILE --key FILE --resource URI [--resource URI]
//                     [--opaque-resource URI ...] [--mtls-cert FILE ...]
//
// Its modules: make oidcp-deps installs them in build/oidcp/node_modules;
// t/tools/integration.sh copies them next to its copy of this file (ES
// modules find their packages in a node_modules beside or above them,
// never in NODE_PATH) and names that directory in LESSONS_TEST_OIDCP.
// oidc-provider 9 asks for Node.js 22 (it warns on 20, and works on
// 20.19, Debian 13's); t/oidcp/selftest.sh exercises all of this.
//
// Two issuers, each an oidc-provider of its own on 127.0.0.1 over HTTPS
// with the given certificate (the caller makes a test CA and a
// certificate for IP:127.0.0.1):
//   https://127.0.0.1:P   the issuer the module is told of
//   https://127.0.0.1:Q   another issuer, with keys of its own
// Each serves oidc-provider's routes: /.well-known/openid-configuration,
// /jwks, /token, ...  When all listeners are up, one line
// "oidcp ready https://127.0.0.1:P https://127.0.0.1:Q" goes to stdout.
// SIGTERM or SIGINT closes them and exits 0.
//
// Keys: each issuer starts with one signing key per algorithm, RS256
// (kid rs256-1), PS256 (ps256-1), ES256 (es256-1), RSA keys of 2048
// bits, each JWK with its "alg" and "use": "sig".  The first key of an
// algorithm in the set signs (oidc-provider's own choice): a new key is
// put first.
//
// Clients, the same at both issuers (client_secret_basic, grant type
// client_credentials only): lessons-rs256, lessons-ps256, lessons-es256,
// whose access tokens are signed with that algorithm; their secrets are
// in GET /state.  Resource indicators (RFC 8707): the --resource URIs,
// each a resource server whose access tokens are RFC 9068 JWTs (typ
// at+jwt) with that URI as their audience, scope "lessons:read
// lessons:write", 600 s; any other resource is invalid_target.  DPoP
// (RFC 9449) is on, proofs ES256, PS256 or RS256, no nonce: a token
// request with a proof gets a token bound to its key (cnf.jkt).
//
// Issue 44's parts 1 and 3 (t/api/oidcp_fapi.t), each off unless its
// option is given, so that the other suites see the provider (its
// metadata, its clients) as before:
//   --opaque-resource URI   a resource server whose access tokens are
//       opaque (accessTokenFormat 'opaque'), scope as above, 600 s; with
//       it, features.introspection (RFC 7662, /token/introspection) and
//       features.revocation (RFC 7009, /token/revocation) are on, and the
//       resource server's own client, lessons-introspect
//       (client_secret_basic, no grant: it only introspects), may
//       introspect any token; a token is revoked by the client it was
//       issued to (oidc-provider's rule).  Its secret is in GET /state,
//       introspection_client.
//   --mtls-cert FILE        features.mTLS with certificateBoundAccessTokens
//       and self_signed_tls_client_auth (RFC 8705 2.2 and 3): a client
//       lessons-mtls, registered with the certificates of these PEM files
//       (its jwks, x5c), whose access tokens (ES256 JWTs, or opaque for
//       an opaque resource) carry cnf x5t#S256 of the certificate it
//       authenticated with.  oidc-provider is not the TLS terminator
//       here: see getCertificate below.  GET /state names it,
//       mtls_client.
//
// Control, plain HTTP on 127.0.0.1:C, JSON in and out; ?issuer=other
// for the other issuer (default the first):
//   GET  /state          {issuer, keys: [{kid, alg}], signing: {alg:
//                         kid}, clients: [{client_id, client_secret,
//                         alg}], resources, discovery_requests,
//                         jwks_requests, token_requests,
//                         introspection_requests, revocation_requests,
//                         requests_by_agent: {"mod_lessons": {discovery,
//                         jwks, token, introspection, revocation},
//                         "openid-client": {...}, ...},
//                         introspection_client: {client_id,
//                         client_secret} (with --opaque-resource),
//                         mtls_client: {client_id} (with --mtls-cert),
//                         listening: true|false}
//   POST /keys           {"alg": "RS256"|"PS256"|"ES256", "kid"?: "..."}:
//                         a new key, first in the set: it signs that
//                         algorithm's next tokens.  Answers {kid, alg}.
//   POST /keys/remove    {"kid": "..."}: that key leaves the set.
//   POST /reset-count    zero the request counts
//   POST /stop           close that issuer's HTTPS listener (its open
//                         connections too): the provider is down to its
//                         callers; its tokens, kept in the process's
//                         memory, live on
//   POST /start          listen again on the same port
// A change of keys builds that issuer's provider anew with the new set
// (oidc-provider reads its keys once); the listener stays.  Each POST
// answers the state (or {kid, alg} for /keys); a bad request answers
// 400 {"error": ...}.
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as https from 'node:https';
import Provider, { errors } from 'oidc-provider';
// The control port's plumbing, shared with t/idp/idp.js.
import idpControl from '../idp/control.js';

const { controlHandler } = idpControl;

const HOST = '127.0.0.1';
const ALGS = ['RS256', 'PS256', 'ES256'];
const SCOPE = 'lessons:read lessons:write';
const TTL = 600;

function log(msg) {
  process.stderr.write(`oidcp: ${msg}\n`);
}

function usage(msg) {
  if (msg) log(msg);
  process.stderr.write('usage: node provider.mjs --port P --other-port Q --control-port C'
                       + ' --cert FILE --key FILE --resource URI [--resource URI]'
                       + ' [--opaque-resource URI ...] [--mtls-cert FILE ...]\n');
  process.exit(2);
}

function parseArgs(argv) {
  const a = { resources: [], opaqueResources: [], mtlsCerts: [] };
  for (let i = 0; i < argv.length; i += 2) {
    const name = argv[i];
    const value = argv[i + 1];
    if (value === undefined) usage(`${name} needs a value`);
    switch (name) {
      case '--port': a.port = Number(value); break;
      case '--other-port': a.otherPort = Number(value); break;
      case '--control-port': a.controlPort = Number(value); break;
      case '--cert': a.cert = value; break;
      case '--key': a.key = value; break;
      case '--resource': a.resources.push(value); break;
      case '--opaque-resource': a.opaqueResources.push(value); break;
      case '--mtls-cert': a.mtlsCerts.push(value); break;
      default: usage(`unknown option ${name}`);
    }
  }
  for (const p of ['port', 'otherPort', 'controlPort']) {
    if (!Number.isInteger(a[p]) || a[p] < 1 || a[p] > 65535) usage('the ports must be 1..65535');
  }
  if (!a.cert || !a.key) usage('--cert and --key are required');
  if (!a.resources.length) usage('at least one --resource is required');
  return a;
}

const args = parseArgs(process.argv.slice(2));
const tls = { cert: fs.readFileSync(args.cert), key: fs.readFileSync(args.key) };

// The clients, one per algorithm of its access tokens.
const clients = ALGS.map((alg) => ({
  client_id: `lessons-${alg.toLowerCase()}`,
  client_secret: `${alg.toLowerCase()}-${crypto.randomBytes(24).toString('base64url')}`,
  alg,
}));
const algOfClient = new Map(clients.map((c) => [c.client_id, c.alg]));

// Issue 44, part 3: the resource server's introspection client.
const introspector = args.opaqueResources.length
  ? { client_id: 'lessons-introspect',
      client_secret: `introspect-${crypto.randomBytes(24).toString('base64url')}` }
  : undefined;

// Issue 44, part 1: the client with certificates, each a key of its
// jwks with the certificate in x5c (what self_signed_tls_client_auth
// matches the presented certificate's thumbprint against).
const MTLS_CLIENT = 'lessons-mtls';
const mtlsKeys = args.mtlsCerts.map((file, i) => {
  const cert = new crypto.X509Certificate(fs.readFileSync(file));
  return { ...cert.publicKey.export({ format: 'jwk' }), kid: `mtls-${i + 1}`, use: 'sig',
           x5c: [cert.raw.toString('base64')] };
});
if (mtlsKeys.length) algOfClient.set(MTLS_CLIENT, 'ES256');

// oidc-provider is not the TLS terminator in the tests (node's https
// here asks for no client certificate): the certificate of a token
// request is the PEM that the test harness, and only it (client.mjs
// token --cert), sends URL-encoded in this header.  This is the test
// provider's own token endpoint, never the module: mod_lessons reads
// its client's certificate from mod_ssl and from nothing else.
const CERT_HEADER = 'x-lessons-test-client-cert';

// A private JWK for alg, with kid, alg and use.
function newKey(alg, kid) {
  const pair = alg === 'ES256'
    ? crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' })
    : crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
  return { ...pair.privateKey.export({ format: 'jwk' }), kid, alg, use: 'sig' };
}

// ------------------------------------------------------------- issuers

function newIssuer(name, port) {
  return {
    name,
    port,
    iss: `https://${HOST}:${port}`,
    keys: ALGS.map((alg) => newKey(alg, `${alg.toLowerCase()}-1`)),
    serial: 1,              // the last kid's number
    provider: undefined,
    callback: undefined,
    server: undefined,
    sockets: new Set(),
    discovery: 0,
    jwks: 0,
    token: 0,
    introspection: 0,
    revocation: 0,
    byAgent: {},            // the same, per User-Agent product
  };
}

const issuers = new Map([
  ['', newIssuer('', args.port)],
  ['other', newIssuer('other', args.otherPort)],
]);

// oidc-provider as configured for the module's tests: client credentials
// only, JWT access tokens per resource indicator, DPoP.
function build(issuer) {
  const configured = clients.map((c) => ({
    client_id: c.client_id,
    client_secret: c.client_secret,
    grant_types: ['client_credentials'],
    response_types: [],
    redirect_uris: [],
    token_endpoint_auth_method: 'client_secret_basic',
  }));
  if (introspector) {
    configured.push({
      ...introspector,
      grant_types: [],
      response_types: [],
      redirect_uris: [],
      token_endpoint_auth_method: 'client_secret_basic',
    });
  }
  if (mtlsKeys.length) {
    configured.push({
      client_id: MTLS_CLIENT,
      grant_types: ['client_credentials'],
      response_types: [],
      redirect_uris: [],
      token_endpoint_auth_method: 'self_signed_tls_client_auth',
      tls_client_certificate_bound_access_tokens: true,
      jwks: { keys: mtlsKeys },
    });
  }
  const optional = {};
  if (introspector) {
    optional.introspection = {
      enabled: true,
      // The resource server's client may learn about any token; a client
      // about its own only.
      allowedPolicy: async (ctx, client, token) => client.clientId === introspector.client_id
        || client.clientId === token.clientId,
    };
    optional.revocation = { enabled: true };
  }
  if (mtlsKeys.length) {
    optional.mTLS = {
      enabled: true,
      certificateBoundAccessTokens: true,
      selfSignedTlsClientAuth: true,
      tlsClientAuth: false,
      getCertificate: (ctx) => {
        const pem = ctx.get(CERT_HEADER);
        return pem ? decodeURIComponent(pem) : undefined;
      },
      // Only for tls_client_auth, which no client here uses.
      certificateAuthorized: () => false,
      certificateSubjectMatches: () => false,
    };
  }
  const provider = new Provider(issuer.iss, {
    clients: configured,
    jwks: { keys: issuer.keys },
    features: {
      devInteractions: { enabled: false },
      clientCredentials: { enabled: true },
      dPoP: { enabled: true },
      resourceIndicators: {
        enabled: true,
        defaultResource: async () => undefined,
        useGrantedResource: async () => false,
        getResourceServerInfo: async (ctx, resource, client) => {
          if (args.opaqueResources.includes(resource)) {
            return { scope: SCOPE, accessTokenFormat: 'opaque', accessTokenTTL: TTL };
          }
          if (!args.resources.includes(resource)) {
            throw new errors.InvalidTarget('not a resource of this provider');
          }
          return {
            scope: SCOPE,
            accessTokenFormat: 'jwt',
            accessTokenTTL: TTL,
            jwt: { sign: { alg: algOfClient.get(client.clientId) } },
          };
        },
      },
      ...optional,
    },
    enabledJWA: {
      dPoPSigningAlgValues: ['ES256', 'PS256', 'RS256'],
    },
    ttl: { ClientCredentials: TTL, AccessToken: TTL },
    // oidc-provider's default methods, and with --mtls-cert the
    // certificate's own (it is offered only when listed here).
    ...(mtlsKeys.length ? {
      clientAuthMethods: ['client_secret_basic', 'client_secret_jwt', 'client_secret_post',
                          'private_key_jwt', 'none', 'self_signed_tls_client_auth'],
    } : {}),
    clientBasedCORS: () => false,
    cookies: { keys: [crypto.randomBytes(32).toString('base64url')] },
  });
  provider.on('server_error', (ctx, err) => log(`${issuer.iss}: server_error: ${err.stack}`));
  provider.on('grant.error', (ctx, err) => log(`${issuer.iss}: token request refused: ${err.message}`
                                              + `${err.error_description ? `: ${err.error_description}` : ''}`));
  issuer.provider = provider;
  issuer.callback = provider.callback();
}

function state(issuer) {
  const signing = {};
  for (const k of issuer.keys) {
    if (!(k.alg in signing)) signing[k.alg] = k.kid;
  }
  return {
    issuer: issuer.iss,
    keys: issuer.keys.map((k) => ({ kid: k.kid, alg: k.alg })),
    signing,
    clients: clients.map((c) => ({ ...c })),
    resources: args.resources,
    discovery_requests: issuer.discovery,
    jwks_requests: issuer.jwks,
    token_requests: issuer.token,
    introspection_requests: issuer.introspection,
    revocation_requests: issuer.revocation,
    requests_by_agent: issuer.byAgent,
    ...(introspector ? { introspection_client: { ...introspector } } : {}),
    ...(mtlsKeys.length ? { mtls_client: { client_id: MTLS_CLIENT } } : {}),
    listening: !!issuer.server,
  };
}

// Requests are counted per User-Agent product too ("openid-client",
// "mod_lessons", "curl": the User-Agent up to its first "/" or space),
// so that a test tells the module's fetches from its client's discovery.
function count(issuer, what, req) {
  issuer[what]++;
  const agent = (req.headers['user-agent'] || '(none)').split(/[/ ]/)[0];
  const counts = issuer.byAgent[agent] ??= { discovery: 0, jwks: 0, token: 0,
                                            introspection: 0, revocation: 0 };
  counts[what]++;
}

function start(issuer) {
  const server = https.createServer(tls, (req, res) => {
    const path = (req.url || '').split('?')[0];
    if (path === '/.well-known/openid-configuration') count(issuer, 'discovery', req);
    else if (path === '/jwks') count(issuer, 'jwks', req);
    else if (path === '/token') count(issuer, 'token', req);
    else if (path === '/token/introspection') count(issuer, 'introspection', req);
    else if (path === '/token/revocation') count(issuer, 'revocation', req);
    issuer.callback(req, res);
  });
  server.on('connection', (sock) => {
    issuer.sockets.add(sock);
    sock.on('close', () => issuer.sockets.delete(sock));
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(issuer.port, HOST, () => {
      server.removeListener('error', reject);
      issuer.server = server;
      resolve();
    });
  });
}

// Closes the listener and its connections; answers once it is closed.
function stop(issuer) {
  const { server } = issuer;
  if (!server) return Promise.resolve();
  issuer.server = undefined;
  return new Promise((resolve) => {
    server.close(() => resolve());
    for (const sock of issuer.sockets) sock.destroy();
  });
}

// ------------------------------------------------------------- control

function addKey(issuer, body) {
  const alg = body.alg;
  if (!ALGS.includes(alg)) throw new Error(`alg must be one of ${ALGS.join(', ')}`);
  let kid = body.kid;
  if (kid === undefined) {
    do {
      issuer.serial++;
      kid = `${alg.toLowerCase()}-${issuer.serial}`;
    } while (issuer.keys.some((k) => k.kid === kid));
  }
  if (typeof kid !== 'string' || kid === '') throw new Error('kid must be a non-empty string');
  if (issuer.keys.some((k) => k.kid === kid)) throw new Error(`kid ${kid} is taken`);
  issuer.keys.unshift(newKey(alg, kid));
  build(issuer);
  log(`${issuer.iss}: key ${kid} (${alg}) added: it signs ${alg} from now on`);
  return { kid, alg };
}

function removeKey(issuer, body) {
  const at = issuer.keys.findIndex((k) => k.kid === body.kid);
  if (at < 0) throw new Error(`no key ${body.kid}`);
  const [gone] = issuer.keys.splice(at, 1);
  if (!issuer.keys.some((k) => k.alg === gone.alg)) {
    issuer.keys.splice(at, 0, gone);
    throw new Error(`${gone.kid} is the last ${gone.alg} key: add another first`);
  }
  build(issuer);
  log(`${issuer.iss}: key ${gone.kid} removed`);
  return state(issuer);
}

const routes = {
  'GET /state': (issuer) => state(issuer),
  'POST /keys': addKey,
  'POST /keys/remove': removeKey,
  'POST /reset-count': (issuer) => {
    issuer.discovery = 0;
    issuer.jwks = 0;
    issuer.token = 0;
    issuer.introspection = 0;
    issuer.revocation = 0;
    issuer.byAgent = {};
    return state(issuer);
  },
  'POST /stop': async (issuer) => {
    await stop(issuer);
    log(`${issuer.iss}: stopped listening`);
    return state(issuer);
  },
  'POST /start': async (issuer) => {
    if (!issuer.server) await start(issuer);
    log(`${issuer.iss}: listening again`);
    return state(issuer);
  },
};

// ------------------------------------------------------------- main

let control = null;

function shutdown(sig) {
  log(`${sig}: stopping`);
  for (const issuer of issuers.values()) {
    if (issuer.server) issuer.server.close();
    for (const sock of issuer.sockets) sock.destroy();
  }
  if (control) {
    control.close();
    control.closeAllConnections?.();
  }
  process.exit(0);
}

async function main() {
  for (const issuer of issuers.values()) {
    build(issuer);
    await start(issuer);
  }
  control = http.createServer(controlHandler(routes, 'issuer', issuers));
  await new Promise((resolve, reject) => {
    control.once('error', reject);
    control.listen(args.controlPort, HOST, resolve);
  });
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
  const list = [...issuers.values()].map((i) => i.iss).join(' ');
  process.stdout.write(`oidcp ready ${list}\n`);
}

main().catch((e) => {
  log(`cannot start: ${e.stack}`);
  process.exit(1);
});
