#!/bin/bash
# make bench (issue 7): mod_lessons against the same httpd serving the same
# bytes from files (the "static twin"), on SQLite and on a throw-away
# PostgreSQL cluster.  Writes the report to docs/benchmarks.md and prints it;
# a full run draws its figures too (t/bench/figures.gp, gnuplot), into
# images/ beside the report: docs/images/bench-reads.png, bench-writes.png.
#
#   t/bench/bench.sh            (make bench runs it after building)
#
# Environment:
#   MODULE        the module to load (default build/mod_lessons.so)
#   HTTPD         httpd binary (default /usr/sbin/apache2)
#   BENCH_QUICK=1 smoke run: 1 round of 1 s, 20 callgrind requests,
#                 20,000 memory requests
#   BENCH_DBS     "sqlite3 pgsql" (default), or one of them
#   BENCH_OUT     the report (default docs/benchmarks.md in the checkout)
#   BENCH_KEEP=1  keep the temp dir (logs, twins, callgrind dumps)
#   BENCH_COMMAND the command line to quote in the report
#   BENCH_WRITE_CLIENTS  the client counts of the write rows (default "8 32")
#   BENCH_STATEMENT      the baselines' statement printer (default
#                 build/bench/statement, which make bench builds)
#   BENCH_ONLY=tokens    only the token rows (below), on the first of
#                 BENCH_DBS; the report is printed, and written only to
#                 BENCH_OUT when that is given (never over the full run's)
#   BENCH_ONLY=shipped   only the shipped-configuration rows (GETs, then
#                 writes), on each of BENCH_DBS; printed as for tokens;
#                 BENCH_ONLY=shipped-writes only their write rows
#   BENCH_ROUNDS=N       N alternating rounds instead of 3 (or 1 quick):
#                 more rounds, steadier medians on a noisy machine
#   BENCH_DUR=S          S seconds a run instead of 3 (or 1 quick)
#   BENCH_LEASE=SECONDS  the read-lease rows' lease length (t/bench/
#                 lease-rows.sh; default 2): PostgreSQL's rows with
#                 LessonsDBLease off and on; 0 leaves them out
#   BENCH_ONLY=lease     only the read-lease rows, on PostgreSQL; printed
#                 as for tokens; BENCH_ONLY=lease-writes only their
#                 write rows
#   BENCH_SERVERS        the read-lease rows' server counts (default "1 4")
#   BENCH_WRITE_SERVERS=N  the read-lease write rows on one of N servers
#                 (default 4, as issue 56's targets; 1 to 16)
#   BENCH_LEASE_PEER=1   the read-lease rows' servers with the lease on
#                 have LessonsDBLeasePeer too (each its own UDP port)
#   BENCH_PEERS_APART=1  the read-lease write rows' other servers run
#                 SCHED_FIFO, standing in for hosts of their own (root)
#
# Per database, in this order: load t/bench/bench-lessons.sql; start httpd
# (event MPM, t/bench/httpd.conf) on a free 127.0.0.1 port; save each GET
# route's response bytes as its twin; wrk every GET route and its twin in
# alternating rounds (the 150-client row last); restart, and RSS of the
# children before and after many requests; restart as `apache2 -X` under
# callgrind for instructions per request; restart and measure creates and
# updates at 8 and at 32 clients, with their baselines in the same rounds
# (pgbench running the module's statements, printed from its tables by
# build/bench/statement, on PostgreSQL; bare INSERT loops of one writer
# and of 8 on SQLite); on PostgreSQL, 4 servers on the one database,
# then the read-lease rows (t/bench/lease-rows.sh: 1 and 4 servers, the
# shipped GET by id and 304, writes on one of 4 servers; each with
# LessonsDBLease off and on) unless BENCH_LEASE=0.
# Once: the neighbour location and the static twin's sanity row, and the
# token rows (t/bench/token-rows.sh, issue 44): a certificate-bound GET
# over TLS and an introspected GET from the cache, each against HS256 on
# the same server.
# Everything it starts (httpd, valgrind, PostgreSQL) is stopped on any exit,
# Ctrl-C included, and the temp dir removed.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BENCH_DIR=$ROOT/t/bench
MODULE=${MODULE:-$ROOT/build/mod_lessons.so}
HTTPD=${HTTPD:-/usr/sbin/apache2}
HTTPD_MODULES=${HTTPD_MODULES:-/usr/lib/apache2/modules}
PGBIN=${PGBIN:-$( (ls -d /usr/lib/postgresql/*/bin 2>/dev/null || true) | sort -V | tail -n 1)}
OUT=${BENCH_OUT:-$ROOT/docs/benchmarks.md}
DBS=${BENCH_DBS:-sqlite3 pgsql}
PG_USER_SYS=lessons-test          # as root, PostgreSQL runs as this user (as in make test)

if [ -n "${BENCH_QUICK:-}" ] && [ "${BENCH_QUICK}" != 0 ]; then
    QUICK=1; ROUNDS=1; DUR=1; CG_N=20; RSS_N=20000; RSS_WARM=2000
else
    QUICK=""; ROUNDS=3; DUR=3; CG_N=100; RSS_N=200000; RSS_WARM=10000
fi
CG_WARM=20
CONNS=32
LESSON_ID=42                      # "by id": a B1 lesson
NIDS=102                          # lessons in the dataset
COMMAND=${BENCH_COMMAND:-"t/bench/bench.sh${QUICK:+ (BENCH_QUICK=1)}${BENCH_ONLY:+ (BENCH_ONLY=$BENCH_ONLY)}"}

log() { printf 'bench: %s\n' "$*" >&2; }
die() { printf 'bench: %s\n' "$*" >&2; exit 1; }
ONLY=${BENCH_ONLY:-}
case "$ONLY" in
    "") ;;
    tokens) DBS=${DBS%% *}; OUT=${BENCH_OUT:-} ;;
    shipped|shipped-writes) OUT=${BENCH_OUT:-} ;;
    lease|lease-writes) DBS=pgsql; OUT=${BENCH_OUT:-} ;;
    *) die "BENCH_ONLY: unknown rows $ONLY (tokens, shipped, shipped-writes, lease or lease-writes)" ;;
esac
LEASE=${BENCH_LEASE-2}
case "$LEASE" in
    0|"") LEASE=0
          [ "${ONLY#lease}" = "$ONLY" ] || die "BENCH_ONLY=$ONLY with BENCH_LEASE=0: no rows to run" ;;
    [1-9]|[1-9][0-9]) ;;
    *) die "BENCH_LEASE: $LEASE is not a lease length in seconds (0-99)" ;;
esac
# servers_count NAME N: N is a number of servers the rows can start.
servers_count() {
    case "$2" in [1-9]|1[0-6]) ;; *) die "$1: $2 is not a number of servers (1-16)" ;; esac
}
for n in ${BENCH_SERVERS:-}; do servers_count BENCH_SERVERS "$n"; done
servers_count BENCH_WRITE_SERVERS "${BENCH_WRITE_SERVERS:-4}"
case "${BENCH_ROUNDS:-}" in
    "") ;;
    [1-9]|[1-9][0-9]) ROUNDS=$BENCH_ROUNDS ;;
    *) die "BENCH_ROUNDS: $BENCH_ROUNDS is not a number of rounds (1-99)" ;;
esac
case "${BENCH_DUR:-}" in
    "") ;;
    [1-9]|[1-5][0-9]) DUR=$BENCH_DUR ;;
    *) die "BENCH_DUR: $BENCH_DUR is not a number of seconds (1-59)" ;;
esac
# The "at MaxRequestWorkers" rows: as many clients as the server has
# workers (t/bench/httpd.conf), where a shedding gate would show.
MAXCLIENTS=$(awk '$1 == "MaxRequestWorkers" { print $2 }' "$BENCH_DIR/httpd.conf")
[ -n "$MAXCLIENTS" ] || die "no MaxRequestWorkers in $BENCH_DIR/httpd.conf"

# --- checks -------------------------------------------------------------
[ -f "$MODULE" ] || die "$MODULE not found: run make first"
[ -x "$HTTPD" ] || die "$HTTPD not found: run t/tools/deps.sh bench"
for c in wrk curl openssl sqlite3 valgrind callgrind_control perl gzip; do
    command -v "$c" >/dev/null || die "$c not found: run t/tools/deps.sh bench"
done
for d in $DBS; do
    case "$d" in
        sqlite3) ;;
        pgsql) for b in initdb pg_ctl psql createdb pgbench; do
                   [ -x "$PGBIN/$b" ] || die "$PGBIN/$b not found: run t/tools/deps.sh bench"
               done ;;
        *) die "BENCH_DBS: unknown database $d (sqlite3, pgsql)" ;;
    esac
done

# --- who runs what ------------------------------------------------------
# httpd started as root serves as www-data (t/bench/httpd.conf); PostgreSQL
# refuses root, so it runs as the test user make test uses.
if [ "$(id -u)" -eq 0 ]; then
    HTTPD_USER=www-data
    # The callgrind run and callgrind_control run as that user: vgdb
    # reaches a valgrind of another user only half-way (and leaves it stopped).
    AS_HTTPD=(setpriv --reuid="$HTTPD_USER" --regid="$HTTPD_USER" --init-groups)
    if [[ " $DBS " == *" pgsql "* ]] && ! id -u "$PG_USER_SYS" >/dev/null 2>&1; then
        useradd --system --user-group --no-create-home \
            --home-dir /nonexistent --shell /usr/sbin/nologin "$PG_USER_SYS"
    fi
    AS_PG=(runuser -u "$PG_USER_SYS" --)
    PG_OWNER=$PG_USER_SYS
else
    HTTPD_USER=$(id -un)
    AS_HTTPD=()
    AS_PG=()
    PG_OWNER=$HTTPD_USER
fi

# --- the temp dir and cleanup -------------------------------------------
WORK=$(mktemp -d /tmp/lessons-bench.XXXXXX)
chmod 755 "$WORK"
HTTPD_PID=""
IDP_PID=""        # the token rows' provider (t/bench/token-rows.sh)
SERVER_PIDS=()    # the many-servers row's httpds (servers_phase)
PG_STARTED=""
cleanup() {
    rc=$?
    trap - EXIT INT TERM
    set +e
    # A run that dies before the phases are defined has none to stop.
    ! declare -F stop_httpd >/dev/null || stop_httpd
    ! declare -F stop_servers >/dev/null || stop_servers
    [ -z "$IDP_PID" ] || { kill "$IDP_PID"; wait "$IDP_PID"; } 2>/dev/null
    if [ -n "$PG_STARTED" ]; then
        "${AS_PG[@]}" "$PGBIN/pg_ctl" -D "$WORK/pg/data" -m immediate -w stop >/dev/null 2>&1
    fi
    if [ -n "${BENCH_KEEP:-}" ]; then
        log "kept $WORK"
    else
        rm -rf "$WORK"
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'log interrupted; exit 130' INT
trap 'exit 143' TERM

mkdir -p "$WORK/keys" "$WORK/static" "$WORK/run" "$WORK/logs" "$WORK/cg" "$WORK/db" "$WORK/out"
# What httpd writes belongs to the user it serves as: as root, the
# callgrind run starts as that user (valgrind's gdbserver, which
# callgrind_control talks to, cannot follow httpd's switch from root).
[ "$(id -u)" -ne 0 ] || chown "$HTTPD_USER:" "$WORK/run" "$WORK/logs" "$WORK/cg"
RUN_ROOT=$WORK                    # where the server's run/ and logs/ are
ERROR_LOG=$RUN_ROOT/logs/error.log
# The module and config this run loads, copied once: others may rebuild
# the module while the bench runs.
cp "$MODULE" "$WORK/mod_lessons.so"
cp "$ROOT/build/bench/sqlite-loop" "$WORK/sqlite-loop" 2>/dev/null \
    || die "build/bench/sqlite-loop not found: make bench builds it"
# The certificate-bound row's client; its phase says when it is missing
# (t/bench/conn-cost.sh, which sources this file, does not build it).
cp "$ROOT/build/bench/tls-load" "$WORK/tls-load" 2>/dev/null || true
TLS_LOAD=()
cp "$BENCH_DIR/httpd.conf" "$WORK/httpd.conf"
cp "$BENCH_DIR/minimal.conf" "$WORK/minimal.conf"
MODULE_SUM=$(sha256sum "$WORK/mod_lessons.so" | cut -c1-12)
RESULTS=$WORK/out/results.tsv     # db route kind round rps p50 p99 requests non2xx sockerr statements
CGRES=$WORK/out/callgrind.tsv     # db route kind instructions-per-request
META=$WORK/out/meta.tsv           # db key value
: >"$RESULTS"; : >"$CGRES"; : >"$META"
meta() { printf '%s\t%s\t%s\n' "$1" "$2" "$3" >>"$META"; }
echo ok >"$WORK/static/ping"

# --- free ports -----------------------------------------------------------
. "$ROOT/t/tools/ports.sh"

# --- keys and tokens --------------------------------------------------------
K=$WORK/keys
openssl rand -hex 32 | tr -d '\n' >"$K/hs256.key"
openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$K/rsa.key" 2>/dev/null
openssl pkey -in "$K/rsa.key" -pubout -out "$K/rsa.pub"
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$K/ec.key" 2>/dev/null
openssl pkey -in "$K/ec.key" -pubout -out "$K/ec.pub"
chmod 644 "$K"/*.pub "$K/hs256.key"     # throw-away keys; httpd -X reads them as $HTTPD_USER
TOKEN=$("$ROOT/t/tools/token" --key "$K/hs256.key" --alg HS256 --sub bench --ttl 14400)
TOKEN_RS=$("$ROOT/t/tools/token" --key "$K/rsa.key" --alg RS256 --sub bench --ttl 14400)
TOKEN_ES=$("$ROOT/t/tools/token" --key "$K/ec.key" --alg ES256 --sub bench --ttl 14400)

# --- httpd --------------------------------------------------------------
PORT=""
DRIVER=""
DBPARAMS=""
EXTRA_DEFINES=()     # e.g. (-D BENCH_NO_LESSONS) for the neighbour row
CONF=httpd.conf      # minimal.conf for the sanity row, shipped/apache2.conf
SERVER_ROOT=$WORK    # $WORK/shipped for the shipped rows (shipped.sh)
APACHE_ENV=()
httpd_defines() {
    [ ${#EXTRA_DEFINES[@]} -eq 0 ] || printf '%s\n' "${EXTRA_DEFINES[@]}"
    # Each server its own UDP port (t/bench/lease-rows.sh, BENCH_LEASE_PEER).
    [ -z "${PEER_PORTS:-}" ] || printf '%s\n' -C "Define BENCH_PEER_PORT $(pick_port "$PORT")"
    printf '%s\n' -C "Define BENCH_PORT $PORT" -C "Define BENCH_WORK $WORK" \
        -C "Define BENCH_RUN $RUN_ROOT" -C "Define BENCH_MODULE $WORK/mod_lessons.so" -C "Define BENCH_MODULES $HTTPD_MODULES" \
        -C "Define BENCH_DRIVER $DRIVER" -C "Define BENCH_DBPARAMS \"$DBPARAMS\""
}
# start_httpd [valgrind args...]: event MPM as a daemon-like foreground
# process in a session of its own (so its shutdown signals never reach
# us), or, with arguments, `httpd -X` under that command, as $HTTPD_USER.
start_httpd() {
    local defs=() limit=30
    PORT=$(pick_port "${TLS_PORT:-}")    # not the token rows' TLS port
    mapfile -t defs < <(httpd_defines)
    # What Debian's envvars sets, for the shipped apache2.conf
    # (t/bench/shipped.sh); the other confs do not read it.
    APACHE_ENV=(env APACHE_RUN_USER="$HTTPD_USER" APACHE_RUN_GROUP="$(id -gn "$HTTPD_USER")"
        APACHE_PID_FILE="$RUN_ROOT/run/httpd.pid" APACHE_RUN_DIR="$RUN_ROOT/run"
        APACHE_LOCK_DIR="$RUN_ROOT/lock" APACHE_LOG_DIR="$RUN_ROOT/logs" LANG=C)
    ERROR_LOG=$RUN_ROOT/logs/error.log
    : >"$ERROR_LOG"
    rm -f "$RUN_ROOT/run/httpd.pid"
    if [ $# -gt 0 ]; then
        # setpriv execs (runuser would fork): $! is valgrind's pid.
        [ "$(id -u)" -ne 0 ] || chown -R "$HTTPD_USER:" "$WORK/run" "$WORK/logs" "$WORK/cg"
        setsid "${AS_HTTPD[@]}" "$@" "$HTTPD" -X -d "$SERVER_ROOT" -f "$WORK/$CONF" "${defs[@]}" \
            </dev/null >>"$WORK/httpd.out" 2>&1 &
        limit=180
    else
        setsid "${APACHE_ENV[@]}" "$HTTPD" -DFOREGROUND -d "$SERVER_ROOT" -f "$WORK/$CONF" "${defs[@]}" \
            </dev/null >>"$WORK/httpd.out" 2>&1 &
    fi
    HTTPD_PID=$!
    local t=0
    until [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/static/ping")" = 200 ]; do
        if ! kill -0 "$HTTPD_PID" 2>/dev/null; then
            tail -n 20 "$WORK/httpd.out" "$ERROR_LOG" >&2 2>/dev/null || true
            HTTPD_PID=""
            die "httpd did not start"
        fi
        t=$((t + 1))
        [ $t -lt $((limit * 5)) ] || { tail -n 20 "$ERROR_LOG" >&2; die "httpd did not answer in ${limit}s"; }
        sleep 0.2
    done
}
stop_httpd() {
    [ -n "$HTTPD_PID" ] || return 0
    local pid=$HTTPD_PID
    HTTPD_PID=""
    kill -CONT "$pid" 2>/dev/null || true     # a vgdb that failed leaves it stopped
    kill -TERM "$pid" 2>/dev/null || return 0
    for _ in $(seq 1 150); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.2
    done
    # Whatever is left of its session (children, valgrind).
    kill -KILL -- "-$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
}
url() { echo "http://127.0.0.1:$PORT$1"; }
# error_lines LABEL: the server's error_log lines at level error or worse:
# the last 5 shown on stderr after LABEL, their count on stdout.
error_lines() {
    grep -aE ':(emerg|alert|crit|error)\]' "$ERROR_LOG" | tail -n 5 | sed "s/^/bench: $1: /" >&2 || true
    grep -acE ':(emerg|alert|crit|error)\]' "$ERROR_LOG" || true
}

# --- wrk ----------------------------------------------------------------
# wrk's report as "rps p50-ms p99-ms requests non2xx socket-errors", where
# rps counts only the 2xx/3xx responses (a 503 is quick, and no success).
parse_wrk() {
    perl -ne '
        sub ms { my ($v, $u) = @_; $u eq "us" ? $v / 1000 : $u eq "s" ? $v * 1000 : $u eq "m" ? $v * 60000 : $v }
        $p50 = ms($1, $2) if /^\s+50%\s+([\d.]+)(us|ms|s|m)\b/;
        $p99 = ms($1, $2) if /^\s+99%\s+([\d.]+)(us|ms|s|m)\b/;
        $n = $1 if /^\s+(\d+) requests in/;
        $bad = $1 if /Non-2xx or 3xx responses: (\d+)/;
        $err = $1 + $2 + $3 + $4 if /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/;
        $rps = $1 if /^Requests\/sec:\s+([\d.]+)/;
        END { $rps *= ($n - $bad) / $n if $n && $bad;
              print join("\t", $rps // 0, $p50 // 0, $p99 // 0, $n // 0, $bad // 0, $err // 0), "\n" }'
}
# Statements PostgreSQL ran for the module (pg_stat_statements, which
# counts each as it ends), and the counter's reset.
pg_statements() {
    pg_run -d lessons -At -c "SELECT coalesce(sum(calls), 0) FROM pg_stat_statements
        WHERE query NOT ILIKE '%pg_stat_statements%'"
}
# The same and, of them, the read leases' (LessonsDBLease, docs/
# scaling.md): "total lease".  pg_stat_statements keeps no
# application_name, so the holder's statements are told by their text:
# the renewals, checks, acknowledgements and releases all name
# lessons_leases (modules/store/lessons_store.c), and its connection's
# set-up is the SETs and LISTENs no other connection sends.
pg_statements_split() {
    pg_run -d lessons -At -F ' ' -c "SELECT coalesce(sum(calls), 0),
        coalesce(sum(calls) FILTER (WHERE query ILIKE '%lessons_leases%'
            OR query ~* '^\s*(LISTEN|SET application_name|SET synchronous_commit)'), 0)
        FROM pg_stat_statements WHERE query NOT ILIKE '%pg_stat_statements%'"
}
pg_statements_reset() { pg_run -d lessons -At -c 'SELECT pg_stat_statements_reset()' >/dev/null; }
# PostgreSQL's share of all CPU time (every CPU) from pg_cpu_mark to
# pg_cpu_share: the cluster's user and system ticks from /proc over the
# machine's.
cpu_ticks_total() { awk '/^cpu / { s = 0; for (i = 2; i <= NF; i++) s += $i; print s }' /proc/stat; }
# The cluster's ticks so far: its live backends' own, and the
# postmaster's with those of every backend it has reaped (pgbench's
# connections end before the share is read).
pg_ticks() {
    local pm p
    pm=$(head -n 1 "$WORK/pg/data/postmaster.pid")
    {
        awk '{ sub(/^.*\) /, ""); print $12 + $13 + $14 + $15 }' "/proc/$pm/stat"
        for p in $(ps -o pid= --ppid "$pm"); do
            awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$p/stat" 2>/dev/null || true
        done
    } | awk '{ s += $1 } END { print s + 0 }'
}
PG_CPU_BEFORE=0; PG_CPU_T0=0
pg_cpu_mark() { PG_CPU_BEFORE=$(pg_ticks); PG_CPU_T0=$(cpu_ticks_total); }
pg_cpu_share() {
    local after t1
    after=$(pg_ticks); t1=$(cpu_ticks_total)
    awk -v p="$((after - PG_CPU_BEFORE))" -v t="$((t1 - PG_CPU_T0))" \
        'BEGIN { printf "%.4f\n", (t > 0 ? p / t : 0) }'
}
# A write's rounds on PostgreSQL: what share of the CPU the database got.
pg_write_run() { [[ "$1" == *pgsql ]] && case $2 in create*|update*) true ;; *) false ;; esac; }

# The machine's idle and all CPU time (idle and iowait, of every state)
# and its context switches so far, on one line.
cpu_counters() {
    awk '/^ctxt/ { print $2 } /^cpu / { print $5 + $6, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9 }' /proc/stat | paste -sd' '
}

# wrk_run DB ROUTE KIND ROUND URL [wrk args]: one run, one line in RESULTS
# (with TLS_LOAD set, CERT KEY CAFILE, the run is build/bench/tls-load's)
# (the statements PostgreSQL ran for it last, for the module's runs on
# PostgreSQL, shipped-pgsql's included).
wrk_run() {
    local db=$1 route=$2 kind=$3 round=$4 u=$5 out conns=$CONNS stmts=- lstmts
    shift 5
    [ "$route" != idmax ] || conns=$MAXCLIENTS
    [[ "$db:$kind" != *pgsql:mod ]] || pg_statements_reset
    ! pg_write_run "$db" "$route" || pg_cpu_mark
    if [ ${#TLS_LOAD[@]} -gt 0 ]; then
        # wrk's measurement with a client certificate (the certificate-
        # bound row: t/bench/token-rows.sh, t/bench/tls-load.c).
        out=$("$WORK/tls-load" "$u" "$DUR" "$conns" "${TLS_LOAD[@]}" "$@" 2>&1) \
            || { printf '%s\n' "$out" >&2; die "tls-load failed on $u"; }
    else
        # The machine's context switches during the run, a request:
        # the process wake-ups a write costs (docs/scaling.md); and how
        # much of its CPUs' time went idle (a run with idle CPUs waits
        # on something else than them).  They count everything on the
        # machine: read them on a quiet one.
        local cx0 cx1
        cx0=$(cpu_counters)
        out=$(wrk -t1 -c$conns -d${DUR}s --latency "$@" "$u" 2>&1) \
            || { printf '%s\n' "$out" >&2; die "wrk failed on $u"; }
        cx1=$(cpu_counters)
        printf '%s\n' "$out" | awk -v a="$cx0" -v b="$cx1" 'BEGIN { split(a, x, " "); split(b, y, " ") }
            /^ *[0-9]+ requests in/ { printf "bench:   context switches %d, %.1f a request; CPUs idle %.0f%%\n",
                y[3] - x[3], (y[3] - x[3]) / $1, (y[2] > x[2] ? 100 * (y[1] - x[1]) / (y[2] - x[2]) : 0) }' >&2
    fi
    ! pg_write_run "$db" "$route" || meta "$db" "pgcpu_${route}_${kind}_$round" "$(pg_cpu_share)"
    if [[ "$db:$kind" == lease*pgsql:mod ]]; then
        # The read-lease rows (t/bench/lease-rows.sh): the leases' share too.
        read -r stmts lstmts < <(pg_statements_split)
        meta "$db" "lease_stmts_${route}_$round" "$lstmts"
    elif [[ "$db:$kind" == *pgsql:mod ]]; then
        stmts=$(pg_statements)
    fi
    printf '== %s %s %s round %s\n%s\n' "$db" "$route" "$kind" "$round" "$out" >>"$WORK/out/wrk.log"
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$db" "$route" "$kind" "$round" \
        "$(printf '%s\n' "$out" | parse_wrk)" "$stmts" >>"$RESULTS"
    tail -n 1 "$RESULTS" | awk -F'\t' '{ printf "bench:   %-7s %-9s %-6s r%s %8.0f req/s  p50 %7.2f ms  p99 %7.2f ms%s%s\n",
        $1, $2, $3, $4, $5, $6, $7, ($11 != "-" && $8 > 0 ? sprintf("  %.3f statements/req", $11 / $8) : ""),
        ($9 + $10 > 0 ? "  (" $9 " non-2xx/3xx, " $10 " socket errors)" : "") }' >&2
}

# --- the databases --------------------------------------------------------
PGPORT=""
setup_sqlite3() {
    local dir=$WORK/db/sqlite
    mkdir -p "$dir"
    sqlite3 -bail "$dir/lessons.db" <"$ROOT/sql/schema.sqlite.sql" >/dev/null
    sqlite3 -bail "$dir/lessons.db" <"$BENCH_DIR/bench-lessons.sql"
    [ "$(id -u)" -ne 0 ] || chown -R "$HTTPD_USER:" "$dir"
    DBPARAMS="file:$dir/lessons.db?mode=rw"
}
pg_run() {
    "$PGBIN/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$PGPORT" -U lessons "$@"
}
setup_pgsql() {
    mkdir -p "$WORK/pg"
    [ "$(id -u)" -ne 0 ] || chown "$PG_OWNER:" "$WORK/pg"
    "${AS_PG[@]}" "$PGBIN/initdb" -D "$WORK/pg/data" -U lessons -A trust \
        -E UTF8 --no-locale >"$WORK/pg/initdb.log" 2>&1 \
        || { cat "$WORK/pg/initdb.log" >&2; die "initdb failed"; }
    local attempt
    for attempt in 1 2 3 4 5; do
        PGPORT=$(pick_port)
        # PostgreSQL's defaults (durable commits, as in production) but
        # room for every pooled connection plus pgbench's 32.
        if "${AS_PG[@]}" "$PGBIN/pg_ctl" -D "$WORK/pg/data" -l "$WORK/pg/server.log" \
            -w -t 60 -o "-c listen_addresses=127.0.0.1 -p $PGPORT \
                -c unix_socket_directories=$WORK/pg -c max_connections=300 \
                -c shared_preload_libraries=pg_stat_statements" \
            start >/dev/null 2>&1; then
            PG_STARTED=1
            break
        fi
    done
    [ -n "$PG_STARTED" ] || { tail -n 20 "$WORK/pg/server.log" >&2; die "PostgreSQL did not start"; }
    "$PGBIN/createdb" -h 127.0.0.1 -p "$PGPORT" -U lessons lessons
    PGOPTIONS="-c client_min_messages=warning" pg_run -d lessons -f "$ROOT/sql/schema.pgsql.sql" >/dev/null
    pg_run -d lessons -c 'CREATE EXTENSION pg_stat_statements' >/dev/null
    pg_run -d lessons -f "$BENCH_DIR/bench-lessons.sql" >/dev/null
    DBPARAMS="host=127.0.0.1 port=$PGPORT dbname=lessons user=lessons connect_timeout=5"
}
stop_pgsql() {
    [ -n "$PG_STARTED" ] || return 0
    "${AS_PG[@]}" "$PGBIN/pg_ctl" -D "$WORK/pg/data" -m fast -w stop >/dev/null 2>&1 || true
    PG_STARTED=""
}

# --- the GET routes and their twins ---------------------------------------
API=/api/lessons
ETAG=""; TWIN_ETAG=""; GZIP=""; GZ_TWIN=""
GET_ROUTES="all id beginner level3 r304 gzip"
# route_args ROUTE KIND: the URL path, then wrk/curl header arguments, one a line.
route_args() {
    local auth="Authorization: Bearer $TOKEN"
    case "$1:$2" in
        all:mod)      printf '%s\n' "$API" -H "$auth" ;;
        all:twin)     printf '%s\n' /static/all -H "$auth" ;;
        id:mod)       printf '%s\n' "$API/$LESSON_ID" -H "$auth" ;;
        id:twin)      printf '%s\n' /static/id -H "$auth" ;;
        beginner:mod) printf '%s\n' "$API/beginner" -H "$auth" ;;
        beginner:twin) printf '%s\n' /static/beginner -H "$auth" ;;
        level3:mod)   printf '%s\n' "$API/level/3" -H "$auth" ;;
        level3:twin)  printf '%s\n' /static/level3 -H "$auth" ;;
        r304:mod)     printf '%s\n' "$API" -H "$auth" -H "If-None-Match: $ETAG" ;;
        r304:twin)    printf '%s\n' /static/all -H "$auth" -H "If-None-Match: $TWIN_ETAG" ;;
        gzip:mod)     printf '%s\n' "$API" -H "$auth" -H "Accept-Encoding: gzip" ;;
        gzip:twin)    printf '%s\n' "/static/$GZ_TWIN" -H "$auth" -H "Accept-Encoding: gzip" ;;
        id_rs:mod)    printf '%s\n' "/rs256$API/$LESSON_ID" -H "Authorization: Bearer $TOKEN_RS" ;;
        id_es:mod)    printf '%s\n' "/es256$API/$LESSON_ID" -H "Authorization: Bearer $TOKEN_ES" ;;
        idmax:*)      route_args id "$2" ;;
        *) die "route_args $1 $2" ;;
    esac
}
# fetch NAME EXPECTED-STATUS ROUTE KIND: one request with curl, headers
# and body kept in out/NAME.{hdr,body}.
fetch() {
    local name=$1 want=$2 args=() code
    mapfile -t args < <(route_args "$3" "$4")
    code=$(curl -s -D "$WORK/out/$name.hdr" -o "$WORK/out/$name.body" -w '%{http_code}' \
           "${args[@]:1}" "$(url "${args[0]}")") || code=000
    if [ "$code" != "$want" ]; then
        head -c 600 "$WORK/out/$name.body" >&2 2>/dev/null || true
        tail -n 5 "$ERROR_LOG" >&2 || true
        die "GET ${args[0]} ($3 $4) answered $code, not $want"
    fi
}
header() { tr -d '\r' <"$WORK/out/$1.hdr" | awk -v h="$2" 'BEGIN { IGNORECASE = 1 }
    tolower($0) ~ "^" tolower(h) ":" { sub(/^[^:]*:[ \t]*/, ""); v = $0 } END { print v }'; }

# capture DB: the exact bytes of each measured response become the twins.
capture() {
    local db=$1 r
    for r in all id beginner level3; do
        fetch "$db-$r" 200 "$r" mod
        cp "$WORK/out/$db-$r.body" "$WORK/static/$r"
    done
    # gzip: the twin is whatever bytes came back, as a file (a .gz one,
    # sent with Content-Encoding: gzip, if they were gzip).
    fetch "$db-gzip" 200 gzip mod
    rm -f "$WORK/static/all-gzip" "$WORK/static/all-gzip.gz"
    if [ "$(header "$db-gzip" Content-Encoding)" = gzip ]; then
        GZIP=yes; GZ_TWIN=all-gzip.gz
    else
        GZIP=no; GZ_TWIN=all-gzip
    fi
    cp "$WORK/out/$db-gzip.body" "$WORK/static/$GZ_TWIN"
    meta "$db" gzip "$GZIP"
    meta "$db" gzip_bytes "$(wc -c <"$WORK/out/$db-gzip.body")"
    meta "$db" all_bytes "$(wc -c <"$WORK/out/$db-all.body")"
    if [ "$GZIP" = yes ] && ! gzip -dc "$WORK/out/$db-gzip.body" | cmp -s - "$WORK/out/$db-all.body"; then
        log "warning: $db: the gzip body does not inflate to GET all's body"
        meta "$db" gzip_mismatch yes
    fi
    # 304: revalidate GET all with its ETag; the twin with the file's.
    ETAG=$(header "$db-all" ETag)
    meta "$db" etag "${ETAG:-none}"
    if [ -n "$ETAG" ]; then
        fetch "$db-r304" 304 r304 mod
        curl -s -o /dev/null -D "$WORK/out/$db-twin-all.hdr" -H "Authorization: Bearer $TOKEN" \
            "$(url /static/all)"
        TWIN_ETAG=$(header "$db-twin-all" ETag)
        fetch "$db-r304-twin" 304 r304 twin
    fi
    # Every twin answers 200 with the same bytes; the other keys work.
    for r in all id beginner level3; do
        fetch "$db-twin-$r" 200 "$r" twin
        cmp -s "$WORK/out/$db-twin-$r.body" "$WORK/out/$db-$r.body" || die "twin of $r differs"
    done
    fetch "$db-id_rs" 200 id_rs mod
    fetch "$db-id_es" 200 id_es mod
    log "$db: GET all $(meta_get "$db" all_bytes) bytes; ETag: ${ETAG:-none}; gzip: $GZIP"
}
meta_get() { awk -F'\t' -v d="$1" -v k="$2" '$1 == d && $2 == k { v = $3 } END { print v }' "$META"; }
have_route() {    # route measured on this server?
    [ "$1" != r304 ] || [ -n "$ETAG" ]
}

get_rounds() {
    local db=$1
    # The 150-client row runs after the others, never between them: after
    # 150 connections the MPM has children to retire, and the row measured
    # next lost 9% to that churn (GET all, the first route of each round,
    # every round; the twin measured after it did not).
    get_phase "$db" "$GET_ROUTES id_rs id_es"
    get_phase "$db" idmax
}
get_phase() {
    local db=$1 routes=$2 round r kind kinds conns args=()
    # Warm-up, not counted: pools, caches, the first children.
    for r in $routes; do
        have_route "$r" || continue
        conns=$CONNS
        [ "$r" != idmax ] || conns=$MAXCLIENTS
        mapfile -t args < <(route_args "$r" mod)
        wrk -t1 -c$conns -d1s "${args[@]:1}" "$(url "${args[0]}")" >/dev/null 2>&1 || true
    done
    for round in $(seq 1 "$ROUNDS"); do
        # Who goes first alternates, so neither side always follows the
        # other's load.
        kinds="mod twin"
        [ $((round % 2)) -eq 1 ] || kinds="twin mod"
        for r in $routes; do
            have_route "$r" || continue
            for kind in $kinds; do
                case "$r:$kind" in id_rs:twin|id_es:twin) continue ;; esac
                mapfile -t args < <(route_args "$r" "$kind")
                wrk_run "$db" "$r" "$kind" "$round" "$(url "${args[0]}")" "${args[@]:1}"
            done
        done
    done
}

