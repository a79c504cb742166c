#!/usr/bin/python3
# The seed corpus and key header of t/fuzz, made again with
#   t/fuzz/seeds.py        (from the checkout's root or t/fuzz)
# fuzz_keys.h gets the harnesses' key set (an HS256 secret and the RSA
# key of keys/rs.pem, a test key of no other use); corpus/NAME/ gets a
# few inputs each harness starts from: valid ones, so that the fuzzer
# reaches deep code at once, and near misses.
import base64, hashlib, hmac, json, os, subprocess, sys

HERE = os.path.dirname(os.path.abspath(__file__))
SECRET = b'fuzz-secret-0123456789abcdefghij'
NOW = 1700000000


def b64(b):
    return base64.urlsafe_b64encode(b).rstrip(b'=').decode()


def rsa_numbers():
    text = subprocess.run(['openssl', 'rsa', '-in', os.path.join(HERE, 'keys/rs.pem'),
                           '-noout', '-modulus'], capture_output=True, check=True,
                          text=True).stdout
    n = int(text.strip().split('=', 1)[1], 16)
    return b64(n.to_bytes((n.bit_length() + 7) // 8, 'big')), b64((65537).to_bytes(3, 'big'))


def jws(header, claims, alg):
    h = b64(json.dumps(header, separators=(',', ':')).encode())
    c = b64(json.dumps(claims, separators=(',', ':')).encode())
    signing = (h + '.' + c).encode()
    if alg == 'HS256':
        sig = hmac.new(SECRET, signing, hashlib.sha256).digest()
    else:
        sig = subprocess.run(['openssl', 'dgst', '-sha256', '-sign',
                              os.path.join(HERE, 'keys/rs.pem')], input=signing,
                             capture_output=True, check=True).stdout
    return h + '.' + c + '.' + b64(sig)


def write(name, i, data):
    d = os.path.join(HERE, 'corpus', name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, 'seed-%02d' % i), 'wb') as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def main():
    n, e = rsa_numbers()
    jwks = {'keys': [{'kty': 'oct', 'kid': 'hs', 'alg': 'HS256', 'k': b64(SECRET)},
                     {'kty': 'RSA', 'kid': 'rs', 'use': 'sig', 'n': n, 'e': e}]}
    with open(os.path.join(HERE, 'fuzz_keys.h'), 'w') as f:
        f.write('/* Made by t/fuzz/seeds.py: the harnesses\' key set. */\n')
        f.write('#define FUZZ_JWKS "%s"\n' % json.dumps(jwks, separators=(',', ':'))
                .replace('"', '\\"'))
    base = {'iss': 'https://idp.example', 'aud': 'lessons', 'sub': 'anna',
            'exp': NOW + 3600, 'iat': NOW - 10}
    tokens = [
        ({'alg': 'HS256', 'typ': 'JWT', 'kid': 'hs'}, base, 'HS256'),
        ({'alg': 'RS256', 'kid': 'rs'}, dict(base, preferred_username='anna.k',
          realm_access={'roles': ['editor', 'viewer']}, scope='openid lessons:write'), 'RS256'),
        ({'alg': 'HS256'}, dict(base, aud=['x', 'lessons'], nbf=NOW - 5), 'HS256'),
        ({'alg': 'RS256', 'kid': 'nope'}, base, 'RS256'),
        ({'alg': 'HS256', 'kid': 'hs'}, dict(base, exp=NOW - 100), 'HS256'),
        ({'alg': 'HS256', 'kid': 'hs', 'crit': ['b64']}, base, 'HS256'),
        ({'alg': 'HS256', 'kid': 'hs'}, dict(base, sub=12345, iss='other'), 'HS256'),
        ({'alg': 'HS256', 'kid': 'hs'}, dict(base, iss='https://other.example'), 'HS256'),
    ]
    for i, (h, c, alg) in enumerate(tokens):
        write('token', i, 'Bearer ' + jws(h, c, alg))
    write('token', len(tokens), 'Basic YWxhZGRpbjpvcGVuc2VzYW1l')

    write('jwks', 0, json.dumps(jwks))
    write('jwks', 1, json.dumps({'keys': [{'kty': 'EC', 'crv': 'P-256', 'kid': 'e1',
        'x': 'f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU',
        'y': 'x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0'}]}))
    write('jwks', 2, json.dumps({'keys': [{'kty': 'RSA', 'n': n, 'e': e, 'alg': 'RS512',
        'key_ops': ['verify']}, {'kty': 'oct', 'use': 'enc', 'k': 'AAAA'}]}))
    write('jwks', 3, SECRET.decode() + '\n')
    write('jwks', 4, subprocess.run(['openssl', 'pkey', '-in', os.path.join(HERE, 'keys/rs.pem'),
                                     '-pubout'], capture_output=True, check=True).stdout)

    bodies = ['{"levelId":1,"title":"Begrüßung","order":1}',
              '{"levelId":2,"title":"Zahlen","order":3,"topic":"Alltag",'
              '"description":"Zeile\\neins","isActive":false}',
              '{"LEVELID":1,"title":"a","Title":"b","order":0}',
              '{"title":"\\u200b "}', '[1,2]', '{"order":2147483648}']
    for i, b in enumerate(bodies):
        write('payload', i, b)
        write('json', i, b)

    for i, path in enumerate(['/api/lessons', '/api/lessons/', '/api/lessons/42',
                              '/api/lessons/level/3', '/api/lessons/beginner',
                              '/api/lessons/advanced', '/api/lessons/-9223372036854775808',
                              '/api/lessonsx', '/api/lessons//7']):
        write('route', i, path)

    for i, h in enumerate(['"l42.7.ab"', 'W/"x", "y"', '*', '"l42.7.ab-gzip"\x01gzip;q=0.5',
                           '\x01*;q=1, gzip;q=0', '"a",,"b"']):
        write('etag', i, h)

    for i, h in enumerate(['https://app.example.org', 'http://localhost:3000',
                           'HTTPS://A.example:443\x01authorization, content-type',
                           '*\x01if-match,x-other', 'null', 'https://a.example/']):
        write('cors', i, h)

    iss = 'https://sso.example.org/realms/school'
    meta = {'issuer': iss, 'jwks_uri': iss + '/protocol/openid-connect/certs',
            'id_token_signing_alg_values_supported': ['RS256']}
    for i, (issuer, doc) in enumerate([
            (iss, json.dumps(meta)),
            (iss + '/', json.dumps(meta)),
            ('https://accounts.google.com', json.dumps({'issuer': 'https://accounts.google.com',
                'jwks_uri': 'https://www.googleapis.com/oauth2/v3/certs'})),
            (iss, json.dumps(dict(meta, issuer='https://evil.example'))),
            (iss, '{"issuer":"%s","issuer":"%s","jwks_uri":"https://x/j"}' % (iss, iss)),
            ('https://127.0.0.1:8443', '{"issuer":"https://127.0.0.1:8443","jwks_uri":"http://x/"}'),
            ('lessons-dev', '[]')]):
        write('discovery', i, issuer + '\x01' + doc)

    for i, h in enumerate(['"8e03978e-40d5-43e8-bc93-6894a57f9324"\x01{"levelId":1}',
                           ' "say \\"hi\\" \\\\o/" ', 'k-1', '"a";v=1', '"a", "b"',
                           '"' + 'k' * 255 + '"', '"caf\u00e9"']):
        write('idem', i, h)

    claims = {'sub': 'anna', 'realm_access': {'roles': ['editor']}, 'a.b': 1,
              'a': {'b': 2}, 'scope': 'openid lessons:write', 'n': 42, 't': True}
    for i, name in enumerate(['realm_access.roles', 'a.b', 'scope', 'n', 'sub', 'x..y']):
        write('claims', i, json.dumps(claims) + '\x01' + name + '\x01editor')

    decide_seeds(n, e, base)


# fuzz_decide.c's input: four bytes choosing the policy and the request's
# shape (as its comment lays them out), then the Authorization header, the
# DPoP header, the method and the URI, split at 0x01.
DECIDE_LAYOUTS = ['single_set', 'single_key', 'blocks', 'fetched_none',
                  'fetched_file', 'no_key', 'blocks_fetched', 'no_units',
                  'live', 'blocks_no_key', 'blocks_live', 'any_issuer',
                  'tenants']
DECIDE_URI = 'https://api.example/api/lessons/7'


DECIDE_X5T = 'lwHi5vSo1n3enaiJlcT1HpwWcy0FkQQ2p4K1XXdgMdc'


def decide_selector(layout='single_set', needed=1, broken=0, no_auth=0,
                    no_dpop=1, lines=0, dpop=0, user=0, exports=0, replay=0,
                    block=0, leeway=0, certbind=0, cert=0):
    return bytes([needed | broken << 2 | no_auth << 4 | no_dpop << 5 | lines << 6,
                  DECIDE_LAYOUTS.index(layout),
                  dpop | user << 2 | exports << 4 | replay << 5 | block << 7,
                  leeway | certbind << 1 | cert << 3])


def decide_seeds(n, e, base):
    other = dict(base, iss='https://other.example')
    rs_jwk = {'kty': 'RSA', 'n': n, 'e': e}
    jkt = b64(hashlib.sha256(json.dumps({'e': e, 'kty': 'RSA', 'n': n},
                                        separators=(',', ':')).encode()).digest())
    good_hs = jws({'alg': 'HS256', 'typ': 'JWT', 'kid': 'hs'}, base, 'HS256')
    good_rs = jws({'alg': 'RS256', 'kid': 'rs'},
                  dict(base, email='anna@example.org', preferred_username='anna.k',
                       groups=['editor', 'viewer'], realm_access={'roles': ['editor']}),
                  'RS256')
    other_rs = jws({'alg': 'RS256', 'kid': 'rs'}, other, 'RS256')
    other_hs = jws({'alg': 'HS256', 'kid': 'hs'}, other, 'HS256')
    expired = jws({'alg': 'HS256', 'kid': 'hs'}, dict(base, exp=NOW - 100), 'HS256')
    bad_claims = jws({'alg': 'HS256', 'kid': 'hs'},
                     dict(base, email='eve\nadmin', groups=['a,b', 'c'], sub='x\u0007'),
                     'HS256')
    no_iss = jws({'alg': 'HS256', 'kid': 'hs'},
                 {k: v for k, v in base.items() if k != 'iss'}, 'HS256')
    bad_exports = jws({'alg': 'HS256', 'kid': 'hs'},
                      dict(base, groups=['a,b', 'c'], email='x\u0001y'), 'HS256')
    near_misses = [jws({'alg': 'HS256', 'kid': 'hs'}, c, 'HS256') for c in [
        dict(base, aud='another-api'), dict(base, nbf=NOW + 600),
        {k: v for k, v in base.items() if k != 'exp'}, dict(base, iat=NOW + 600)]]
    bound = jws({'alg': 'HS256', 'kid': 'hs'}, dict(base, cnf={'jkt': jkt}), 'HS256')
    proof = jws({'typ': 'dpop+jwt', 'alg': 'RS256', 'jwk': rs_jwk},
                {'jti': 'proof-1', 'htm': 'GET', 'htu': DECIDE_URI, 'iat': NOW,
                 'ath': b64(hashlib.sha256(bound.encode()).digest())}, 'RS256')
    seeds = [
        (decide_selector(), 'Bearer ' + good_hs),
        (decide_selector(user=2, exports=1), 'Bearer ' + good_rs),
        (decide_selector('single_key'), 'Bearer ' + good_hs),
        (decide_selector('blocks'), 'Bearer ' + other_rs),
        (decide_selector('blocks', user=3, exports=1), 'Bearer ' + good_rs),
        (decide_selector('blocks'), 'Bearer ' + other_hs),
        (decide_selector('fetched_none'), 'Bearer ' + good_hs),
        (decide_selector('fetched_file'), 'Bearer ' + good_rs),
        (decide_selector('no_key'), 'Bearer ' + good_hs),
        (decide_selector('live'), 'Bearer ' + good_rs),
        (decide_selector('blocks_live'), 'Bearer ' + other_rs),
        (decide_selector('blocks_fetched'), 'Bearer ' + other_rs),
        (decide_selector('blocks_no_key'), 'Bearer ' + other_rs),
        (decide_selector('any_issuer'), 'Bearer ' + other_rs),
        (decide_selector(dpop=2, replay=1, no_dpop=0, lines=1),
         'DPoP ' + bound + '\x01' + proof + '\x01GET\x01' + DECIDE_URI),
        (decide_selector(dpop=3, no_dpop=0, lines=2),
         'DPoP ' + bound + '\x01' + proof),
        (decide_selector(dpop=2), 'Bearer ' + bound),
        (decide_selector(dpop=3), 'Bearer ' + good_hs),
        (decide_selector(dpop=1), 'DPoP ' + good_hs),
        (decide_selector(broken=1), 'Bearer ' + good_hs),
        (decide_selector('blocks', broken=2, block=1), 'Bearer ' + other_rs),
        (decide_selector(needed=0), 'Bearer ' + good_hs),
        (decide_selector(), 'Bearer a b'),
        (decide_selector(no_auth=1, dpop=2), ''),
        (decide_selector(leeway=1), 'Bearer ' + expired),
        (decide_selector(user=2, exports=1), 'Bearer ' + bad_claims),
        (decide_selector('blocks'), 'Bearer ' + no_iss),
        (decide_selector('no_units'), 'Bearer ' + good_hs),
        (decide_selector(dpop=2), 'Bearer ' + good_hs),
        (decide_selector(dpop=2, no_dpop=0, lines=1), 'DPoP ' + good_hs + '\x01' + proof),
        (decide_selector(exports=1), 'Bearer ' + bad_exports),
    ] + [(decide_selector(), 'Bearer ' + t) for t in near_misses]
    # Certificate-bound (RFC 8705): fuzz_decide.c's FUZZ_X5T is the
    # connection's certificate where the selector gives one.
    cert_bound = jws({'alg': 'HS256', 'kid': 'hs'},
                     dict(base, cnf={'x5t#S256': DECIDE_X5T}), 'HS256')
    seeds += [
        (decide_selector(certbind=2, cert=1), 'Bearer ' + cert_bound),
        (decide_selector(certbind=3), 'Bearer ' + cert_bound),
        (decide_selector(certbind=3, cert=1), 'Bearer ' + good_hs),
        (decide_selector(certbind=1), 'Bearer ' + cert_bound),
    ]
    # Tenants (issue 55): the request's bytes choose the trust of the
    # three sections naming one keys URL, so a few URIs give a few.
    seeds += [(decide_selector('tenants'), 'Bearer ' + good_rs
               + '\x01\x01GET\x01' + DECIDE_URI + '?tenants=%d' % i)
              for i in range(6)]
    for i, (sel, rest) in enumerate(seeds):
        write('decide', i, sel + rest.encode())


if __name__ == '__main__':
    sys.exit(main())
