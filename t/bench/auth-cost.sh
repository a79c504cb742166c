#!/bin/bash
# The token gate's cost per request, by where the key comes from (issue
# 20): userland instructions per GET, measured the way make bench
# measures them (apache2 -X under callgrind, 20 warm-up requests, then N
# counted, on keep-alive connections, an answer from the response cache):
#
#   file        LessonsJWTKey HS256 FILE (make bench's GET by id)
#   url         a keys URL, RS256 (the test identity provider)
#   discovered  LessonsJWTIssuer https://... alone: keys from its metadata
#   blocks      two <LessonsJWTIssuer> blocks, the token of the first
#   dpop-bearer LessonsJWTDPoP optional, an unbound bearer token
#   dpop        LessonsJWTDPoP required, a bound token and a fresh proof
#               per request
#   verify ALG  then the signature check alone, uncached, per algorithm
#               (HS256, RS256, PS256, ES256): microseconds per distinct
#               token (t/bench/verify-cost.c)
#
#   t/bench/auth-cost.sh        (make auth-cost: after make and
#                                make idp-deps; needs valgrind, curl, node)
#   AUTH_COST_N=100             requests counted per row
#   AUTH_COST_KEEP=1            keep the temp dir, each row's dump in
#                               cg/NAME.callgrind (for callgrind_annotate)
#
# Prints one line per row: NAME instructions/request.  Everything it makes
# is under one temp dir, removed on exit.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
HTTPD=${HTTPD:-/usr/sbin/apache2}
MODS=${HTTPD_MODULES:-/usr/lib/apache2/modules}
N=${AUTH_COST_N:-100}
WARM=20
die() { echo "auth-cost: $*" >&2; exit 1; }
for c in valgrind callgrind_control curl openssl node perl sqlite3; do
    command -v "$c" >/dev/null || die "$c not found (t/tools/deps.sh bench; node: test)"
done
[ -f "$ROOT/build/mod_lessons.so" ] || die "build/mod_lessons.so: run make"
[ -d "$ROOT/build/idp/node_modules" ] || die "build/idp: run make idp-deps"
. "$ROOT/t/tools/ports.sh"

WORK=$(mktemp -d /tmp/lessons-authcost.XXXXXX)
chmod 755 "$WORK"
HTTPD_PID=""
IDP_PID=""
cleanup() {
    set +e
    [ -z "$HTTPD_PID" ] || { kill "$HTTPD_PID"; wait "$HTTPD_PID"; } 2>/dev/null
    [ -z "$IDP_PID" ] || { kill "$IDP_PID"; wait "$IDP_PID"; } 2>/dev/null
    if [ -n "${AUTH_COST_KEEP:-}" ]; then
        echo "auth-cost: kept $WORK" >&2
    else
        rm -rf "$WORK"
    fi
}
trap cleanup EXIT

if [ "$(id -u)" -eq 0 ]; then
    USER_=www-data
    AS=(setpriv --reuid=$USER_ --regid=$USER_ --init-groups)
else
    USER_=$(id -un)
    AS=()
fi
q() { "$@" >/dev/null 2>&1; }

# --- keys, the provider, the database ----------------------------------
K=$WORK/keys
mkdir -p "$K" "$WORK/run" "$WORK/logs" "$WORK/cg" "$WORK/db" "$WORK/idp"
openssl rand -hex 32 | tr -d '\n' >"$K/hs256.key"
q openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$K/client.key"
q openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
    -keyout "$K/ca.key" -out "$K/ca.crt" -subj /CN=auth-cost-ca -days 2
q openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
    -keyout "$K/idp.key" -out "$K/idp.csr" -subj /CN=127.0.0.1
echo "subjectAltName=IP:127.0.0.1" >"$K/idp.ext"
q openssl x509 -req -in "$K/idp.csr" -CA "$K/ca.crt" -CAkey "$K/ca.key" \
    -CAcreateserial -days 2 -extfile "$K/idp.ext" -out "$K/idp.crt"
