#!/bin/bash
# Prove t/oidcp by hand (not part of make test; t/api/oidc_provider.t
# is): a test CA and a certificate for 127.0.0.1, provider.mjs started,
# then its discovery and keys through curl --cacert, tokens of each
# client through client.mjs (openid-client) checked against the keys
# with jose, a DPoP-bound token and a proof made without sending, a key
# added and one removed, the other issuer, the request counts and a bad
# control request; then issue 44's parts (--opaque-resource, --mtls-cert):
# an opaque token introspected and revoked, a token bound to a client
# certificate, the listener stopped and started again.
#
#   make oidcp-deps && t/oidcp/selftest.sh      (NODE=/path/to/node to pick
#                                               another Node.js)
# Prints one line per check and "selftest: N passed, N failed".
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
# The pinned Node.js (t/oidcp/package.json) where npm had one for this machine.
NODE=${NODE:-}
die() { echo "selftest: $*" >&2; exit 1; }
# ES modules find their packages only beside or above them: the scripts
# are copied into the work directory as t/ has them (provider.mjs takes
# ../idp/control.js), next to a link to the modules.
if [ -d "$ROOT/t/oidcp/node_modules" ]; then
    MODS=$ROOT/t/oidcp/node_modules
else
    [ -d "$ROOT/build/oidcp/node_modules" ] || die "run make oidcp-deps first"
    MODS=$ROOT/build/oidcp/node_modules
fi
if [ -z "$NODE" ]; then
    NODE=node
    [ -x "$MODS/.bin/node" ] && NODE=$MODS/.bin/node
fi
. "$ROOT/t/tools/ports.sh"

W=$(mktemp -d "${TMPDIR:-/tmp}/oidcp-selftest.XXXXXX")
PID=""
cleanup() {
    [ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
    rm -rf "$W"
}
trap cleanup EXIT
mkdir "$W/oidcp" "$W/idp"
cp "$ROOT/t/oidcp/provider.mjs" "$ROOT/t/oidcp/client.mjs" "$ROOT/t/oidcp/package.json" "$W/oidcp/"
cp "$ROOT/t/idp/control.js" "$W/idp/"
ln -s "$MODS" "$W/oidcp/node_modules"

pass=0 fail=0
ok()  { pass=$((pass + 1)); echo "ok    $*"; }
nok() { fail=$((fail + 1)); echo "FAIL  $*"; }
check() { # check NAME EXPECTED ACTUAL
    if [ "$2" = "$3" ]; then ok "$1: $3"; else nok "$1: expected '$2', got '$3'"; fi
}

# --- a CA and the provider's certificate --------------------------------
(
    cd "$W"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
        -keyout ca.key -out ca.crt -subj /CN=oidcp-selftest-ca -days 2
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
        -keyout op.key -out op.csr -subj /CN=127.0.0.1
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' > op.ext
    openssl x509 -req -in op.csr -CA ca.crt -CAkey ca.key -CAcreateserial \
        -days 2 -extfile op.ext -out op.crt
    for c in a b; do
        openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
            -keyout $c.key -out $c.pem -subj /CN=client-$c -days 2
    done
) >"$W/openssl.log" 2>&1 || { cat "$W/openssl.log" >&2; die "openssl failed"; }

API=https://api.lessons.test/
OPAQUE=https://opaque.lessons.test/
P=$(pick_port)
Q=$(pick_port "$P")
C=$(pick_port "$Q")
echo "selftest: $("$NODE" --version), issuers on $P and $Q, control port $C"
"$NODE" "$W/oidcp/provider.mjs" --port "$P" --other-port "$Q" --control-port "$C" \
    --cert "$W/op.crt" --key "$W/op.key" --resource "$API" \
    --opaque-resource "$OPAQUE" --mtls-cert "$W/a.pem" \
    >"$W/op.out" 2>"$W/op.err" &
PID=$!
for _ in $(seq 1 100); do
    grep -q '^oidcp ready ' "$W/op.out" 2>/dev/null && break
    kill -0 "$PID" 2>/dev/null || { cat "$W/op.err" >&2; die "provider.mjs exited"; }
    sleep 0.2
done
ISS=https://127.0.0.1:$P
OTHER=https://127.0.0.1:$Q
check "ready line" "oidcp ready $ISS $OTHER" "$(head -n 1 "$W/op.out")"

CTL=http://127.0.0.1:$C
get()   { curl -sS --max-time 10 --cacert "$W/ca.crt" "$@"; }
ctl()   { local path=$1; shift; curl -sS --max-time 20 -X POST -H 'Content-Type: application/json' \
              "$CTL$path" "$@"; }
state() { curl -sS --max-time 10 "$CTL/state${1:+?issuer=$1}"; }
js()    { "$NODE" -e "$1" "${@:2}"; }
field() { js 'const o=JSON.parse(process.argv[1]);const v=process.argv[2].split(".").reduce((a,k)=>a==null?a:a[k],o);console.log(typeof v==="object"?JSON.stringify(v):v)' "$1" "$2"; }
client() { NODE_EXTRA_CA_CERTS=$W/ca.crt "$NODE" "$W/oidcp/client.mjs" "$@"; }
secret() { field "$(state "${2:-}")" "clients" | js 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.parse(s).find(c=>c.alg===process.argv[1]).client_secret))' "$1"; }
# token ALG [ISSUER] [client.mjs options]: the access token
token() {
    local alg=$1 iss=${2:-$ISS}; shift; shift || true
    client token --issuer "$iss" --client-id "lessons-${alg,,}" \
        --client-secret "$(secret "$alg" "$([ "$iss" = "$OTHER" ] && echo other)")" \
        --resource "$API" "$@"
}
part() { js 'console.log(Buffer.from(process.argv[1].split(".")[+process.argv[2]],"base64url").toString())' "$1" "$2"; }
# Verify a token against a JWKS text with jose (oidc-provider's): the kid.
verify() {
    js 'import("'"$MODS"'/jose/dist/webapi/index.js").then(async jose => {
          try { const r = await jose.jwtVerify(process.argv[1], jose.createLocalJWKSet(JSON.parse(process.argv[2])),
                                               { typ: "at+jwt" });
                console.log("verified " + r.protectedHeader.kid); }
          catch (e) { console.log("refused " + e.code); } })' "$1" "$2"
}