# --- memory: RSS of the children before and after many requests ------------
rss_snapshot() {    # "pid rss-kB" for each child of httpd
    local p
    for p in $(ps -o pid= --ppid "$HTTPD_PID"); do
        awk -v p="$p" '/^VmRSS:/ { print p, $2 }' "/proc/$p/status" 2>/dev/null || true
    done
}
# mix_run N: N requests of every GET route in turn (t/bench/wrk-mix.lua);
# wrk's report on stdout.
mix_run() {
    local n=$1 done=$WORK/out/mix.done pid t=0
    rm -f "$done"
    BENCH_TOKEN=$TOKEN BENCH_REQUESTS=$n BENCH_IDS=$NIDS BENCH_DONE=$done \
        wrk -t1 -c$CONNS -d3600s -s "$BENCH_DIR/wrk-mix.lua" "$(url "$API")" \
        >"$WORK/out/mix.out" 2>&1 &
    pid=$!
    while [ ! -e "$done" ] && kill -0 "$pid" 2>/dev/null; do
        sleep 0.1
        t=$((t + 1))
        [ $t -lt 9000 ] || { kill -INT "$pid"; wait "$pid" || true; die "memory run: $n requests took over 15 minutes"; }
    done
    kill -INT "$pid" 2>/dev/null || true
    wait "$pid" || true
    [ -e "$done" ] || { cat "$WORK/out/mix.out" >&2; die "wrk (memory run) stopped early"; }
    cat "$WORK/out/mix.out"
}
# Perl for rss_phase: snap(TEXT) reads rss_snapshot's lines into a hash
# of pid => kB.
RSS_SNAP_PERL='sub snap { my %h; for (split /\n/, $_[0]) { my ($p, $k) = split; $h{$p} = $k if $p } return \%h }'
rss_phase() {
    local db=$1 start before after again out t0
    log "$db: memory: $RSS_WARM requests to warm up, then $RSS_N"
    t0=$(date +%s)
    start=$(rss_snapshot)
    mix_run "$RSS_WARM" >/dev/null
    before=$(rss_snapshot)
    out=$(mix_run "$RSS_N")
    printf '== %s memory\n%s\n' "$db" "$out" >>"$WORK/out/wrk.log"
    after=$(rss_snapshot)
    set -- $(printf '%s\n' "$out" | parse_wrk)
    meta "$db" rss_requests "$4"
    meta "$db" rss_rps "$1"
    meta "$db" rss_non2xx "$5"
    meta "$db" rss_sockerr "$6"
    # Summed over the children that served the whole warm-up (alive at
    # all three points): a child the MPM starts during the warm-up is
    # still filling its cache and pool when it ends, and its growth is
    # that, not a leak.  The sum over all children alive at both ends is
    # kept too, and shown when it differs.
    set -- $(perl -e "$RSS_SNAP_PERL"'
        my ($s, $b, $a) = map { snap($_) } @ARGV;
        my @common = grep { exists $a->{$_} } keys %$b;
        my @warm = grep { exists $s->{$_} } @common;
        my ($sb, $sa, $wb, $wa) = (0, 0, 0, 0);
        $sb += $b->{$_}, $sa += $a->{$_} for @common;
        $wb += $b->{$_}, $wa += $a->{$_} for @warm;
        printf "%d %d %d %d %d %d %d %d\n", $wb, $wa, scalar @warm,
            scalar keys %$b, scalar keys %$a, scalar @common, $sb, $sa;
    ' "$start" "$before" "$after")
    meta "$db" rss_before "$1"
    meta "$db" rss_after "$2"
    meta "$db" rss_children "$3 $4 $5 $6"
    meta "$db" rss_all_before "$7"
    meta "$db" rss_all_after "$8"
    log "$db: memory: children RSS $1 kB before, $2 kB after ($3 children through the warm-up; all $6 alive at both: $7 kB, $8 kB; $(( $(date +%s) - t0 )) s)"
    # Not a target, a witness: the same number of requests again.  Growth
    # that stops was warm-up (threads and their pools first put to work);
    # growth that goes on at the same pace is a leak.
    out=$(mix_run "$RSS_N")
    again=$(rss_snapshot)
    printf '== %s memory, again\n%s\n' "$db" "$out" >>"$WORK/out/wrk.log"
    set -- $(printf '%s\n' "$out" | parse_wrk)
    meta "$db" rss_non2xx_again "$5"
    set -- $(perl -e "$RSS_SNAP_PERL"'
        my @snap = map { snap($_) } @ARGV;
        my @all = grep { my $p = $_; !grep { !exists $_->{$p} } @snap } keys %{$snap[0]};
        my ($a, $g) = (0, 0);
        $a += $snap[2]{$_}, $g += $snap[3]{$_} for @all;
        printf "%d %d %d\n", scalar @all, $a, $g;
    ' "$start" "$before" "$after" "$again")
    meta "$db" rss_again "$1 $2 $3"
    log "$db: memory: another $RSS_N requests: the $1 children alive throughout, $2 kB then $3 kB"
}

# --- callgrind: userland instructions per request -------------------------
# curl_n N ROUTE KIND: N requests on one keep-alive connection (a new one
# every MaxKeepAliveRequests), each answered as expected.
curl_n() {
    local n=$1 args=() urls=() i want=200 got u
    mapfile -t args < <(route_args "$2" "$3")
    [ "$2" != r304 ] || want=304
    u=$(url "${args[0]}")
    for ((i = 0; i < n; i++)); do urls+=("$u" -o /dev/null); done
    got=$(curl -s -w '%{http_code}\n' "${args[@]:1}" "${urls[@]}" | grep -c "^$want\$" || true)
    [ "$got" -eq "$n" ] || die "callgrind: $2 $3: $got of $n requests answered $want"
}
# cg_record DB ROUTE KIND: the server's last callgrind dump, CG_N
# requests' worth, as a row of CGRES (instructions per request); the dump
# kept as cg/DB-ROUTE-KIND.callgrind with BENCH_KEEP=1 (for
# callgrind_annotate), else removed.
cg_record() {
    local dump total
    dump=$(ls -t "$WORK"/cg/callgrind.out."$HTTPD_PID".* 2>/dev/null | head -n 1)
    [ -n "$dump" ] || die "callgrind: no dump in $WORK/cg"
    total=$(awk '/^(totals|summary):/ { print $2; exit }' "$dump")
    [ -n "$total" ] || die "callgrind: no totals in $dump"
    if [ -n "${BENCH_KEEP:-}" ]; then
        mv "$dump" "$WORK/cg/$1-$2-$3.callgrind"
    else
        rm -f "$dump"
    fi
    printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" $((total / CG_N)) >>"$CGRES"
    printf 'bench:   %-7s %-9s %-6s %12d instructions/request\n' "$1" "$2" "$3" $((total / CG_N)) >&2
}
callgrind_phase() {
    local db=$1 r kind
    log "$db: callgrind: $CG_WARM warm-up and $CG_N measured requests per route (apache2 -X under valgrind)"
    [ "$(id -u)" -ne 0 ] || chown "$HTTPD_USER:" "$WORK/cg"
    start_httpd valgrind --tool=callgrind --callgrind-out-file="$WORK/cg/callgrind.out.%p"
    for r in $GET_ROUTES; do
        have_route "$r" || continue
        for kind in mod twin; do
            curl_n "$CG_WARM" "$r" "$kind"
            timeout 120 "${AS_HTTPD[@]}" callgrind_control -z "$HTTPD_PID" >/dev/null || die "callgrind_control -z failed"
            curl_n "$CG_N" "$r" "$kind"
            timeout 120 "${AS_HTTPD[@]}" callgrind_control -d "$HTTPD_PID" >/dev/null || die "callgrind_control -d failed"
            cg_record "$db" "$r" "$kind"
        done
    done
    stop_httpd
}

# --- writes -----------------------------------------------------------------
# write_rounds DB [CLIENTS]: creates and updates through the API on the
# server running now, CLIENTS wrk connections (without them: 8, then 32,
# BENCH_WRITE_CLIENTS), against the database's own speed for the same
# statement in the same rounds.  DB is the driver (sqlite3, pgsql), or
# NAME-driver for another server's rows (shipped-pgsql, as shipped.sh's
# GET rows), which RESULTS and META keep under that name:
#   PostgreSQL  pgbench running the module's statement (the write and its
#               read-back, one statement: lessons_create_returning,
#               lessons_update_returning) on as many connections
#   SQLite      a bare loop of the module's INSERT (lessons_create), one
#               transaction each: one writer against fewer than 32
#               clients, 8 writers at once against 32 or more (issue 45)
# Its routes in RESULTS are createCLIENTS and updateCLIENTS (create8,
# update32); the baselines are recorded under the same route, kinds
# pgbench, loop1 and loop8.
# The statements come from the module's own tables (build/bench/statement):
# their names go to the driver's META (stmt_create, stmt_update), their
# texts to out/*.sql and wrk.log.  The values are wrk-write.lua's.
STATEMENT=${BENCH_STATEMENT:-$ROOT/build/bench/statement}
CREATE_TITLE='Ein Tag in Hamburg – A day in Hamburg'
CREATE_TOPIC='Travel'
CREATE_DESC='Planning a day in the city with the Präteritum and time expressions. Example: „Zuerst fuhren wir mit der Fähre über die Elbe, danach aßen wir Fischbrötchen am Hafen.“'
UPDATE_DESC_1='Reviewed: the Präteritum in written narratives. Example: „Es war einmal ein König, der hatte drei Töchter.“'
UPDATE_DESC_2='Reviewed again: the Präteritum in written narratives. Example: „Eines Tages ging die jüngste in den Wald.“'
WRITES_READY=""       # the databases whose baseline scripts are written
# write_statement DB FILE NAME VALUE...: statement NAME of DB's engine,
# values in the order the module binds them, appended to FILE with a ';'.
write_statement() {
    local db=$1 file=$2 name=$3 sql
    shift 3
    sql=$("$STATEMENT" --engine "$db" "$name" "$@") || die "$STATEMENT $name failed"
    printf '%s;\n' "$sql" >>"$file"
}
# The baselines' scripts, once per database; each one's text in wrk.log.
write_setup() {
    local db=$1 i f d
    case " $WRITES_READY " in *" $db "*) return 0 ;; esac
    [ -x "$STATEMENT" ] || die "$STATEMENT not found: make build/bench/statement (make bench builds it)"
    if [ "$db" = pgsql ]; then
        # Every value the module binds as a number (%d, %lld: the flags,
        # level, order, id and If-Match versions) is a pgbench variable,
        # so a parameter here too: with literals PostgreSQL would fold the
        # CASEs and ORs away, and pgbench would not run the same
        # statement.  The texts are literals (the module binds them as
        # text; no plan folds on them).  lessons_insert_args' order:
        # title, order, topic, description, active, level.
        f=$WORK/out/pgbench-create.sql
        printf '\\set lvl 3\n\\set ord 18\n\\set act 1\n' >"$f"
        write_statement "$db" "$f" lessons_create_returning \
            "$CREATE_TITLE" :ord "$CREATE_TOPIC" "$CREATE_DESC" :act :lvl
        # lessons_update_args' order for a body with only a description
        # and no If-Match (wrk-write.lua's): level, title, order, topic
        # not sent (flag 0, value 0 or ''), the description sent, active
        # not sent, the id, If-Match not asked (0, versions -1, epoch ''),
        # the level check's flag and level.  Two scripts, one description
        # each, picked at random: every update changes its row, as
        # wrk-write.lua's alternate.
        for i in 1 2; do
            f=$WORK/out/pgbench-update-$i.sql
            d=UPDATE_DESC_$i
            printf '\\set id random(1, %d)\n\\set no 0\n\\set yes 1\n\\set none -1\n' "$NIDS" >"$f"
            write_statement "$db" "$f" lessons_update_returning \
                :no :no :no '' :no :no :no '' :yes "${!d}" :no :no \
                :id :no :none :none :none :none '' :no :no
        done
        meta "$db" stmt_create lessons_create_returning
        meta "$db" stmt_update lessons_update_returning
    else
        f=$WORK/out/loop-insert.sql
        : >"$f"
        write_statement "$db" "$f" lessons_create \
            "$CREATE_TITLE" 18 "$CREATE_TOPIC" "$CREATE_DESC" 1 3
        meta "$db" stmt_create lessons_create
    fi
    for f in "$WORK"/out/pgbench-*.sql "$WORK"/out/loop-insert.sql; do
        [ -e "$f" ] || continue
        case "$db:$f" in pgsql:*pgbench-*|sqlite3:*loop-*) ;; *) continue ;; esac
        printf '== %s baseline statement %s\n%s\n' "$db" "${f##*/}" "$(cat "$f")" >>"$WORK/out/wrk.log"
    done
    WRITES_READY="$WRITES_READY $db"
}
# pgbench_run DB ROUTE ROUND CLIENTS SCRIPT...: the module's sessions plan
# each statement once (plan_cache_mode, lessons_engine_pgsql.c); pgbench's
# do the same, so that the baseline is the same statement run the same way.
pgbench_run() {
    local db=$1 route=$2 round=$3 clients=$4 out script scripts=() jobs=2
    shift 4
    for script in "$@"; do scripts+=(-f "$script"); done
    [ "$clients" -ge 2 ] || jobs=1
    pg_cpu_mark
    out=$(PGOPTIONS="-c client_min_messages=warning -c plan_cache_mode=force_generic_plan" "$PGBIN/pgbench" -n -h 127.0.0.1 -p "$PGPORT" -U lessons \
          -c "$clients" -j "$jobs" -T "$DUR" -M prepared "${scripts[@]}" lessons 2>&1) \
        || { printf '%s\n' "$out" >&2; die "pgbench failed"; }
    meta "$db" "pgcpu_${route}_pgbench_$round" "$(pg_cpu_share)"
    printf '== %s pgbench %s round %s\n%s\n' "$db" "$route" "$round" "$out" >>"$WORK/out/wrk.log"
    printf '%s\t%s\tpgbench\t%s\t%s\t0\t0\t0\t0\t0\n' "$db" "$route" "$round" \
        "$(printf '%s\n' "$out" | sed -n 's/^tps = \([0-9.]*\).*/\1/p' | tail -n 1)" >>"$RESULTS"
    tail -n 1 "$RESULTS" | awk -F'\t' -v c="$clients" '{ printf "bench:   %-7s %-9s %-6s r%s %8.0f tps (pgbench, the module'"'"'s statement, %d connections)\n", $1, $2, $3, $4, $5, c }' >&2
}
# Did pgbench run the text the module ran?  PostgreSQL's own record
# (pg_stat_statements): pg_shape_texts SHAPE gives the distinct texts
# that begin with SHAPE (the one-write statement; the module's batches
# begin "WITH l1"), without the "PREPARE label (types) AS " apr_dbd
# prepares the module's with, and with every value made one mark: a $n
# (a parameter, or a constant pg_stat_statements took out), a quoted
# text, a number.  pg_stat_statements takes the constants out only of
# an entry it makes while it parses: one that a statement prepared
# before its reset makes keeps them.  Read after the module's run (its
# reset is wrk_run's) and again after pgbench's, pg_statement_check DB
# ROUTE SHAPE BEFORE records META stmt_check_ROUTE: "same" when pgbench
# added no other text, "differ" when it did (both in wrk.log),
# "module-batched" when every write of the module went in a batch
# (nothing to compare).
pg_shape_texts() {
    pg_run -d lessons -At -c 'SELECT query FROM pg_stat_statements' | perl -ne '
        chomp;
        s/^PREPARE \S+ (?:\([^)]*\) )?AS //;
        s/\$\d+/\$/g; s/\x27(?:[^\x27]|\x27\x27)*\x27/\$/g; s/\b\d+\b/\$/g; s/;\s*$//;
        print "$_\n" if index($_, $shape) == 0;
        BEGIN { $shape = shift @ARGV }' "$1" | sort -u
}
pg_statement_check() {
    local db=$1 route=$2 shape=$3 before=$4 after verdict
    after=$(pg_shape_texts "$shape")
    if [ -z "$before" ]; then
        verdict=module-batched
    elif [ "$after" = "$before" ]; then
        verdict=same
    else
        verdict=differ
        log "warning: $db $route: pgbench's statement is not the module's (wrk.log)"
    fi
    meta "$db" "stmt_check_$route" "$verdict"
    printf '== %s %s: the module'"'"'s statement in pg_stat_statements ($n made one mark)\n%s\n== with pgbench'"'"'s: %s\n%s\n' \
        "$db" "$route" "$before" "$verdict" "$after" >>"$WORK/out/wrk.log"
}
# SQLite's creates against the disk's own speed (issue 19): a bare loop
# of one-row INSERT transactions -- the module's create statement, each
# its own transaction and so its own fsync -- on the same database file
# with the same durability (WAL, synchronous FULL), as the user httpd
# serves as: build/bench/sqlite-loop (t/bench/sqlite-loop.c), WRITERS
# threads, each with its own connection and the statement prepared once,
# for DUR seconds; a writer that finds the lock taken retries at once
# rather than after SQLite's millisecond backoff.  What writers get
# without sharing a commit: the module's group commit is measured
# against it.
sqlite_loop_run() {
    local db=$1 route=$2 round=$3 writers=$4 out rows rps
    local file=$WORK/db/sqlite/lessons.db
    out=$("${AS_HTTPD[@]}" "$WORK/sqlite-loop" "$file" "$WORK/out/loop-insert.sql" \
          "$writers" "$DUR" 2>&1) || { printf '%s\n' "$out" >&2; die "the SQLite INSERT loop failed"; }
    read -r rows _ rps <<<"$out"
    printf '%s\t%s\tloop%s\t%s\t%s\t0\t0\t%s\t0\t0\n' "$db" "$route" "$writers" "$round" "$rps" "$rows" >>"$RESULTS"
    printf 'bench:   %-7s %-9s loop%-2s r%s %8.0f tps (one-row lessons_create transactions, %d writer(s), %d rows)\n' \
        "$db" "$route" "$writers" "$round" "$rps" "$writers" "$rows" >&2
}
WRITE_CLIENTS=${BENCH_WRITE_CLIENTS:-8 32}
write_rounds() {
    local db=$1 clients=${2:-} engine=${1##*-} round rc ru writers=1 texts=""
    # Without CLIENTS: the bench server's rows, at each WRITE_CLIENTS.
    if [ -z "$clients" ]; then
        for clients in $WRITE_CLIENTS; do
            write_rounds "$db" "$clients"
        done
        return 0
    fi
    rc=create$clients
    ru=update$clients
    [ "$clients" -lt 32 ] || writers=8
    write_setup "$engine"
    # WRITE_ROUND_LIST: these rounds only (the read-lease rows run one
    # at a time, alternating with the lease off and on).
    for round in ${WRITE_ROUND_LIST:-$(seq 1 "$ROUNDS")}; do
        # CONNS for wrk_run's one call: the rows' client count.
        BENCH_WRITE=create BENCH_TOKEN=$TOKEN BENCH_BASE=$API CONNS=$clients \
            wrk_run "$db" "$rc" mod "$round" "$(url "$API")" -s "$BENCH_DIR/wrk-write.lua"
        if [ "$engine" = pgsql ]; then
            [ "$round" != 1 ] || texts=$(pg_shape_texts 'WITH l AS (INSERT')
            pgbench_run "$db" "$rc" "$round" "$clients" "$WORK/out/pgbench-create.sql"
            [ "$round" != 1 ] || pg_statement_check "$db" "$rc" 'WITH l AS (INSERT' "$texts"
        else
            sqlite_loop_run "$db" "$rc" "$round" "$writers"
        fi
        BENCH_WRITE=update BENCH_TOKEN=$TOKEN BENCH_BASE=$API BENCH_IDS=$NIDS CONNS=$clients \
            wrk_run "$db" "$ru" mod "$round" "$(url "$API")" -s "$BENCH_DIR/wrk-write.lua"
        if [ "$engine" = pgsql ]; then
            [ "$round" != 1 ] || texts=$(pg_shape_texts 'WITH l AS (UPDATE')
            pgbench_run "$db" "$ru" "$round" "$clients" "$WORK/out/pgbench-update-1.sql" "$WORK/out/pgbench-update-2.sql"
            [ "$round" != 1 ] || pg_statement_check "$db" "$ru" 'WITH l AS (UPDATE' "$texts"
        fi
    done
}

# --- the neighbour: the server's other locations, with and without us ------
# A Basic-auth (bcrypt) directory listing beside the API, on the same
# httpd with the module loaded and the API configured, and without both
# (-D BENCH_NO_LESSONS): alternating rounds, as the routes' are.
neighbour_phase() {
    local round auth
    mkdir -p "$WORK/neighbour"
    for i in $(seq 1 20); do echo "file $i" >"$WORK/neighbour/file-$i.txt"; done
    htpasswd -cbB "$WORK/keys/htpasswd" bench bench-secret >/dev/null 2>&1 \
        || die "htpasswd failed (apache2-utils)"
    [ "$(id -u)" -ne 0 ] || chmod a+r "$WORK/keys/htpasswd"
    auth="Authorization: Basic $(printf 'bench:bench-secret' | base64)"
    for round in $(seq 1 "$ROUNDS"); do
        EXTRA_DEFINES=()
        start_httpd
        wrk_run neighbour listing with "$round" "$(url /neighbour/)" -H "$auth"
        stop_httpd
        EXTRA_DEFINES=(-D BENCH_NO_LESSONS)
        start_httpd
        wrk_run neighbour listing without "$round" "$(url /neighbour/)" -H "$auth"
        stop_httpd
        EXTRA_DEFINES=()
    done
}

# --- the sanity row: the bench server's twin against a minimal httpd -----
# The same file (GET all's twin), the same wrk and header, on the bench
# server (module, API, logs and all) and on t/bench/minimal.conf, without
# and with the bench server's access log: alternating rounds.  A twin well
# below the minimal one means the bench's static path is slowed, and
# every "vs static" overstated; the access log's share of that (which the
# API's rows pay too) is the middle server's.
sanity_phase() {
    local round
    for round in $(seq 1 "$ROUNDS"); do
        CONF=httpd.conf
        start_httpd
        wrk_run sanity all bench "$round" "$(url /static/all)" -H "Authorization: Bearer $TOKEN"
        stop_httpd
        CONF=minimal.conf
        start_httpd
        wrk_run sanity all minimal "$round" "$(url /static/all)" -H "Authorization: Bearer $TOKEN"
        stop_httpd
        EXTRA_DEFINES=(-D BENCH_ACCESS_LOG)
        start_httpd
        wrk_run sanity all minimal-log "$round" "$(url /static/all)" -H "Authorization: Bearer $TOKEN"
        stop_httpd
        EXTRA_DEFINES=()
        CONF=httpd.conf
    done
}

# --- many Apache servers, one PostgreSQL (issue 19, docs/scaling.md) -----
# SERVERS separate httpds (bench.sh's server, each with its own run/ and
# logs/) on the one database, each driven by its own wrk at CONNS clients
# on GET by id, all at once: GETs a second in all, PostgreSQL's
# statements per GET, its share of the machine's CPU time (postmaster and
# backends, from /proc), and the httpd processes serving, for
# docs/scaling.md's prediction (each read of a process comes a window
# after its last, or serves at least 4 requests).
SERVERS=4
SERVER_PORTS=()
stop_servers() {
    local p
    for p in "${SERVER_PIDS[@]}"; do
        HTTPD_PID=$p
        stop_httpd
    done
    SERVER_PIDS=()
    SERVER_PORTS=()
}
# servers_start N: N httpds, each with its own run/ and logs/
# (server-I), their pids in SERVER_PIDS and ports in SERVER_PORTS, each
# warmed up on GET by id (not counted: pools and caches of every
# process).  EXTRA_DEFINES applies to each.
servers_start() {
    local n=$1 i dir
    for i in $(seq 1 "$n"); do
        dir=$WORK/server-$i
        mkdir -p "$dir/run" "$dir/logs"
        [ "$(id -u)" -ne 0 ] || chown "$HTTPD_USER:" "$dir/run" "$dir/logs"
        RUN_ROOT=$dir
        start_httpd
        SERVER_PIDS+=("$HTTPD_PID")
        SERVER_PORTS+=("$PORT")
        HTTPD_PID=""
        wrk -t1 -c$CONNS -d1s -H "Authorization: Bearer $TOKEN" \
            "http://127.0.0.1:$PORT$API/$LESSON_ID" >/dev/null 2>&1 || true
    done
    RUN_ROOT=$WORK
}
# servers_round DB ROUTE ROUND: a wrk on GET by id at each of
# SERVER_PORTS at once, one line in RESULTS (ROUTE, kind mod: summed
# rates and counts, the worst p50 and p99, PostgreSQL's statements),
# META ROUTE_pgcpu_ROUND, ROUTE_procs_ROUND, ROUTE_lease_stmts_ROUND
# (the read leases' share of the statements, pg_statements_split),
# ROUTE_window_ms_ROUND (the time they were counted over, from the
# counters' reset to their reading: longer than the wrks') and,
# where the servers answer /lessons-metrics (BENCH_METRICS),
# ROUTE_versions_ROUND: "statement lease", the catalogue versions the
# round's GETs took from each (catalog_versions).
servers_round() {
    local db=$1 route=$2 round=$3 i wrks=() stmts lstmts procs n=${#SERVER_PORTS[@]} v0 v1 t0
    v0=$(catalog_versions)
    pg_statements_reset
    t0=$(date +%s%N)
    pg_cpu_mark
    for i in $(seq 0 $((n - 1))); do
        wrk -t1 -c$CONNS -d${DUR}s --latency -H "Authorization: Bearer $TOKEN" \
            "http://127.0.0.1:${SERVER_PORTS[$i]}$API/$LESSON_ID" >"$WORK/out/servers-$i.out" 2>&1 &
        wrks+=($!)
    done
    # The wrks only: the httpds are this shell's children too.
    wait "${wrks[@]}"
    meta "$db" "${route}_pgcpu_$round" "$(pg_cpu_share)"
    read -r stmts lstmts < <(pg_statements_split)
    meta "$db" "${route}_window_ms_$round" $(( ($(date +%s%N) - t0) / 1000000 ))
    v1=$(catalog_versions)
    meta "$db" "${route}_lease_stmts_$round" "$lstmts"
    [ -z "$v0" ] || [ -z "$v1" ] \
        || meta "$db" "${route}_versions_$round" "$(awk -v a="$v0" -v b="$v1" \
               'BEGIN { split(a, x, " "); split(b, y, " "); print y[1] - x[1], y[2] - x[2] }')"
    procs=0
    for i in "${SERVER_PIDS[@]}"; do
        procs=$((procs + $(ps -o pid= --ppid "$i" | wc -l)))
    done
    # Each server's "rps p50 p99 requests non2xx sockerr", then the
    # whole: summed rates and counts, the worst p50 and p99.
    for i in $(seq 0 $((n - 1))); do
        printf '== %s %s %s round %s\n' "$db" "$route" "$i" "$round" >>"$WORK/out/wrk.log"
        cat "$WORK/out/servers-$i.out" >>"$WORK/out/wrk.log"
        parse_wrk <"$WORK/out/servers-$i.out"
    done | awk -F'\t' -v db="$db" -v route="$route" -v round="$round" -v st="$stmts" '
        { r += $1; if ($2 > p50) p50 = $2; if ($3 > p99) p99 = $3; n += $4; b += $5; e += $6 }
        END { printf "%s\t%s\tmod\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", db, route, round, r, p50, p99, n, b, e, st }' >>"$RESULTS"
    meta "$db" "${route}_procs_$round" "$procs"
    tail -n 1 "$RESULTS" | awk -F'\t' -v s="$n" '{ printf "bench:   %-7s %-10s %d servers r%s %8.0f req/s  p99 %7.2f ms  %.4f statements/req%s\n",
        $1, $2, s, $4, $5, $7, ($8 > 0 ? $11 / $8 : 0), ($9 + $10 > 0 ? "  (" $9 " non-2xx/3xx, " $10 " socket errors)" : "") }' >&2
}
# catalog_versions: "statement lease", the catalogue versions GETs took
# from each on all of SERVER_PORTS so far (lessons-metrics'
# lessons_catalog_versions_total); nothing where a server does not
# answer /lessons-metrics (started without BENCH_METRICS).
catalog_versions() {
    local port out a b st=0 le=0
    for port in "${SERVER_PORTS[@]}"; do
        out=$(curl -sf "http://127.0.0.1:$port/lessons-metrics") || return 0
        read -r a b < <(printf '%s\n' "$out" | awk '
            /^lessons_catalog_versions_total\{source="statement"\}/ { s = $2 }
            /^lessons_catalog_versions_total\{source="lease"\}/ { l = $2 }
            END { print s + 0, l + 0 }')
        st=$((st + a)); le=$((le + b))
    done
    echo "$st $le"
}
servers_phase() {
    local db=$1 round w
    servers_start "$SERVERS"
    for round in $(seq 1 "$ROUNDS"); do
        servers_round "$db" servers "$round"
    done
    meta "$db" servers "$SERVERS"
    # The window the servers ran with: httpd.conf's, else the module's
    # default (2 ms, docs/directives.md).
    w=$(awk '$1 == "LessonsDBShareWindow" { print $2 }' "$WORK/httpd.conf")
    meta "$db" servers_window_us "${w:-2000}"
    stop_servers
}

. "$BENCH_DIR/shipped.sh"
. "$BENCH_DIR/token-rows.sh"
. "$BENCH_DIR/lease-rows.sh"

# t/bench/conn-cost.sh sources this file for its checks, temp dir and
# cleanup, keys, tokens, databases, twins and start_httpd, and measures on
# its own from here.
[ -z "${BENCH_SOURCED:-}" ] || return 0

# --- run ----------------------------------------------------------------
START=$(date +%s)
log "work dir $WORK; module $MODULE; ${QUICK:+quick: }$ROUNDS round(s) of ${DUR}s, $CONNS connections"
for DRIVER in $DBS; do
    DB_START=$(date +%s)
    log "$DRIVER: loading t/bench/bench-lessons.sql"
    "setup_$DRIVER"
    start_httpd
    capture "$DRIVER"
    if [ -n "$ONLY" ]; then
        # The driver of one part alone (BENCH_ONLY).
        stop_httpd
        case "$ONLY" in
            tokens) token_phase "$DRIVER" ;;
            shipped) shipped_phase "$DRIVER"; shipped_writes "$DRIVER" ;;
            shipped-writes) shipped_setup "$DRIVER"; shipped_writes "$DRIVER" ;;
            lease) lease_phase "$DRIVER" ;;
            lease-writes) lease_write_phase "$DRIVER" ;;
        esac
        [ "$DRIVER" != pgsql ] || stop_pgsql
        meta "$DRIVER" seconds $(( $(date +%s) - DB_START ))
        continue
    fi
    log "$DRIVER: GET routes against their twins, $ROUNDS round(s)"
    get_rounds "$DRIVER"
    stop_httpd
    shipped_phase "$DRIVER"
    # The memory row on a server started for it: the 150-client rounds
    # leave more children than 32 clients keep, the MPM retires them
    # during the measured run, and the children left take over their
    # load (more of their threads and pooled connections at work), which
    # a leak check would count as growth (+17.4% at c223d38, +18.2% at
    # b023d04; the witness run after it +0.2% and +0.0%).
    start_httpd
    rss_phase "$DRIVER"
    stop_httpd
    callgrind_phase "$DRIVER"
    log "$DRIVER: creates and updates"
    start_httpd
    write_rounds "$DRIVER"
    meta "$DRIVER" errors "$(error_lines error_log)"
    stop_httpd
    shipped_writes "$DRIVER"
    if [ "$DRIVER" = pgsql ]; then
        log "pgsql: $SERVERS servers on one database, GET by id, $CONNS clients each, $ROUNDS round(s)"
        servers_phase "$DRIVER"
        [ "$LEASE" = 0 ] || lease_phase "$DRIVER"
    fi
    # Once, on the first database: the API's database plays no part.
    if [ "$DRIVER" = "${DBS%% *}" ]; then
        log "neighbour: a Basic-auth listing with and without the module, $ROUNDS round(s)"
        neighbour_phase
        log "sanity: the static twin of GET all, bench server against a minimal httpd, $ROUNDS round(s)"
        sanity_phase
        token_phase "$DRIVER"
    fi
    [ "$DRIVER" != pgsql ] || stop_pgsql
    meta "$DRIVER" seconds $(( $(date +%s) - DB_START ))