chmod 644 "$K"/*

IDP_PORT=$(pick_port)
IDP_CTL=$(pick_port "$IDP_PORT")
cp "$ROOT/t/idp/idp.js" "$ROOT/t/idp/control.js" "$WORK/idp/"
NODE_PATH=$ROOT/build/idp/node_modules node "$WORK/idp/idp.js" \
    --port "$IDP_PORT" --control-port "$IDP_CTL" \
    --cert "$K/idp.crt" --key "$K/idp.key" >"$WORK/idp/out" 2>&1 &
IDP_PID=$!
for _ in $(seq 1 100); do grep -q '^idp ready' "$WORK/idp/out" && break; sleep 0.1; done
grep -q '^idp ready' "$WORK/idp/out" || die "the identity provider did not start"
ISS=https://127.0.0.1:$IDP_PORT
IDP_TOKEN=$(curl -sS --cacert "$K/ca.crt" -d grant_type=client_credentials \
    -d aud=lessons "$ISS/token" | perl -MJSON::PP -0e 'print decode_json(<>)->{access_token}')
[ -n "$IDP_TOKEN" ] || die "no token from the provider"

DB=$WORK/db/lessons.db
sqlite3 "$DB" <"$ROOT/sql/schema.sqlite.sql"
sqlite3 "$DB" <"$ROOT/sql/sample-lessons.sql"
[ "$(id -u)" -ne 0 ] || chown -R "$USER_:" "$WORK/run" "$WORK/logs" "$WORK/cg" "$WORK/db"


PORT=$(pick_port)
DPOP_SECTION="<Location \"/dpop/api/lessons\">
    SetHandler lessons
    LessonsJWTKey HS256 \"$K/hs256.key\"
    LessonsJWTDPoP required
</Location>"
cat >"$WORK/httpd.conf" <<EOF
ServerName 127.0.0.1
Listen 127.0.0.1:$PORT
PidFile $WORK/run/httpd.pid
DefaultRuntimeDir $WORK/run
ErrorLog $WORK/logs/error.log
LogLevel warn
User $USER_
Group $USER_
LoadModule mpm_event_module $MODS/mod_mpm_event.so
LoadModule authz_core_module $MODS/mod_authz_core.so
LoadModule dbd_module $MODS/mod_dbd.so
LoadModule lessons_module $ROOT/build/mod_lessons.so
KeepAlive On
MaxKeepAliveRequests 0
DBDriver sqlite3
DBDParams "file:$DB?mode=rw"
<Location "/file/api/lessons">
    SetHandler lessons
    LessonsJWTKey HS256 "$K/hs256.key"
</Location>
<Location "/url/api/lessons">
    SetHandler lessons
    LessonsJWTKey RS256 $ISS/jwks
    LessonsJWTKeysCA "$K/ca.crt"
</Location>
<Location "/discovered/api/lessons">
    SetHandler lessons
    LessonsJWTIssuer $ISS
    LessonsJWTKeysCA "$K/ca.crt"
</Location>
<Location "/blocks/api/lessons">
    SetHandler lessons
    <LessonsJWTIssuer $ISS>
        LessonsJWTKeysCA "$K/ca.crt"
    </LessonsJWTIssuer>
    <LessonsJWTIssuer lessons-batch>
        LessonsJWTKey HS256 "$K/hs256.key"
    </LessonsJWTIssuer>
</Location>
<Location "/dpop-bearer/api/lessons">
    SetHandler lessons
    LessonsJWTKey HS256 "$K/hs256.key"
    LessonsJWTDPoP optional
</Location>
$DPOP_SECTION
EOF

cd "$ROOT"
setsid "${AS[@]}" valgrind --tool=callgrind --callgrind-out-file="$WORK/cg/out.%p" \
    "$HTTPD" -X -d "$WORK" -f "$WORK/httpd.conf" </dev/null >"$WORK/logs/out" 2>&1 &
HTTPD_PID=$!
for _ in $(seq 1 900); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/" || true)" != 000 ] && break
    sleep 0.2
done

HS=$(perl -I"$ROOT/t/lib" -MLessonsTest::JWT=jwt,read_secret -e \
    'print jwt(key => read_secret($ARGV[0]), claims => { sub => "bench", exp => time + 14400 })' "$K/hs256.key")

# A GET N times on one keep-alive connection (curl reuses it for URLs
# given together); with proofs, one request per proof.
gets() {       # gets PATH TOKEN COUNT [SCHEME]
    local path=$1 tok=$2 n=$3 scheme=${4:-Bearer} args=() i
    for i in $(seq 1 "$n"); do
        args+=(-o /dev/null -w '%{http_code}\n' -H "Authorization: $scheme $tok"
               "http://127.0.0.1:$PORT$path")
        [ "$i" -eq "$n" ] || args+=(--next)
    done
    curl -sS "${args[@]}" | awk '$1 != 200 { bad = 1 } END { exit bad }' \
        || die "$path: not every answer was 200"
}
measure() {    # measure NAME: after warm-up, zero, run "$@", dump
    local name=$1 dump total
    shift
    "$@" "$WARM"
    "${AS[@]}" callgrind_control -z "$HTTPD_PID" >/dev/null 2>&1
    "$@" "$N"
    "${AS[@]}" callgrind_control -d "$HTTPD_PID" >/dev/null 2>&1
    dump=$(ls -t "$WORK"/cg/out.* | head -n 1)
    total=$(awk '/^totals:/ { print $2 }' "$dump")
    mv -f "$dump" "$WORK/cg/$name.callgrind"
    printf '%-12s %8d instructions/request\n' "$name" $((total / N))
}

# Each row reads one cached lesson; the first call fills the caches.
row_file()        { gets /file/api/lessons/1 "$HS" "$1"; }
row_url()         { gets /url/api/lessons/1 "$IDP_TOKEN" "$1"; }
row_discovered()  { gets /discovered/api/lessons/1 "$IDP_TOKEN" "$1"; }
row_blocks()      { gets /blocks/api/lessons/1 "$IDP_TOKEN" "$1"; }
row_dpop_bearer() { gets /dpop-bearer/api/lessons/1 "$HS" "$1"; }
# DPoP: one proof per request, made beforehand (the client's cost is not
# the server's).
JKT=$(perl -I"$ROOT/t/lib" -MLessonsTest::JWT=b64url -MDigest::SHA=sha256 -e '
    my $der = `openssl pkey -in $ARGV[0] -pubout -outform DER 2>/dev/null`;
    my $xy = substr($der, -64);
    my ($x, $y) = (b64url(substr($xy, 0, 32)), b64url(substr($xy, 32)));
    print b64url(sha256(qq({"crv":"P-256","kty":"EC","x":"$x","y":"$y"})));' "$K/client.key")
DPOP_TOKEN=$(perl -I"$ROOT/t/lib" -MLessonsTest::JWT=jwt,read_secret -e \
    'print jwt(key => read_secret($ARGV[0]), claims => { sub => "bench", exp => time + 14400, cnf => { jkt => $ARGV[1] } })' \
    "$K/hs256.key" "$JKT")
perl -I"$ROOT/t/lib" -MLessonsTest::JWT=jwt,b64url,json_text -MDigest::SHA=sha256 -e '
    my ($key, $uri, $tok, $n) = @ARGV;
    my $der = `openssl pkey -in $key -pubout -outform DER 2>/dev/null`;
    my $xy = substr($der, -64);
    my %jwk = (kty => "EC", crv => "P-256", x => b64url(substr($xy, 0, 32)), y => b64url(substr($xy, 32)));
    for my $i (1 .. $n) {
        print jwt(alg => "ES256", key => $key, header => { typ => "dpop+jwt", jwk => \%jwk },
                  payload_raw => json_text({ jti => "p$i-" . rand(), htm => "GET", htu => $uri,
                                             iat => time, ath => b64url(sha256($tok)) })), "\n";
    }' "$K/client.key" "http://127.0.0.1:$PORT/dpop/api/lessons/1" "$DPOP_TOKEN" $((WARM + N)) \
    >"$WORK/proofs"
PROOF_AT=0
row_dpop() {
    local n=$1 args=() i proof
    for i in $(seq 1 "$n"); do
        PROOF_AT=$((PROOF_AT + 1))
        proof=$(sed -n "${PROOF_AT}p" "$WORK/proofs")
        args+=(-o /dev/null -w '%{http_code}\n' -H "Authorization: DPoP $DPOP_TOKEN"
               -H "DPoP: $proof" "http://127.0.0.1:$PORT/dpop/api/lessons/1")
        [ "$i" -eq "$n" ] || args+=(--next)
    done
    curl -sS "${args[@]}" | awk '$1 != 200 { bad = 1 } END { exit bad }' \
        || die "dpop: not every answer was 200"
}

measure file row_file
measure url row_url
measure discovered row_discovered
measure blocks row_blocks
measure dpop-bearer row_dpop_bearer
measure dpop row_dpop

# The signature check alone, uncached: each of AUTH_COST_TOKENS distinct
# tokens verified once by lessons_token_verify (t/bench/verify-cost.c,
# linked with the units), wall-clock microseconds per token.
TOKENS=${AUTH_COST_TOKENS:-2000}
openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$WORK/vc-rs.pem" 2>/dev/null
openssl pkey -in "$WORK/vc-rs.pem" -pubout -out "$WORK/vc-rs.pub"
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$WORK/vc-ec.pem" 2>/dev/null
openssl pkey -in "$WORK/vc-ec.pem" -pubout -out "$WORK/vc-ec.pub"
for row in "HS256 $K/hs256.key $K/hs256.key" "RS256 $WORK/vc-rs.pem $WORK/vc-rs.pub" \
           "PS256 $WORK/vc-rs.pem $WORK/vc-rs.pub" "ES256 $WORK/vc-ec.pem $WORK/vc-ec.pub"; do
    set -- $row
    perl -I"$ROOT/t/lib" -MLessonsTest::JWT=jwt,read_secret -e '
        my ($alg, $key, $n) = @ARGV;
        $key = read_secret($key) if $alg =~ /\AHS/;
        print jwt(alg => $alg, key => $key, claims => { sub => "u$_", exp => time + 3600 }), "\n"
            for 1 .. $n;' "$1" "$2" "$TOKENS" >"$WORK/vc-$1.tokens"
    "$ROOT/build/bench/verify-cost" "$1" "$3" "$WORK/vc-$1.tokens"
done
