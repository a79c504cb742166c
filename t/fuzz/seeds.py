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


if __name__ == '__main__':
    sys.exit(main())