done

# --- report -------------------------------------------------------------
# The figures (t/bench/figures.gp): the full run's only, beside its
# report (images/ next to BENCH_OUT); a partial run would draw half.
FIGURES=
if [ -z "$ONLY" ] && [ -n "$OUT" ]; then
    FIGURES=$WORK/out/figures
    mkdir -p "$FIGURES"
fi
rev=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)
if [ -n "$(git -C "$ROOT" status --porcelain -- mod_lessons.c modules 2>/dev/null)" ]; then
    rev="$rev with uncommitted changes to the module"
fi
rev=${BENCH_MODULE_REV:-$rev}
BENCH_DATE=$(date -u '+%Y-%m-%d %H:%M UTC') \
BENCH_MACHINE="$(nproc) CPUs ($(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)), $(awk '/MemTotal/ { printf "%.0f GB RAM", $2 / 1048576 }' /proc/meminfo), Linux $(uname -r), $(. /etc/os-release && echo "$PRETTY_NAME")" \
BENCH_SOFTWARE="$("$HTTPD" -v | sed -n 's/^Server version: //p'), event MPM; SQLite $(sqlite3 --version | cut -d' ' -f1)$( [[ " $DBS " != *" pgsql "* ]] || echo "; PostgreSQL $("$PGBIN/postgres" --version | awk '{ print $3 }')"); wrk $(wrk -v 2>&1 | awk 'NR == 1 { print $2 }'); valgrind $(valgrind --version | sed 's/valgrind-//')" \
BENCH_REV="$rev (mod_lessons.so sha256 $MODULE_SUM…)" BENCH_COMMAND=$COMMAND BENCH_SECONDS=$(( $(date +%s) - START )) \
BENCH_ROUNDS=$ROUNDS BENCH_DUR=$DUR BENCH_CONNS=$CONNS BENCH_CPUS=$(nproc) BENCH_CG_N=$CG_N BENCH_CG_WARM=$CG_WARM \
BENCH_RSS_N=$RSS_N BENCH_RSS_WARM=$RSS_WARM BENCH_QUICK=$QUICK BENCH_LESSON_ID=$LESSON_ID BENCH_MAXCLIENTS=$MAXCLIENTS BENCH_ONLY=$ONLY \
BENCH_FIGURES=$FIGURES \
    perl "$BENCH_DIR/report.pl" "$RESULTS" "$CGRES" "$META" "$DBS" >"$WORK/out/benchmarks.md"
if [ -n "$FIGURES" ]; then
    mkdir -p "$WORK/out/images"
    gnuplot -e "dir='$FIGURES'; out='$WORK/out/images'; dbs='$(cat "$FIGURES/dbs")'" "$BENCH_DIR/figures.gp" \
        || die "gnuplot could not draw the figures (t/bench/figures.gp, data in $FIGURES)"
fi
if [ -n "$OUT" ]; then
    cp "$WORK/out/benchmarks.md" "$OUT"
    if [ -n "$FIGURES" ]; then
        mkdir -p "$(dirname "$OUT")/images"
        cp "$WORK/out/images/bench-reads.png" "$WORK/out/images/bench-writes.png" "$(dirname "$OUT")/images/"
        log "drew $(dirname "$OUT")/images/bench-reads.png and bench-writes.png"
    fi
    cat "$OUT"
    log "wrote $OUT in $(( $(date +%s) - START )) s"
else
    cat "$WORK/out/benchmarks.md"
    log "printed the report (BENCH_ONLY=$ONLY: not written; BENCH_OUT=FILE writes it) in $(( $(date +%s) - START )) s"
fi