# --- discovery, keys, a token of each client -------------------------------
DISC=$(get "$ISS/.well-known/openid-configuration")
check "discovery issuer" "$ISS" "$(field "$DISC" issuer)"
check "discovery jwks_uri" "$ISS/jwks" "$(field "$DISC" jwks_uri)"
JWKS=$(get "$ISS/jwks")
check "JWKS kids and algs" '["rs256-1 RS256","ps256-1 PS256","es256-1 ES256"]' \
    "$(js 'console.log(JSON.stringify(JSON.parse(process.argv[1]).keys.map(k=>k.kid+" "+k.alg)))' "$JWKS")"
check "JWKS has no private member" "" \
    "$(js 'console.log(JSON.parse(process.argv[1]).keys.filter(k=>"d" in k).map(k=>k.kid).join())' "$JWKS")"
for alg in RS256 PS256 ES256; do
    T=$(field "$(token "$alg")" access_token)
    H=$(part "$T" 0)
    check "$alg token header" "at+jwt $alg ${alg,,}-1" "$(field "$H" typ) $(field "$H" alg) $(field "$H" kid)"
    check "$alg token aud and iss" "$API $ISS" "$(field "$(part "$T" 1)" aud) $(field "$(part "$T" 1)" iss)"
    check "$alg token verifies against the JWKS" "verified ${alg,,}-1" "$(verify "$T" "$JWKS")"
done
code=0; client token --issuer "$ISS" --client-id lessons-rs256 --client-secret "$(secret RS256)" \
    --resource https://nowhere.test/ >/dev/null 2>"$W/client.err" || code=$?
check "another resource refused (invalid_target)" "1 1" \
    "$code $(grep -c invalid_target "$W/client.err" || true)"

# --- DPoP -------------------------------------------------------------------
R=$(token ES256 "$ISS" --dpop-key "$W/dpop.jwk" --dpop-alg PS256)
T=$(field "$R" access_token)
check "DPoP token_type (openid-client lowercases it)" dpop "$(field "$R" token_type)"
check "DPoP token bound (cnf.jkt)" 43 "$(field "$(part "$T" 1)" cnf.jkt | tr -d '\n' | wc -c)"
P1=$(client request --issuer "$ISS" --token "$T" --method GET --url http://127.0.0.1:1/api/lessons \
         --dpop-key "$W/dpop.jwk" --no-send)
PROOF=$(field "$P1" dpop)
check "proof header" "dpop+jwt PS256" "$(field "$(part "$PROOF" 0)" typ) $(field "$(part "$PROOF" 0)" alg)"
check "proof htm htu" "GET http://127.0.0.1:1/api/lessons" \
    "$(field "$(part "$PROOF" 1)" htm) $(field "$(part "$PROOF" 1)" htu)"
check "not sent" "null DPoP" "$(field "$P1" status) $(field "$P1" authorization | cut -d' ' -f1)"

# --- keys: add, remove --------------------------------------------------------
KID=$(field "$(ctl /keys -d '{"alg":"RS256"}')" kid)
check "new key" rs256-2 "$KID"
check "it signs" rs256-2 "$(field "$(part "$(field "$(token RS256)" access_token)" 0)" kid)"
ctl /keys/remove -d '{"kid":"rs256-1"}' >/dev/null
check "JWKS after remove" '["rs256-2","ps256-1","es256-1"]' \
    "$(js 'console.log(JSON.stringify(JSON.parse(process.argv[1]).keys.map(k=>k.kid)))' "$(get "$ISS/jwks")")"
check "the last key of an alg stays" 400 \
    "$(curl -s -o /dev/null -w '%{http_code}' -X POST "$CTL/keys/remove" -d '{"kid":"es256-1"}')"
