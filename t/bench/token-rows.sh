# make bench's token rows (issue 44), sourced by t/bench/bench.sh: GET by
# id with a certificate-bound token, and with an opaque token taken by
# introspection from the cache, each against an HS256 token on the same
# server in the same rounds (target: within 10%, >= 0.90x).
#
#   cert   A TLS virtual host (t/bench/httpd.conf, BENCH_TLS: mod_ssl,
#          SSLVerifyClient optional_no_ca) with a self-signed client
#          certificate (RFC 8705 2.2) on every connection: /bound/ with
#          LessonsJWTCertBound required and a token whose cnf x5t#S256 is
#          that certificate's, against /tls/ with the same key and a token
#          without cnf.  Same TLS, same keep-alive connections, same
#          certificate, same client: the ratio is the binding check alone.
#          The client is build/bench/tls-load (t/bench/tls-load.c): wrk's
#          measurement (one thread, CONNS keep-alive connections, DUR
#          seconds, its report) with a client certificate, which wrk
#          cannot send.  Neither can h2load (nghttp2-client) nor httperf;
#          siege (4.0.7) can, but made 1,300-1,600 requests a second here
#          at 32 clients and at 4 alike (wrk on the same route: 11,800),
#          and curl's --parallel (libcurl's multi interface) spent more
#          than twice wrk's CPU per request, on the CPUs the server
#          shares.  wrk's own figure on /tls/ (no certificate) is kept
#          beside the row, as a check on the client.
#   intro  LessonsJWTIntrospect with no key (every token asked about) and
#          LessonsJWTIntrospectCacheMax 3600, against the test provider
#          (t/idp/idp.js, its /introspect route, over TLS with a CA of the
#          run's), one opaque token, wrk; against /api/lessons (HS256) on
#          the same plain-HTTP server.  Answers are kept per process, so
#          the provider is asked about once per process that serves the
#          token; its count (GET /state: introspect_requests) over the
#          warm-up and over the measured rounds is printed and kept: the
#          measured rounds should ask nothing.  Without node, or without
#          build/idp/node_modules (make idp-deps), the row is skipped with
#          a line saying why.
#
# Then each row's instructions per request against its HS256 run's, as
# callgrind_phase counts them (apache2 -X under callgrind, CG_WARM
# requests, then CG_N counted; over TLS all on one connection, through
# tls-load --count, so that no handshake is counted): not a target, a
# figure the shared machine's noise does not move.
#
# Results go to RESULTS as route cert or intro, kind mod (the bound or
# introspected GET), hs256 (its HS256 run on the same server) and, for
# cert, wrk (the check above); CGRES the same routes and kinds; META
# keeps intro_* and cert_*.

TOKEN_ROUTE=$LESSON_ID
IDP_PID=""

# A CA of the run's, for the TLS virtual host and the provider:
# token_cert NAME issues keys/NAME.crt for 127.0.0.1 with it.
token_ca() {
    local k=$WORK/keys
    [ ! -e "$k/token-ca.crt" ] || return 0
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
        -keyout "$k/token-ca.key" -out "$k/token-ca.crt" -subj /CN=bench-token-ca >/dev/null 2>&1 \
        || die "openssl: the token rows' CA"
    chmod 644 "$k/token-ca.crt"
}
token_cert() {
    local k=$WORK/keys
    token_ca
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
        -keyout "$k/$1.key" -out "$k/$1.csr" -subj /CN=127.0.0.1 >/dev/null 2>&1 \
        || die "openssl: the key of $1"
    printf 'subjectAltName=IP:127.0.0.1\nbasicConstraints=critical,CA:FALSE\nextendedKeyUsage=serverAuth\n' >"$k/$1.ext"
    openssl x509 -req -in "$k/$1.csr" -CA "$k/token-ca.crt" -CAkey "$k/token-ca.key" \
        -CAcreateserial -days 2 -extfile "$k/$1.ext" -out "$k/$1.crt" >/dev/null 2>&1 \
        || die "openssl: the certificate of $1"
    chmod 644 "$k/$1.crt" "$k/$1.key"
}

