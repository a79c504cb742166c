#!/usr/bin/env node
// Licensed under the Apache License, Version 2.0.
//
// client.mjs: the OpenID Certified openid-client (npm, pinned beside
// this file) as the client of t/api/oidc_provider.t (issue 41): it gets
// the access tokens and makes the DPoP proofs the module must take, so
// that neither is made by code written here.  Each call is one command
// and prints one JSON object on stdout; a failure prints the error on
// stderr and exits 1.
//
//   node client.mjs token --issuer URL --client-id ID --client-secret S
//        --resource URI [--scope S] [--dpop-key FILE [--dpop-alg ALG]]
//     Discovery at the issuer, then a client credentials grant
//     (client_secret_basic) for that resource (RFC 8707).  With
//     --dpop-key, a DPoP-bound token (RFC 9449): the key pair is read from
//     FILE (a private JWK), or made and written there when FILE does not
//     exist (--dpop-alg: ES256, the default, PS256 or RS256).  Prints the
//     token response: {access_token, token_type, expires_in, scope}, as
//     openid-client gives it (token_type lowercased: bearer, dpop).
//
//   node client.mjs token --issuer URL --client-id ID --cert FILE
//        --resource URI [--scope S]
//     The same for a client that authenticates with a certificate
//     (self_signed_tls_client_auth, RFC 8705 2.2: openid-client's
//     TlsClientAuth, no secret): the PEM certificate in FILE goes to the
//     test provider in the header provider.mjs reads it from (it is not
//     the TLS terminator: see there), and oidc-provider binds the token
//     to it (cnf x5t#S256).
//
//   node client.mjs revoke --issuer URL --client-id ID --client-secret S
//        --token T
//     Discovery, then the token revoked at the issuer's revocation
//     endpoint (RFC 7009, openid-client's tokenRevocation, with the
//     client the token was issued to).  Prints {revoked: true}.
//
//   node client.mjs request --issuer URL --token T --method M --url URL
//        [--dpop-key FILE] [--body JSON] [--no-send]
//     A protected resource request through openid-client
//     (fetchProtectedResource): Authorization: Bearer T, or with
//     --dpop-key, Authorization: DPoP T and a proof for M and URL made
//     with that key.  Prints {status, www_authenticate, body, dpop,
//     authorization, exchanges}: dpop is the proof sent (null without
//     one), and the rest the last answer's; exchanges lists every request
//     openid-client sent for the call, in order, each with the proof it
//     carried and what came back ({status, www_authenticate, dpop_nonce,
//     dpop}): two where it answered a use_dpop_nonce by itself.  With
//     --no-send the request never leaves: the proof is made as for a real
//     request and printed (status null), for a test to send it itself.
//     http:// URLs are allowed (allowInsecureRequests): the module's test
//     servers are plain HTTP.
//
// The issuer's certificate is trusted through NODE_EXTRA_CA_CERTS (the
// test CA).
import * as fs from 'node:fs';
import * as client from 'openid-client';

const PARAMS = {
  ES256: { name: 'ECDSA', namedCurve: 'P-256' },
  PS256: { name: 'RSA-PSS', hash: 'SHA-256' },
  RS256: { name: 'RSASSA-PKCS1-v1_5', hash: 'SHA-256' },
};

function fail(msg) {
  process.stderr.write(`client: ${msg}\n`);
  process.exit(1);
}

function parseArgs(argv) {
  const a = { command: argv[0] };
  for (let i = 1; i < argv.length; i++) {
    const name = argv[i];
    if (name === '--no-send') {
      a.noSend = true;
      continue;
    }
    const value = argv[++i];
    if (!name.startsWith('--') || value === undefined) fail(`bad argument ${name}`);
    a[name.slice(2).replace(/-([a-z])/g, (m, c) => c.toUpperCase())] = value;
  }
  return a;
}

function need(a, ...names) {
  for (const n of names) {
    if (a[n] === undefined) fail(`${a.command} needs --${n.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`);
  }
}

