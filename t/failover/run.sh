#!/bin/bash
# Failover without serving the past as current (issue 18): a PostgreSQL
# primary and a streaming standby (two throw-away clusters), the module
# with libpq's multi-host DBDParams (host=a,b target_session_attrs=
# read-write).  The standby misses the primary's last commit (it is
# stopped before it, as asynchronous replication can lose it); the
# primary dies and the standby is promoted while clients keep asking.
#   - the module recovers without an Apache restart: only 503s with
#     Retry-After in between; prints the recovery time;
#   - once it has, requests 8 at a time (which reach the pool's older
#     connections, not only the one sequential requests reuse): all 200;
#   - the promoted server's history differs (its counters reach the same
#     versions with other content): no body or ETag from before is served
#     as current: GET gives the promoted server's lesson, If-None-Match
#     with the old tag is no 304, If-Match with it a 412, and the list's
#     old tag no 304 either;
#   - the promoted server restarts while no request runs: every pooled
#     connection's server has hung up, and the requests after it, 8 at a
#     time, are all 200 (none meets a dead connection and answers 503);
#   - the promoted server frozen (SIGSTOP): GETs on its connections are
#     answered 503 at LessonsDBTimeout, not when it resumes (issue 58);
#   - with no synchronous standby to confirm a commit, a server with read
#     leases answers its fenced GETs 503, one without 200 (issue 58);
#   - the old primary started again on its own history, frozen and
#     resumed while a leased server's lease moved to the promoted one:
#     its pooled connections never serve the old lesson under the
#     lease's version (issue 58).
# make test runs it (t/failover/failover.mk); make failover alone.
# With INTEGRATION_COUNTS=FILE, appends "passed failed" to FILE.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
MODULE=${MODULE:-$ROOT/build/mod_lessons.so}
HTTPD=${HTTPD:-/usr/sbin/apache2}
HTTPD_MODULES=${HTTPD_MODULES:-/usr/lib/apache2/modules}
PGBIN=${PGBIN:-$( (ls -d /usr/lib/postgresql/*/bin 2>/dev/null || true) | sort -V | tail -n 1)}
PG_USER_SYS=lessons-test
LINE='%-4s  %-24s %5d tests%s\n'

die() { echo "failover: $*" >&2; exit 1; }
[ -f "$MODULE" ] || die "$MODULE not found: run make first"
[ -x "$HTTPD" ] || die "$HTTPD not found: run t/tools/deps.sh test"
[ -x "$PGBIN/pg_basebackup" ] || die "PostgreSQL binaries not found: run t/tools/deps.sh test"
. "$ROOT/t/tools/ports.sh"

if [ "$(id -u)" -eq 0 ]; then
    id -u "$PG_USER_SYS" >/dev/null 2>&1 || useradd --system --user-group \
        --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin "$PG_USER_SYS"
    AS_PG=(runuser -u "$PG_USER_SYS" --)
else
    AS_PG=()
fi

WORK=$(mktemp -d /tmp/lessons-failover.XXXXXX)
chmod 755 "$WORK"
HTTPD_PID=""
HTTPD2_PID=""
cleanup() {
    set +e
    [ -z "$HTTPD2_PID" ] || kill -KILL -- "-$HTTPD2_PID" 2>/dev/null
    if [ -n "$HTTPD_PID" ]; then
        kill -TERM "$HTTPD_PID" 2>/dev/null
        for _ in $(seq 1 50); do kill -0 "$HTTPD_PID" 2>/dev/null || break; sleep 0.1; done
        kill -KILL -- "-$HTTPD_PID" 2>/dev/null
    fi
    for c in primary standby; do
        [ -f "$WORK/$c/postmaster.pid" ] && \
            "${AS_PG[@]}" "$PGBIN/pg_ctl" -D "$WORK/$c" -m immediate -w stop >/dev/null 2>&1
    done
    [ -n "${LESSONS_TEST_KEEP:-}" ] && echo "failover: kept $WORK" >&2 || rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

pg() { "${AS_PG[@]}" "$PGBIN/$@"; }
psql_at() {     # psql_at PORT SQL: one value
    pg psql -X -q -At -h 127.0.0.1 -p "$1" -U postgres -d lessons -v ON_ERROR_STOP=1 -c "$2"
}
start_pg() {    # start_pg NAME PORT
    pg pg_ctl -D "$WORK/$1" -l "$WORK/$1.log" -w -t 60 \
        -o "-c listen_addresses=127.0.0.1 -p $2 -c unix_socket_directories=$WORK" \
        start >/dev/null
}

# --- the primary, the database, the standby --------------------------------
[ "$(id -u)" -ne 0 ] || chown "$PG_USER_SYS:" "$WORK"
pg initdb -D "$WORK/primary" -U postgres -A trust -E UTF8 --no-locale \
    >"$WORK/initdb.log" 2>&1 || { cat "$WORK/initdb.log" >&2; die "initdb failed"; }
P1=$(pick_port); P2=$(pick_port "$P1")
start_pg primary "$P1"
pg psql -X -q -h 127.0.0.1 -p "$P1" -U postgres -d postgres \
    -c "CREATE ROLE app LOGIN" -c "CREATE DATABASE lessons OWNER app" >/dev/null
# Read by this shell, not by psql as the PostgreSQL user: the tree may
# sit where only its owner can read (a clone in a mktemp -d directory).
for f in schema.pgsql.sql sample-lessons.sql; do
    PGOPTIONS="-c client_min_messages=warning" pg psql -X -q -h 127.0.0.1 -p "$P1" \
        -U app -d lessons -v ON_ERROR_STOP=1 -f - <"$ROOT/sql/$f" >/dev/null
done
pg pg_basebackup -h 127.0.0.1 -p "$P1" -U postgres -D "$WORK/standby" -R -X stream -c fast \
    >/dev/null 2>&1 || die "pg_basebackup failed"
start_pg standby "$P2"
ID=$(psql_at "$P1" "SELECT min(id) FROM lessons")

# --- httpd ---------------------------------------------------------------
KEY="$WORK/hs256.key"
openssl rand -hex 32 | tr -d '\n' >"$KEY"
TOKEN=$("$ROOT/t/tools/token" --key "$KEY" --alg HS256 --sub failover --ttl 3600)
PORT=$(pick_port)
mkdir -p "$WORK/logs" "$WORK/run"
[ "$(id -u)" -ne 0 ] || chown -R www-data: "$WORK/logs" "$WORK/run"
cat >"$WORK/httpd.conf" <<EOF
ServerName 127.0.0.1
Listen 127.0.0.1:$PORT
PidFile $WORK/run/httpd.pid
DefaultRuntimeDir $WORK/run
User www-data
Group www-data
LoadModule mpm_event_module  $HTTPD_MODULES/mod_mpm_event.so
LoadModule authz_core_module $HTTPD_MODULES/mod_authz_core.so
LoadModule dbd_module        $HTTPD_MODULES/mod_dbd.so
LoadModule lessons_module    $MODULE
ErrorLog $WORK/logs/error.log
LogLevel warn
DBDriver pgsql
DBDParams "host=127.0.0.1,127.0.0.1 port=$P1,$P2 dbname=lessons user=app target_session_attrs=read-write connect_timeout=2"
# One process, so that the requests after the failover meet the
# connections it opened on the primary (DBDMin) for certain.
StartServers 1
ServerLimit 1
ThreadsPerChild 16
MaxRequestWorkers 16
MinSpareThreads 1
MaxSpareThreads 16
DBDMin 4
DBDKeep 4
DBDMax 8
LessonsDBTimeout 5
<Location "/api/lessons">
    SetHandler lessons
    LessonsJWTKey HS256 $KEY
</Location>
EOF
setsid "$HTTPD" -DFOREGROUND -d "$WORK" -f "$WORK/httpd.conf" </dev/null >>"$WORK/httpd.out" 2>&1 &
HTTPD_PID=$!
URL="http://127.0.0.1:$PORT/api/lessons"
# api METHOD PATH [curl args]: "status etag" and the body in $WORK/body
api() {
    local m=$1 p=$2; shift 2
    rm -f "$WORK/body" "$WORK/head"    # no answer: no status from before
    curl -s -o "$WORK/body" -D "$WORK/head" -X "$m" -H "Authorization: Bearer $TOKEN" \
        --max-time 20 "$@" "$URL$p" >/dev/null || true
    local st etag
    st=$(awk 'NR == 1 { print $2 }' "$WORK/head" 2>/dev/null)
    etag=$(tr -d '\r' <"$WORK/head" | awk 'tolower($1) == "etag:" { print $2 }')
    echo "${st:-000} ${etag:--}"
}
for _ in $(seq 1 100); do
    [ "$(api GET "" | cut -d' ' -f1)" = 200 ] && break
    kill -0 "$HTTPD_PID" 2>/dev/null || { cat "$WORK/httpd.out" >&2; die "httpd did not start"; }
    sleep 0.2
done

passed=0 failed=0
check() {       # check NAME COND...
    local name=$1; shift
    if "$@"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "    not ok: $name" >&2; fi
}
body_has() { grep -q "$1" "$WORK/body"; }

# --- before: a lesson and the list cached on the primary's history ---------
read -r st e0 <<<"$(api GET "/$ID")"
check "GET the lesson before: 200" [ "$st" = 200 ]
# The standby stops (it will miss what follows), then the primary commits.
pg pg_ctl -D "$WORK/standby" -m fast -w stop >/dev/null
read -r st e1 <<<"$(api PUT "/$ID" -H "If-Match: $e0" -H 'Content-Type: application/json' \
    --data '{"title":"Auf dem Primärserver"}')"
check "PUT on the primary: 200" [ "$st" = 200 ]
read -r st e1g <<<"$(api GET "/$ID")"
check "GET after the PUT: the primary's title, tag $e1" \
    eval '[ "$st" = 200 ] && [ "$e1g" = "$e1" ] && body_has "Auf dem Primärserver"'
read -r st list1 <<<"$(api GET "")"
check "GET the list on the primary: 200" [ "$st" = 200 ]

# --- the failover, with clients asking all along ----------------------------
: >"$WORK/during"
(
    while [ ! -f "$WORK/stop" ]; do
        curl -s -o /dev/null -D - -H "Authorization: Bearer $TOKEN" --max-time 20 "$URL" \
            | tr -d '\r' | awk -v t="$(date +%s.%N)" 'NR == 1 { s = $2 }
                tolower($1) == "retry-after:" { r = 1 }
                END { print t, s, (r ? "retry-after" : "-") }' >>"$WORK/during"
        sleep 0.05
    done
) &
LOAD=$!
sleep 1
t0=$(date +%s.%N)
pg pg_ctl -D "$WORK/primary" -m immediate -w stop >/dev/null
start_pg standby "$P2"
pg pg_ctl -D "$WORK/standby" -w -t 60 promote >/dev/null
# The first good write after the promotion: the recovery time.
recovered=""
for _ in $(seq 1 300); do
    read -r st _e <<<"$(api GET "/$ID")"
    if [ "$st" = 200 ]; then recovered=$(date +%s.%N); break; fi
    sleep 0.1
done
sleep 1
touch "$WORK/stop"
wait "$LOAD" || true
check "the module recovered without a restart" [ -n "$recovered" ]
recovery=$(awk -v a="$t0" -v b="${recovered:-$t0}" 'BEGIN { printf "%.1f", b - a }')
others=$(awk '$2 != 200 && !($2 == 503 && $3 == "retry-after")' "$WORK/during" | wc -l)
n503=$(awk '$2 == 503' "$WORK/during" | wc -l)
total=$(wc -l <"$WORK/during")
check "during the failover only 200 or 503 with Retry-After ($others others of $total)" [ "$others" -eq 0 ]

# burst: 64 GETs, 8 at a time: "COUNT STATUS ..." of their answers
burst() {
    seq 1 64 | xargs -P 8 -I{} curl -s -o /dev/null -w '%{http_code}\n' --max-time 20 \
        -H "Authorization: Bearer $TOKEN" "$URL" | sort | uniq -c | xargs echo
}
b=$(burst)
check "after the recovery, 64 requests 8 at a time: all 200 ($b)" [ "$b" = "64 200" ]

# --- after: the promoted server's history ----------------------------------
read -r st e2 <<<"$(api GET "/$ID")"
check "GET on the promoted server: its own lesson, not the primary's lost commit" \
    eval '[ "$st" = 200 ] && ! body_has "Auf dem Primärserver"'
read -r st e3 <<<"$(api PUT "/$ID" -H "If-Match: $e2" -H 'Content-Type: application/json' \
    --data '{"title":"Auf dem Standby"}')"
check "PUT on the promoted server: 200" [ "$st" = 200 ]
check "the same version number, another history: another tag ($e1 / $e3)" [ "$e3" != "$e1" ]
read -r st _e <<<"$(api GET "/$ID")"
check "GET: the promoted server's new title" eval '[ "$st" = 200 ] && body_has "Auf dem Standby"'
read -r st _e <<<"$(api GET "/$ID" -H "If-None-Match: $e1")"
check "If-None-Match with the tag from before: no 304 ($st)" [ "$st" = 200 ]
read -r st _e <<<"$(api GET "" -H "If-None-Match: $list1")"
check "the list's tag from before: no 304 ($st)" [ "$st" = 200 ]
read -r st _e <<<"$(api PUT "/$ID" -H "If-Match: $e1" -H 'Content-Type: application/json' \
    --data '{"title":"Veraltet"}')"
check "If-Match with the tag from before: 412 ($st)" [ "$st" = 412 ]
title=$(psql_at "$P2" "SELECT title FROM lessons WHERE id = $ID")
check "the stored title is the promoted server's ($title)" [ "$title" = "Auf dem Standby" ]

# --- a restart while idle: the pool's connections have all hung up ---------
b=$(burst)
check "before the restart, 64 requests 8 at a time: all 200 ($b)" [ "$b" = "64 200" ]
pg pg_ctl -D "$WORK/standby" -m fast -w -t 60 restart \
    -o "-c listen_addresses=127.0.0.1 -p $P2 -c unix_socket_directories=$WORK" >/dev/null
b=$(burst)
check "after a restart while idle, 64 requests 8 at a time: all 200 ($b)" [ "$b" = "64 200" ]

# --- a server that stops answering without closing anything (issue 58) ----
# The promoted server frozen (SIGSTOP of its postmaster and backends, as
# a paused VM): the pooled connections' statements are never answered and
# never fail.  A GET meets one: it is answered 503 at LessonsDBTimeout (5
# s, and the half second the module adds before it shuts the socket
# down), not when the server resumes 15 s later.  One: more at once would
# also make mod_dbd open new connections, one at a time under its pool's
# lock, each waiting connect_timeout for the frozen host (2 s here),
# which the module cannot bound (docs/directives.md, LessonsDBTimeout).
# timed URL: "STATUS SECONDS" of one GET
timed() {
    curl -s -o /dev/null -w '%{http_code} %{time_total}\n' --max-time 30 \
        -H "Authorization: Bearer $TOKEN" "$1"
}
# pg_pids DIR: the postmaster of the cluster in DIR and its children.
pg_pids() {
    local pm
    pm=$(head -n 1 "$1/postmaster.pid")
    echo "$pm $(pgrep -P "$pm" | xargs echo)"
}
frozen=$(pg_pids "$WORK/standby")
# shellcheck disable=SC2086
kill -STOP $frozen
timed "$URL/$ID" >"$WORK/frozen" 2>&1 &
ask=$!
sleep 15
# shellcheck disable=SC2086
kill -CONT $frozen
wait "$ask" || true
f503=$(awk '$1 == 503' "$WORK/frozen" | wc -l)
fmax=$(awk '{ if ($2 > m) m = $2 } END { printf "%.1f", m }' "$WORK/frozen")
check "a frozen server: the GET is 503 ($(cat "$WORK/frozen"))" [ "$f503" = 1 ]
check "a frozen server: answered within LessonsDBTimeout and a second ($fmax s)" \
    awk -v m="$fmax" 'BEGIN { exit !(m <= 6.5) }'

# --- the fence of read leases (issue 58) ------------------------------------
# A second server with LessonsDBLease on the same database.  With a
# synchronous standby named that does not exist, no commit that asks for
# it is confirmed:
# what a primary deposed while frozen meets once it resumes (its standbys
# follow the new primary).  That server's GETs, whose version read is
# fenced (its commit waits for the standbys), get 503 at LessonsDBTimeout;
# the first server's, unfenced (no leases), 200.  Once the standby is no
# longer required, the fenced reads answer 200 again.
# leased_conf N PORT [SED ARGS]: $WORK/httpdN.conf, the first server's
# with LessonsDBLease 1 and its own port, run directory and error log.
leased_conf() {
    local n=$1 port=$2; shift 2
    mkdir -p "$WORK/run$n"
    [ "$(id -u)" -ne 0 ] || chown -R www-data: "$WORK/run$n"
    sed -e "s|^Listen .*|Listen 127.0.0.1:$port|" -e "s|^PidFile .*|PidFile $WORK/run$n/httpd.pid|" \
        -e "s|^DefaultRuntimeDir .*|DefaultRuntimeDir $WORK/run$n|" \
        -e "s|^ErrorLog .*|ErrorLog $WORK/logs/error$n.log|" \
        -e "s|^LessonsDBTimeout 5|LessonsDBTimeout 5\nLessonsDBLease 1|" \
        "$@" "$WORK/httpd.conf" >"$WORK/httpd$n.conf"
}
# stop_second: the leased server (HTTPD2_PID) stopped, killed if it
# takes over 5 s.
stop_second() {
    kill -TERM "$HTTPD2_PID" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$HTTPD2_PID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL -- "-$HTTPD2_PID" 2>/dev/null || true
    HTTPD2_PID=""
}
PORT2=$(pick_port "$PORT")
leased_conf 2 "$PORT2"
psql_at "$P2" "CREATE TABLE failover_probe (n int)" >/dev/null
psql_at "$P2" "ALTER SYSTEM SET synchronous_standby_names = 'nobody'" >/dev/null
# And commits that wait for no standby unless they ask: the fence's
# statements ask (a lease holder whose connection said off was granted
# leases here under load).
psql_at "$P2" "ALTER SYSTEM SET synchronous_commit = off" >/dev/null
psql_at "$P2" "SELECT pg_reload_conf()" >/dev/null
# The reload is a signal, and commits wait for a synchronous standby only
# once the checkpointer has read it: until then a server started here is
# granted its lease (CI runs saw that, under load).  SHOW in a new session
# proves nothing; a commit seen waiting (wait event SyncRep) does.  The
# probe's commit waits until the reset below.
syncrep() {      # syncrep PORT
    [ "$(psql_at "$1" "SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'SyncRep'")" -gt 0 ]
}
# probe_syncrep PORT: sets PROBE to a commit seen waiting for a standby
# there (it waits until the setting is reset), empty if none does.
probe_syncrep() {
    PROBE=
    for _ in $(seq 1 100); do
        psql_at "$1" "SET synchronous_commit = on; INSERT INTO failover_probe VALUES (1)" \
            >/dev/null 2>&1 &
        PROBE=$!
        sleep 0.2
        syncrep "$1" && return 0
        wait "$PROBE" || true
        PROBE=
    done
}
probe_syncrep "$P2"
probe=$PROBE
check "a commit waits for the standby named that never confirms" [ -n "$probe" ]
setsid "$HTTPD" -DFOREGROUND -d "$WORK" -f "$WORK/httpd2.conf" </dev/null >>"$WORK/httpd2.out" 2>&1 &
HTTPD2_PID=$!
for _ in $(seq 1 100); do port_free "$PORT2" || break; sleep 0.1; done
read -r st2 t2 <<<"$(timed "http://127.0.0.1:$PORT2/api/lessons/$ID")"
read -r st1 _t <<<"$(timed "$URL/$ID")"
check "no standby confirms: the leased server's fenced GET is 503 ($st2 in $t2 s)" \
    eval '[ "$st2" = 503 ] && awk -v t="$t2" "BEGIN { exit !(t <= 6.5) }"'
check "no standby confirms: the unfenced server's GET is 200 ($st1)" [ "$st1" = 200 ]
psql_at "$P2" "ALTER SYSTEM RESET synchronous_standby_names" >/dev/null
psql_at "$P2" "ALTER SYSTEM RESET synchronous_commit" >/dev/null
psql_at "$P2" "SELECT pg_reload_conf()" >/dev/null
[ -z "$probe" ] || wait "$probe" || true
st2=000
for _ in $(seq 1 50); do
    read -r st2 _t <<<"$(timed "http://127.0.0.1:$PORT2/api/lessons/$ID")"
    [ "$st2" = 200 ] && break
    sleep 0.2
done
check "the standby no longer required: the fenced GET is 200 again ($st2)" [ "$st2" = 200 ]
stop_second

# --- a deposed primary resumed, its pooled connections kept (issue 58) -----
# What the history suite's hastop met once (a Patroni primary frozen past
# its TTL, then resumed): a server whose read lease a new primary grants
# while its pool still holds connections to the old one.  The old primary
# (stopped above with a commit the standby never had) is started again,
# on its own history; a third server, with LessonsDBLease, takes its
# lease and pooled connections there.  Then the old primary's commits
# wait for a standby that never confirms (its standbys follow another
# now), it is frozen, the lease moves to the promoted server, and it
# resumes.  The lease's version is the promoted server's; the pooled
# connections' rows are the old primary's.  A GET must not show the old
# primary's lesson under it: 503 (the connection reads its own version,
# behind the fence, which the old primary never answers) or the promoted
# server's lesson.  One process: the holder's renewal on the old primary
# never returns (a commit waiting for standbys outlives statement_timeout),
# and no other process could take the lease over; the module shuts its
# connection down at LessonsDBTimeout and connects again.
start_pg primary "$P1"
PORT3=$(pick_port "$PORT2")
leased_conf 3 "$PORT3" -e "s|^LogLevel warn|LogLevel warn lessons:info|"
setsid "$HTTPD" -DFOREGROUND -d "$WORK" -f "$WORK/httpd3.conf" </dev/null >>"$WORK/httpd3.out" 2>&1 &
HTTPD2_PID=$!
URL3="http://127.0.0.1:$PORT3/api/lessons"
leases_at() { psql_at "$1" "SELECT count(*) FROM lessons_leases" 2>/dev/null || echo 0; }
for _ in $(seq 1 100); do
    [ "$(URL=$URL3 api GET "/$ID" | cut -d' ' -f1)" = 200 ] && [ "$(leases_at "$P1")" -gt 0 ] && break
    sleep 0.2
done
read -r st _e <<<"$(URL=$URL3 api GET "/$ID")"
check "the old primary resumed on its own: the third server reads its lesson ($st)" \
    eval '[ "$st" = 200 ] && body_has "Auf dem Primärserver"'
read -r st _e <<<"$(URL=$URL3 api GET "")"
check "and its list ($st)" eval '[ "$st" = 200 ] && body_has "Auf dem Primärserver"'
check "the third server holds its lease on the old primary" [ "$(leases_at "$P1")" -gt 0 ]
psql_at "$P1" "CREATE TABLE IF NOT EXISTS failover_probe (n int)" >/dev/null
psql_at "$P1" "ALTER SYSTEM SET synchronous_standby_names = 'nobody'" >/dev/null
psql_at "$P1" "SELECT pg_reload_conf()" >/dev/null
probe_syncrep "$P1"
check "the old primary's commits wait for a standby that never confirms" [ -n "$PROBE" ]
deposed=$(pg_pids "$WORK/primary")
# shellcheck disable=SC2086
kill -STOP $deposed
moved=
for _ in $(seq 1 200); do
    [ "$(leases_at "$P2")" -gt 0 ] && { moved=1; break; }
    sleep 0.2
done
check "the third server's lease moved to the promoted server" [ -n "$moved" ]
# Its listener connected and the lease renewed there.
sleep 2
# shellcheck disable=SC2086
kill -CONT $deposed
read -r st3 t3 <<<"$(timed "$URL3/$ID")"
read -r st _e <<<"$(URL=$URL3 api GET "/$ID")"
check "the resumed old primary's lesson is never served under the lease ($st3 in $t3 s, then $st)" \
    eval '[ "$st3" != 200 ] && ! { [ "$st" = 200 ] && body_has "Auf dem Primärserver"; }'
read -r st _e <<<"$(URL=$URL3 api GET "")"
check "nor its list ($st)" eval '! { [ "$st" = 200 ] && body_has "Auf dem Primärserver"; }'
check "the connection that met it said so (LESSONS00315)" grep -q LESSONS00315 "$WORK/logs/error3.log"
stop_second
pg pg_ctl -D "$WORK/primary" -m immediate -w stop >/dev/null 2>&1 || true

echo "failover: recovered in ${recovery} s after the primary stopped; during it $total requests: $((total - n503)) 200, $n503 503 with Retry-After, $others other"
[ -z "${INTEGRATION_COUNTS:-}" ] || echo "$passed $failed" >>"$INTEGRATION_COUNTS"
if [ "$failed" -eq 0 ]; then
    printf "$LINE" PASS failover "$passed" " (recovery ${recovery} s)"
else
    printf "$LINE" FAIL failover "$((passed + failed))" ", $failed failed (error_log: $WORK/logs/error.log with LESSONS_TEST_KEEP=1)"
    exit 1
fi
