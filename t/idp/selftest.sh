#!/bin/bash
# Prove t/idp/idp.js by hand (not part of make test): a test CA and a
# certificate for 127.0.0.1, the provider started, then discovery, JWKS
# and client-credentials tokens through curl --cacert, each token checked
# against the JWKS with jose, key added, key removed (provider restarted),
# the at+jwt header, a JWKS fault, stop/start, the request counts, and a
# realm's discovery, tokens and metadata controls.
#
#   make idp-deps && t/idp/selftest.sh          (NODE=/path/to/node to pick
#                                               another Node.js)
# Prints one line per check and "selftest: N passed, N failed".
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
IDP=$ROOT/t/idp/idp.js
NODE=${NODE:-node}
die() { echo "selftest: $*" >&2; exit 1; }
# The modules: next to idp.js (integration.sh's copy) or make idp-deps's;
# NODE_PATH for idp.js in the work tree and for the checks' node -e.
if [ -d "$ROOT/t/idp/node_modules" ]; then
    export NODE_PATH=$ROOT/t/idp/node_modules
else
    [ -d "$ROOT/build/idp/node_modules" ] || die "run make idp-deps first"
    export NODE_PATH=$ROOT/build/idp/node_modules
fi
. "$ROOT/t/tools/ports.sh"

W=$(mktemp -d "${TMPDIR:-/tmp}/idp-selftest.XXXXXX")
PID=""
cleanup() {
    [ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
    rm -rf "$W"
}
trap cleanup EXIT

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
        -keyout ca.key -out ca.crt -subj /CN=idp-selftest-ca -days 2
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
        -keyout idp.key -out idp.csr -subj /CN=127.0.0.1
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' > idp.ext
    openssl x509 -req -in idp.csr -CA ca.crt -CAkey ca.key -CAcreateserial \
        -days 2 -extfile idp.ext -out idp.crt
) >"$W/openssl.log" 2>&1 || { cat "$W/openssl.log" >&2; die "openssl failed"; }

P=$(pick_port)
C=$(pick_port "$P")
echo "selftest: $("$NODE" --version), provider port $P, control port $C"
"$NODE" "$IDP" --port "$P" --control-port "$C" --cert "$W/idp.crt" \
    --key "$W/idp.key" >"$W/idp.out" 2>"$W/idp.err" &
PID=$!
for _ in $(seq 1 100); do
    grep -q '^idp ready ' "$W/idp.out" 2>/dev/null && break
    kill -0 "$PID" 2>/dev/null || { cat "$W/idp.err" >&2; die "idp.js exited"; }
    sleep 0.2
done
check "ready line" "idp ready https://127.0.0.1:$P" "$(head -n 1 "$W/idp.out")"

BASE=https://127.0.0.1:$P
CTL=http://127.0.0.1:$C
get()   { curl -sS --max-time 10 --cacert "$W/ca.crt" "$@"; }
ctl()   { local path=$1; shift; curl -sS --max-time 20 -X POST -H 'Content-Type: application/json' \
              "$CTL$path" "$@"; }
state() { curl -sS --max-time 10 "$CTL/state"; }
js()    { "$NODE" -e "$1" "${@:2}"; }   # small JSON helpers
field() { js 'const o=JSON.parse(process.argv[1]);const v=process.argv[2].split(".").reduce((a,k)=>a==null?a:a[k],o);console.log(typeof v==="object"?JSON.stringify(v):v)' "$1" "$2"; }
token() { get -d grant_type=client_credentials -d aud=lessons -d scope=read "$BASE/token" \
              | js 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.parse(s).access_token))'; }
header() { js 'console.log(Buffer.from(process.argv[1].split(".")[0],"base64url").toString())' "$1"; }
# Verify a token against a JWKS text with jose: prints the kid, or the error.
verify() {
    js 'const jose=require("jose");
        jose.jwtVerify(process.argv[1], jose.createLocalJWKSet(JSON.parse(process.argv[2])))
          .then(r=>console.log("verified " + r.protectedHeader.kid), e=>console.log("refused " + e.code))' "$1" "$2"
}

# --- discovery, JWKS, a token ---------------------------------------------
DISC=$(get "$BASE/.well-known/openid-configuration")
check "discovery issuer" "$BASE" "$(field "$DISC" issuer)"
check "discovery jwks_uri" "$BASE/jwks" "$(field "$DISC" jwks_uri)"
JWKS=$(get "$BASE/jwks")
KID1=$(field "$(state)" signing_kid)
check "JWKS keys" "[\"$KID1\"]" "$(js 'console.log(JSON.stringify(JSON.parse(process.argv[1]).keys.map(k=>k.kid)))' "$JWKS")"
check "JWKS has no private member" "" "$(js 'console.log(JSON.parse(process.argv[1]).keys.filter(k=>"d" in k).map(k=>k.kid).join())' "$JWKS")"
T=$(token)
H=$(header "$T")
check "token typ" JWT "$(field "$H" typ)"
check "token alg" RS256 "$(field "$H" alg)"
check "token kid" "$KID1" "$(field "$H" kid)"
check "token iss and aud" "$BASE lessons" "$(js 'const p=JSON.parse(Buffer.from(process.argv[1].split(".")[1],"base64url"));console.log(p.iss+" "+p.aud)' "$T")"
check "token verifies against the JWKS" "verified $KID1" "$(verify "$T" "$JWKS")"