// The DPoP key pair in file (a private JWK with its alg), made there
// first when the file does not exist.
async function keyPair(file, alg = 'ES256') {
  if (!fs.existsSync(file)) {
    if (!PARAMS[alg]) fail(`--dpop-alg must be one of ${Object.keys(PARAMS).join(', ')}`);
    const pair = await client.randomDPoPKeyPair(alg, { extractable: true });
    const jwk = await crypto.subtle.exportKey('jwk', pair.privateKey);
    fs.writeFileSync(file, JSON.stringify({ ...jwk, alg }), { mode: 0o600 });
    return pair;
  }
  const jwk = JSON.parse(fs.readFileSync(file, 'utf8'));
  const params = PARAMS[jwk.alg];
  if (!params) fail(`${file}: no key of ES256, PS256 or RS256`);
  const { d, p, q, dp, dq, qi, key_ops: ops, ...pub } = jwk;
  return {
    privateKey: await crypto.subtle.importKey('jwk', { ...jwk, key_ops: ['sign'] }, params, false, ['sign']),
    publicKey: await crypto.subtle.importKey('jwk', { ...pub, key_ops: ['verify'] }, params, true, ['verify']),
  };
}

// The header of t/oidcp/provider.mjs's getCertificate: only this
// harness sets it, only the test provider reads it.
const CERT_HEADER = 'x-lessons-test-client-cert';

async function token(a) {
  need(a, 'issuer', 'clientId', 'resource');
  if (a.cert === undefined) need(a, 'clientSecret');
  const config = await client.discovery(new URL(a.issuer), a.clientId, undefined,
                                        a.cert === undefined
                                          ? client.ClientSecretBasic(a.clientSecret)
                                          : client.TlsClientAuth());
  if (a.cert !== undefined) {
    const pem = encodeURIComponent(fs.readFileSync(a.cert, 'utf8'));
    config[client.customFetch] = (url, init) => {
      const headers = new Headers(init.headers);
      headers.set(CERT_HEADER, pem);
      return fetch(url, { ...init, headers });
    };
  }
  const options = a.dpopKey
    ? { DPoP: client.getDPoPHandle(config, await keyPair(a.dpopKey, a.dpopAlg)) }
    : undefined;
  const params = { resource: a.resource };
  if (a.scope !== undefined) params.scope = a.scope;
  const res = await client.clientCredentialsGrant(config, params, options);
  return {
    access_token: res.access_token,
    token_type: res.token_type,
    expires_in: res.expires_in,
    scope: res.scope,
  };
}

async function request(a) {
  need(a, 'issuer', 'token', 'method', 'url');
  // No discovery: a resource request needs none of the issuer's metadata.
  const config = new client.Configuration({ issuer: a.issuer }, 'lessons-test');
  client.allowInsecureRequests(config);
  const seen = { status: null, www_authenticate: null, body: null, dpop: null, authorization: null,
                 exchanges: [] };
  // Watches what openid-client sends and gets, and changes nothing: a
  // retry is openid-client's own doing.
  config[client.customFetch] = async (url, init) => {
    const h = new Headers(init.headers);
    seen.dpop = h.get('dpop');
    seen.authorization = h.get('authorization');
    if (a.noSend) return new Response(null, { status: 204 });
    const res = await fetch(url, init);
    seen.status = res.status;
    seen.www_authenticate = res.headers.get('www-authenticate');
    seen.body = await res.clone().text();
    seen.exchanges.push({ status: res.status, www_authenticate: seen.www_authenticate,
                          dpop_nonce: res.headers.get('dpop-nonce'), dpop: seen.dpop });
    return res;
  };
  const headers = new Headers();
  if (a.body !== undefined) headers.set('content-type', 'application/json');
  const options = a.dpopKey
    ? { DPoP: client.getDPoPHandle(config, await keyPair(a.dpopKey)) }
    : undefined;
  try {
    await client.fetchProtectedResource(config, a.token, new URL(a.url), a.method.toUpperCase(),
                                        a.body, headers, options);
  } catch (e) {
    // A refusal with a challenge is openid-client's error: what the
    // server answered is in seen all the same.
    if (seen.status === null) throw e;
  }
  return seen;
}

async function revoke(a) {
  need(a, 'issuer', 'clientId', 'clientSecret', 'token');
  const config = await client.discovery(new URL(a.issuer), a.clientId, undefined,
                                        client.ClientSecretBasic(a.clientSecret));
  await client.tokenRevocation(config, a.token, { token_type_hint: 'access_token' });
  return { revoked: true };
}

const commands = { token, request, revoke };
const args = parseArgs(process.argv.slice(2));
if (!commands[args.command]) fail('usage: node client.mjs token|request|revoke --option value ...');
try {
  process.stdout.write(`${JSON.stringify(await commands[args.command](args))}\n`);
} catch (e) {
  fail(`${e.message}${e.cause ? ` (${e.cause.message ?? JSON.stringify(e.cause)})` : ''}`
       + `${e.error ? `: ${e.error} ${e.error_description ?? ''}` : ''}`);
}