# The TLS keys and the bound token, once.
token_cert_setup() {
    local k=$WORK/keys x5t
    token_cert tls-server
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
        -keyout "$k/client.key" -out "$k/client.crt" -subj /CN=bench-client \
        -addext extendedKeyUsage=clientAuth >/dev/null 2>&1 || die "openssl: the client certificate"
    chmod 644 "$k/client.key" "$k/client.crt"
    # RFC 8705 3.1: base64url of SHA-256 over the certificate's DER.
    x5t=$(openssl x509 -in "$k/client.crt" -outform DER | openssl dgst -sha256 -binary \
          | base64 | tr '+/' '-_' | tr -d '=\n')
    TOKEN_BOUND=$(perl -I"$ROOT/t/lib" -MLessonsTest::JWT=jwt,read_secret -e '
        print jwt(key => read_secret($ARGV[0]),
                  claims => { sub => "bench", exp => time + 14400, cnf => { "x5t#S256" => $ARGV[1] } })' \
        "$k/hs256.key" "$x5t")
    [ -n "$TOKEN_BOUND" ] || die "no certificate-bound token"
}

# tls_fetch PATH TOKEN [cert]: the status of one GET over TLS, with the
# client certificate when asked.
tls_fetch() {
    local cert=()
    [ -z "${3:-}" ] || cert=(--cert "$WORK/keys/client.crt" --key "$WORK/keys/client.key")
    curl -s -o "$WORK/out/tls.body" -w '%{http_code}' --cacert "$WORK/keys/token-ca.crt" "${cert[@]}" \
        -H "Authorization: Bearer $2" "https://127.0.0.1:$TLS_PORT$1" || echo 000
}

# token_cg DB ROUTE KIND URL CURL-ARGS...: userland instructions per
# request as callgrind_phase counts them (the server under callgrind now,
# CG_WARM requests on one keep-alive connection, then CG_N counted), one
# line in CGRES.  Noise-free beside the req/s of a shared machine.
token_curl_n() {
    local n=$1 u=$2 urls=() i got
    shift 2
    for ((i = 0; i < n; i++)); do urls+=("$u" -o /dev/null); done
    got=$(curl -s -w '%{http_code}\n' "$@" "${urls[@]}" | grep -c '^200$' || true)
    [ "$got" -eq "$n" ] || die "callgrind: $u: $got of $n requests answered 200"
}
# Over TLS (URL https://...), CURL-ARGS are tls-load's header arguments
# and tls-load keeps warm-up and counted requests on one connection: no
# handshake counted.
token_cg() {
    local db=$1 route=$2 kind=$3 u=$4 zero dump_cmd
    shift 4
    if [[ "$u" == https://* ]]; then
        zero=$(printf '%q ' timeout 120 "${AS_HTTPD[@]}" callgrind_control -z "$HTTPD_PID")
        dump_cmd=$(printf '%q ' timeout 120 "${AS_HTTPD[@]}" callgrind_control -d "$HTTPD_PID")
        "$WORK/tls-load" --count "$CG_WARM" "$CG_N" "$zero >/dev/null" "$dump_cmd >/dev/null" \
            "$u" "$WORK/keys/client.crt" "$WORK/keys/client.key" "$WORK/keys/token-ca.crt" "$@" >/dev/null \
            || die "callgrind: tls-load --count on $u failed"
    else
        token_curl_n "$CG_WARM" "$u" "$@"
        timeout 120 "${AS_HTTPD[@]}" callgrind_control -z "$HTTPD_PID" >/dev/null || die "callgrind_control -z failed"
        token_curl_n "$CG_N" "$u" "$@"
        timeout 120 "${AS_HTTPD[@]}" callgrind_control -d "$HTTPD_PID" >/dev/null || die "callgrind_control -d failed"
    fi
    cg_record "$db" "$route" "$kind"
}

# GET by id as the API answers it now, in out/id-now.body: the rows'
# routes must give the same bytes.  Not the static twin's: make bench's
# writes, before these rows, have updated the lesson since its twin was
# made.
token_id_now() {
    local args=()
    mapfile -t args < <(route_args id mod)
    curl -s -o "$WORK/out/id-now.body" "${args[@]:1}" "$(url "${args[0]}")" \
        || die "GET ${args[0]} failed"
}
token_cert_phase() {
    local db=$1 round kinds kind bound=/bound$API/$TOKEN_ROUTE plain=/tls$API/$TOKEN_ROUTE code
    [ -x "$WORK/tls-load" ] || die "build/bench/tls-load not found: make bench builds it"
    [ -f "$HTTPD_MODULES/mod_ssl.so" ] || die "$HTTPD_MODULES/mod_ssl.so not found"
    token_cert_setup
    TLS_PORT=$(pick_port)
    EXTRA_DEFINES=(-D BENCH_TLS -C "Define BENCH_TLS_PORT $TLS_PORT")
    start_httpd
    # The binding is checked: 200 with the certificate, 401 without it;
    # the unbound route takes the plain token with it, with GET by id's
    # bytes.
    code=$(tls_fetch "$bound" "$TOKEN_BOUND" cert)
    [ "$code" = 200 ] || { head -c 600 "$WORK/out/tls.body" >&2; die "GET $bound with the certificate answered $code, not 200"; }
    code=$(tls_fetch "$bound" "$TOKEN_BOUND")
    [ "$code" = 401 ] || die "GET $bound without the certificate answered $code, not 401"
    code=$(tls_fetch "$plain" "$TOKEN" cert)
    [ "$code" = 200 ] || die "GET $plain answered $code, not 200"
    token_id_now
    cmp -s "$WORK/out/tls.body" "$WORK/out/id-now.body" || die "GET $plain: not GET by id's body"
    TLS_LOAD=("$WORK/keys/client.crt" "$WORK/keys/client.key" "$WORK/keys/token-ca.crt")
    # Warm-up, not counted.
    "$WORK/tls-load" "https://127.0.0.1:$TLS_PORT$bound" 1 "$CONNS" "${TLS_LOAD[@]}" \
        "Authorization: Bearer $TOKEN_BOUND" >/dev/null 2>&1 || true
    "$WORK/tls-load" "https://127.0.0.1:$TLS_PORT$plain" 1 "$CONNS" "${TLS_LOAD[@]}" \
        "Authorization: Bearer $TOKEN" >/dev/null 2>&1 || true
    for round in $(seq 1 "$ROUNDS"); do
        kinds="mod hs256"
        [ $((round % 2)) -eq 1 ] || kinds="hs256 mod"
        for kind in $kinds; do
            if [ "$kind" = mod ]; then
                wrk_run "$db" cert mod "$round" "https://127.0.0.1:$TLS_PORT$bound" \
                    -H "Authorization: Bearer $TOKEN_BOUND"
            else
                wrk_run "$db" cert hs256 "$round" "https://127.0.0.1:$TLS_PORT$plain" \
                    -H "Authorization: Bearer $TOKEN"
            fi
            # Every request after a connection's first on a kept one.
            meta "$db" "cert_connects_${kind}_$round" \
                "$(sed -n 's/^Connections opened: //p' "$WORK/out/wrk.log" | tail -n 1)"
        done
        TLS_LOAD=()
        wrk_run "$db" cert wrk "$round" "https://127.0.0.1:$TLS_PORT$plain" -H "Authorization: Bearer $TOKEN"
        TLS_LOAD=("$WORK/keys/client.crt" "$WORK/keys/client.key" "$WORK/keys/token-ca.crt")
    done
    TLS_LOAD=()
    meta "$db" cert_errors "$(error_lines 'certificate-bound: error_log')"
    stop_httpd
    # Instructions, the certificate on one connection for each.
    [ "$(id -u)" -ne 0 ] || chown "$HTTPD_USER:" "$WORK/cg"
    start_httpd valgrind --tool=callgrind --callgrind-out-file="$WORK/cg/callgrind.out.%p"
    token_cg "$db" cert mod "https://127.0.0.1:$TLS_PORT$bound" -H "Authorization: Bearer $TOKEN_BOUND"
    token_cg "$db" cert hs256 "https://127.0.0.1:$TLS_PORT$plain" -H "Authorization: Bearer $TOKEN"
    stop_httpd
    EXTRA_DEFINES=()
}

stop_idp() {
    [ -n "$IDP_PID" ] || return 0
    kill "$IDP_PID" 2>/dev/null || true
    wait "$IDP_PID" 2>/dev/null || true
    IDP_PID=""
}
# idp_ctl METHOD PATH [JSON]: the provider's control port; its answer.
idp_ctl() {
    curl -sS --max-time 20 -X "$1" -H 'Content-Type: application/json' \
        ${3:+--data "$3"} "http://127.0.0.1:$IDP_CTL$2"
}
idp_asked() {
    idp_ctl GET /state | perl -MJSON::PP -0777 -ne 'print decode_json($_)->{introspect_requests} // "n/a"'
}
token_intro_skip() {
    log "skipped: the introspected GET: $1"
    meta "$2" intro_skipped "$1"
}

token_intro_phase() {
    local db=$1 k=$WORK/keys round kinds kind path=/introspect$API/$TOKEN_ROUTE code warm asked procs
    local before after fresh
    if ! command -v node >/dev/null; then
        token_intro_skip "node not found (the test provider, t/idp/idp.js, runs on it)" "$db"
        return 0
    fi
    if [ ! -d "$ROOT/build/idp/node_modules" ]; then
        token_intro_skip "build/idp/node_modules not found (make idp-deps)" "$db"
        return 0
    fi
    # The provider's certificate (the run's CA), the client secret.
    token_cert idp
    echo introspect-secret >"$k/introspect.secret"
    chmod 644 "$k/introspect.secret"
    mkdir -p "$WORK/idp"
    cp "$ROOT/t/idp/idp.js" "$ROOT/t/idp/control.js" "$WORK/idp/"
    IDP_PORT=$(pick_port)
    IDP_CTL=$(pick_port "$IDP_PORT")
    NODE_PATH=$ROOT/build/idp/node_modules node "$WORK/idp/idp.js" \
        --port "$IDP_PORT" --control-port "$IDP_CTL" \
        --cert "$k/idp.crt" --key "$k/idp.key" </dev/null >"$WORK/idp/out" 2>&1 &
    IDP_PID=$!
    for _ in $(seq 1 200); do grep -q '^idp ready' "$WORK/idp/out" && break; sleep 0.1; done
    grep -q '^idp ready' "$WORK/idp/out" || { cat "$WORK/idp/out" >&2; die "the test provider did not start"; }
    TOKEN_OPAQUE=$(idp_ctl POST /opaque '{}' | perl -MJSON::PP -0777 -ne 'print decode_json($_)->{token} // ""')
    [ -n "$TOKEN_OPAQUE" ] || die "no opaque token from the provider"
    EXTRA_DEFINES=(-D BENCH_INTROSPECT -C "Define BENCH_INTROSPECT_URL https://127.0.0.1:$IDP_PORT/introspect")
    start_httpd
    code=$(curl -s -o "$WORK/out/intro.body" -w '%{http_code}' \
           -H "Authorization: Bearer $TOKEN_OPAQUE" "$(url "$path")") || code=000
    [ "$code" = 200 ] || { head -c 600 "$WORK/out/intro.body" >&2; tail -n 5 "$ERROR_LOG" >&2; die "GET $path answered $code, not 200"; }
    token_id_now
    cmp -s "$WORK/out/intro.body" "$WORK/out/id-now.body" || die "GET $path: not GET by id's body"
    # Warm-up, not counted: every process asks once.
    wrk -t1 -c"$CONNS" -d1s -H "Authorization: Bearer $TOKEN_OPAQUE" "$(url "$path")" >/dev/null 2>&1 || true
    wrk -t1 -c"$CONNS" -d1s -H "Authorization: Bearer $TOKEN" "$(url "$API/$TOKEN_ROUTE")" >/dev/null 2>&1 || true
    warm=$(idp_asked)
    before=$(ps -o pid= --ppid "$HTTPD_PID" | sort)
    idp_ctl POST /reset-count >/dev/null
    for round in $(seq 1 "$ROUNDS"); do
        kinds="mod hs256"
        [ $((round % 2)) -eq 1 ] || kinds="hs256 mod"
        for kind in $kinds; do
            if [ "$kind" = mod ]; then
                wrk_run "$db" intro mod "$round" "$(url "$path")" -H "Authorization: Bearer $TOKEN_OPAQUE"
            else
                wrk_run "$db" intro hs256 "$round" "$(url "$API/$TOKEN_ROUTE")" -H "Authorization: Bearer $TOKEN"
            fi
        done
    done
    asked=$(idp_asked)
    after=$(ps -o pid= --ppid "$HTTPD_PID" | sort)
    procs=$(printf '%s\n' "$after" | grep -c . || true)
    # Children the MPM started during the rounds: each asks on its first
    # requests.
    fresh=$(comm -13 <(printf '%s\n' "$before") <(printf '%s\n' "$after") | grep -c . || true)
    meta "$db" intro_fresh "$fresh"
    meta "$db" intro_asked_warm "$warm"
    meta "$db" intro_asked "$asked"
    meta "$db" intro_procs "$procs"
    log "introspection: the provider was asked $warm time(s) in the warm-up (the first request, then each process's first) and $asked time(s) in the measured rounds, for 1 token; $procs httpd child process(es) at the end, $fresh of them started during the rounds"
    meta "$db" intro_errors "$(error_lines 'introspected: error_log')"
    stop_httpd
    # Instructions: the one process asks at its first request (in the
    # warm-up), the counted ones are hits.
    [ "$(id -u)" -ne 0 ] || chown "$HTTPD_USER:" "$WORK/cg"
    start_httpd valgrind --tool=callgrind --callgrind-out-file="$WORK/cg/callgrind.out.%p"
    token_cg "$db" intro mod "$(url "$path")" -H "Authorization: Bearer $TOKEN_OPAQUE"
    token_cg "$db" intro hs256 "$(url "$API/$TOKEN_ROUTE")" -H "Authorization: Bearer $TOKEN"
    stop_httpd
    EXTRA_DEFINES=()
    stop_idp
}

token_phase() {
    local db=$1
    log "token rows: certificate-bound GET (TLS, tls-load) and introspected GET (wrk), each against HS256, $ROUNDS round(s)"
    token_cert_phase "$db"
    token_intro_phase "$db"
}