# --- a second key, ES256: it signs the next tokens ------------------------
ADD=$(ctl /keys -d '{"alg":"ES256"}')
KID2=$(field "$ADD" kid)
JWKS=$(get "$BASE/jwks")
check "JWKS after add" 2 "$(js 'console.log(JSON.parse(process.argv[1]).keys.length)' "$JWKS")"
for i in 1 2; do
    T=$(token); H=$(header "$T")
    check "token $i after add: alg kid" "ES256 $KID2" "$(field "$H" alg) $(field "$H" kid)"
done
check "ES256 token verifies" "verified $KID2" "$(verify "$T" "$JWKS")"

# --- at+jwt for the refusal test, then back -------------------------------
ctl /token-header -d '{"typ":"at+jwt"}' >/dev/null
T=$(token); H=$(header "$T")
check "token-header typ" "at+jwt $KID2" "$(field "$H" typ) $(field "$H" kid)"
check "at+jwt token verifies" "verified $KID2" "$(verify "$T" "$JWKS")"
ctl /token-header -d '{}' >/dev/null
check "typ back to JWT" JWT "$(field "$(header "$(token)")" typ)"

# --- remove the first key: provider restarted with the smaller set --------
ctl /keys/remove -d "{\"kid\":\"$KID1\"}" >/dev/null
JWKS=$(get "$BASE/jwks")
check "JWKS after remove" "[\"$KID2\"]" "$(js 'console.log(JSON.stringify(JSON.parse(process.argv[1]).keys.map(k=>k.kid)))' "$JWKS")"
T=$(token)
check "token after remove" "verified $KID2" "$(verify "$T" "$JWKS")"
check "unknown kid refused" 400 "$(curl -s -o /dev/null -w '%{http_code}' -X POST "$CTL/keys/remove" -d '{"kid":"nope"}')"

# --- a JWKS fault ---------------------------------------------------------
ctl /jwks-fault -d '{"status":500}' >/dev/null
check "jwks-fault status" 500 "$(get -o /dev/null -w '%{http_code}' "$BASE/jwks")"
ctl /jwks-fault -d '{"size":100000}' >/dev/null
check "jwks-fault size" 100000 "$(get -o /dev/null -w '%{size_download}' "$BASE/jwks")"
ctl /jwks-fault -d '{}' >/dev/null
check "jwks-fault cleared" 200 "$(get -o /dev/null -w '%{http_code}' "$BASE/jwks")"

# --- stop and start -------------------------------------------------------
ctl /stop >/dev/null
code=0; get -o /dev/null "$BASE/jwks" 2>/dev/null || code=$?
check "stopped: curl exit (7 = refused)" 7 "$code"
check "stopped: state.running" false "$(field "$(state)" running)"
ctl /start >/dev/null
check "started again" 200 "$(get -o /dev/null -w '%{http_code}' "$BASE/jwks")"

# --- counts ---------------------------------------------------------------
# JWKS requests so far: 1 + 1 (add) + 1 (remove) + 3 (fault) + 1 (started);
# the request while stopped never reached it.  Tokens: 1 + 2 + 1 + 1 + 1.
S=$(state)
check "jwks_requests" 7 "$(field "$S" jwks_requests)"
check "discovery_requests" 1 "$(field "$S" discovery_requests)"
check "token_requests" 6 "$(field "$S" token_requests)"
ctl /reset-count >/dev/null
get -o /dev/null "$BASE/jwks"
check "jwks_requests after reset" 1 "$(field "$(state)" jwks_requests)"

# --- realms and metadata (issue 20) ---------------------------------------
ctl /realms -d '{"name":"school"}' >/dev/null
R=$BASE/realms/school
DISC=$(get "$R/.well-known/openid-configuration")
check "realm discovery issuer" "$R" "$(field "$DISC" issuer)"
check "realm discovery jwks_uri" "$R/jwks" "$(field "$DISC" jwks_uri)"
RKID=$(field "$(curl -sS --max-time 10 "$CTL/state?realm=school")" signing_kid)
T=$(get -d grant_type=client_credentials -d aud=lessons "$R/token" \
        | js 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.parse(s).access_token))')
check "realm token iss" "$R" "$(js 'console.log(JSON.parse(Buffer.from(process.argv[1].split(".")[1],"base64url")).iss)' "$T")"
check "realm token verifies against the realm's JWKS" "verified $RKID" "$(verify "$T" "$(get "$R/jwks")")"
check "RFC 8414 place off by default" 404 "$(get -o /dev/null -w '%{http_code}' "$BASE/.well-known/oauth-authorization-server/realms/school")"
ctl '/metadata?realm=school' -d '{"oauth":true,"openid":false,"issuer":"https://evil.example"}' >/dev/null
check "RFC 8414 place on" "https://evil.example" "$(field "$(get "$BASE/.well-known/oauth-authorization-server/realms/school")" issuer)"
check "OpenID place off" 404 "$(get -o /dev/null -w '%{http_code}' "$R/.well-known/openid-configuration")"
S=$(curl -sS --max-time 10 "$CTL/state?realm=school")
check "realm counts" "2 1 2" "$(field "$S" oauth_metadata_requests) $(field "$S" token_requests) $(field "$S" discovery_requests)"
check "bad realm refused" 400 "$(curl -s -o /dev/null -w '%{http_code}' "$CTL/state?realm=nope")"

# --- SIGTERM --------------------------------------------------------------
kill -TERM "$PID"
rc=0
for _ in $(seq 1 50); do kill -0 "$PID" 2>/dev/null || break; sleep 0.2; done
wait "$PID" || rc=$?
PID=""
check "exit status after SIGTERM" 0 "$rc"

echo "selftest: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