check "bad control request" 400 "$(curl -s -o /dev/null -w '%{http_code}' -X POST "$CTL/keys" -d '{"alg":"HS256"}')"

# --- the other issuer -------------------------------------------------------
T=$(field "$(token RS256 "$OTHER")" access_token)
check "other issuer's token iss" "$OTHER" "$(field "$(part "$T" 1)" iss)"
check "other issuer's token verifies against its own JWKS" "verified rs256-1" "$(verify "$T" "$(get "$OTHER/jwks")")"
check "... not against the first's" "refused ERR_JWKS_NO_MATCHING_KEY" "$(verify "$T" "$(get "$ISS/jwks")")"

# --- counts -----------------------------------------------------------------
# Discovery: curl once, and client.mjs before each of its 6 token
# requests (3 clients, the refused resource, DPoP, after the new key);
# keys: curl 3 times (first, after remove, the other issuer's check).
S=$(state)
check "counts (discovery jwks token)" "7 3 6" \
    "$(field "$S" discovery_requests) $(field "$S" jwks_requests) $(field "$S" token_requests)"
check "counts of openid-client's requests (discovery token)" "6 6" \
    "$(field "$S" requests_by_agent.openid-client.discovery) $(field "$S" requests_by_agent.openid-client.token)"

# --- opaque tokens: introspection, revocation (issue 44, part 3) -----------
check "discovery introspection and revocation endpoints" \
    "$ISS/token/introspection $ISS/token/revocation" \
    "$(field "$DISC" introspection_endpoint) $(field "$DISC" revocation_endpoint)"
ISEC=$(field "$(state)" introspection_client.client_secret)
introspect() { get -u "lessons-introspect:$ISEC" -d "token=$1" "$ISS/token/introspection"; }
T=$(field "$(client token --issuer "$ISS" --client-id lessons-rs256 --client-secret "$(secret RS256)" \
              --resource "$OPAQUE" --scope lessons:read)" access_token)
check "opaque token (no dots)" 0 "$(printf %s "$T" | tr -cd . | wc -c)"
I=$(introspect "$T")
check "introspected: active aud scope client_id" "true $OPAQUE lessons:read lessons-rs256" \
    "$(field "$I" active) $(field "$I" aud) $(field "$I" scope) $(field "$I" client_id)"
check "revoked by its client" true "$(field "$(client revoke --issuer "$ISS" --client-id lessons-rs256 \
    --client-secret "$(secret RS256)" --token "$T")" revoked)"
check "introspected after revocation" false "$(field "$(introspect "$T")" active)"
check "introspection with a wrong secret refused" 401 \
    "$(curl -s -o /dev/null -w '%{http_code}' --cacert "$W/ca.crt" -u lessons-introspect:wrong \
        -d "token=$T" "$ISS/token/introspection")"

# --- certificate-bound tokens (issue 44, part 1) ---------------------------
X5T_A=$(openssl x509 -in "$W/a.pem" -outform DER | js 'let b=[];process.stdin.on("data",d=>b.push(d)).on("end",()=>console.log(require("crypto").createHash("sha256").update(Buffer.concat(b)).digest("base64url")))')
check "discovery: tls_client_certificate_bound_access_tokens" true \
    "$(field "$DISC" tls_client_certificate_bound_access_tokens)"
T=$(field "$(client token --issuer "$ISS" --client-id lessons-mtls --cert "$W/a.pem" --resource "$API")" access_token)
check "certificate A's JWT: cnf x5t#S256 of A" "$X5T_A" "$(field "$(part "$T" 1)" 'cnf.x5t#S256')"
T=$(field "$(client token --issuer "$ISS" --client-id lessons-mtls --cert "$W/a.pem" --resource "$OPAQUE")" access_token)
check "certificate A's opaque token: introspected cnf x5t#S256 of A" "$X5T_A" \
    "$(field "$(introspect "$T")" 'cnf.x5t#S256')"
code=0; client token --issuer "$ISS" --client-id lessons-mtls --cert "$W/b.pem" --resource "$API" \
    >/dev/null 2>"$W/client.err" || code=$?
check "an unregistered certificate refused (invalid_client)" "1 1" \
    "$code $(grep -c invalid_client "$W/client.err" || true)"

# --- the listener stopped and started ---------------------------------------
check "stop" false "$(field "$(ctl /stop)" listening)"
check "no answer while stopped" 000 \
    "$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 --cacert "$W/ca.crt" "$ISS/jwks" || true)"
check "start" true "$(field "$(ctl /start)" listening)"
check "the same token introspected after the start (kept in memory)" true "$(field "$(introspect "$T")" active)"

# --- SIGTERM --------------------------------------------------------------
kill -TERM "$PID"
rc=0
for _ in $(seq 1 50); do kill -0 "$PID" 2>/dev/null || break; sleep 0.2; done
wait "$PID" || rc=$?
PID=""
check "exit status after SIGTERM" 0 "$rc"

echo "selftest: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
