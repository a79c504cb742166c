#!/bin/bash
# Run the Apache::Test suite (t/api/*.t) against the built module on one
# database driver, in a throw-away directory that is removed afterwards.
#
#   t/tools/integration.sh sqlite3|pgsql [t/TEST arguments, e.g. t/api/read.t]
#
# Needs build/mod_lessons.so (run `make` first).  Everything the run makes
# (a copy of t/ and sql/, the module, keys, databases, a PostgreSQL cluster,
# Apache::Test's logs) lives in one mktemp -d directory, so the work tree is
# never touched and two runs can go side by side.  Apache::Test refuses to
# run as root, and so does PostgreSQL: as root, the suite and the cluster run
# as the system user "lessons-test", created on first use.
#
# Prints one line for the run (PASS or FAIL, the number of tests); after a
# FAIL, the failing TAP lines with their diagnostics, the harness's summary
# and the end of the error_log.  The whole output of t/TEST goes to
# suite.log in that directory.  With INTEGRATION_COUNTS=FILE the run also
# appends "passed failed skipped" (assertions) to FILE, for make test's
# total.
#
# Set LESSONS_TEST_KEEP=1 to keep the directory for a post-mortem.
#
# LESSONS_SANITIZE=1 runs the suite against build/asan/mod_lessons.so (make
# asan: the module built with AddressSanitizer and UBSan), with httpd
# started with the sanitizers' runtimes preloaded; every report they write
# lands in sanitizer/ in that directory, and a report with a frame of the
# module's own code fails the run.
#
# LESSONS_TEST_LABEL names the run on its result line.
#
# LESSONS_TEST_SHARD=K/N (make test runs two shares of each driver at
# once) runs the K-th of N shares of t/api's files: longest first, each
# dealt to the share with the fewest seconds so far, by the driver's
# column of t/tools/integration-costs; each share runs in the suite's
# own order.
# The suite mostly waits on its servers, so shares side by side finish
# sooner than one after another.  Files the table marks "alone" are in
# no share: LESSONS_TEST_SHARD=alone runs them, after the shares.
set -euo pipefail

DRIVER=${1:-}
case "$DRIVER" in
    sqlite3|pgsql) shift ;;
    *) echo "usage: $0 sqlite3|pgsql [t/TEST args]" >&2; exit 2 ;;
esac

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
SANITIZE=${LESSONS_SANITIZE:-}
if [ -n "$SANITIZE" ]; then
    MODULE="$ROOT/build/asan/mod_lessons.so"
    LABEL="integration $DRIVER asan"
else
    MODULE="$ROOT/build/mod_lessons.so"
    LABEL="integration $DRIVER"
fi
LABEL=${LESSONS_TEST_LABEL:-$LABEL}
HTTPD=${HTTPD:-/usr/sbin/apache2}
APXS=${APXS:-$(command -v apxs 2>/dev/null || echo /usr/bin/apxs)}
HTTPD_MODULES=${HTTPD_MODULES:-/usr/lib/apache2/modules}
PGBIN=${PGBIN:-$( (ls -d /usr/lib/postgresql/*/bin 2>/dev/null || true) | sort -V | tail -n 1)}
TEST_USER=lessons-test

die() { echo "integration: $*" >&2; exit 1; }

# The K-th of N shares of t/api's files (paths from $ROOT).
shard_files() {
    # The cost's column: SQLite's seconds, then PostgreSQL's.
    (cd "$ROOT" && printf '%s\n' t/api/*.t) | awk -v k="$1" \
            -v col="$([ "$DRIVER" = pgsql ] && echo 2 || echo 1)" '
        NR == FNR { if ($0 !~ /^#/ && NF >= 3) { cost[$3] = $col
                                                 alone[$3] = $4 == "alone" }
                    next }
        (k == "alone") == (alone[$0] == 1) {
            print (($0 in cost) ? cost[$0] : 10), $0 }
        ' "$ROOT/t/tools/integration-costs" - \
      | sort -k1,1nr -k2,2 \
      | awk -v k="$1" -v n="$2" '
        k == "alone" { print $2; next }
        { b = 1; for (i = 2; i <= n; i++) if (t[i] < t[b]) b = i
          t[b] += $1; if (b == k) print $2 }' \
      | sort
}
SHARD=${LESSONS_TEST_SHARD:-}
if [ -n "$SHARD" ]; then
    [ $# -eq 0 ] || die "LESSONS_TEST_SHARD and t/TEST arguments: one or the other"
    if [ "$SHARD" = alone ]; then
        set -- alone 1
    elif [[ "$SHARD" =~ ^([1-9][0-9]*)/([1-9][0-9]*)$ ]] \
        && [ "${BASH_REMATCH[1]}" -le "${BASH_REMATCH[2]}" ]; then
        set -- "${BASH_REMATCH[1]}" "${BASH_REMATCH[2]}"
    else
        die "LESSONS_TEST_SHARD=$SHARD: K/N with 1 <= K <= N, or alone"
    fi
    mapfile -t SHARD_FILES < <(shard_files "$1" "$2")
    [ ${#SHARD_FILES[@]} -gt 0 ] || die "LESSONS_TEST_SHARD=$SHARD: no files in that share"
    set -- "${SHARD_FILES[@]}"
    [ -n "${LESSONS_TEST_LABEL:-}" ] || LABEL="$LABEL $SHARD"
fi
[ -f "$MODULE" ] || die "$MODULE not found: run make first"
[ -x "$HTTPD" ] || die "$HTTPD not found: run t/tools/deps.sh"
command -v openssl >/dev/null || die "openssl not found: run t/tools/deps.sh"
if [ "$DRIVER" = sqlite3 ]; then
    command -v sqlite3 >/dev/null || die "sqlite3 not found: run t/tools/deps.sh"
else
    [ -x "$PGBIN/initdb" ] || die "PostgreSQL binaries not found: run t/tools/deps.sh"
fi

# --- who runs the suite -------------------------------------------------
if [ "$(id -u)" -eq 0 ]; then
    # Two runs side by side (make test-all's drivers in a fresh root) may
    # both find no user: the one whose useradd loses ("already exists",
    # or /etc/passwd locked by the other) takes the user the other made.
    for _ in 1 2 3 4 5 6 7 8 9 10; do
        id -u "$TEST_USER" >/dev/null 2>&1 && break
        useradd --system --user-group --no-create-home \
            --home-dir /nonexistent --shell /usr/sbin/nologin "$TEST_USER" \
            2>/dev/null && break
        sleep 0.5
    done
    id -u "$TEST_USER" >/dev/null 2>&1 || die "cannot create the test user $TEST_USER"
    RUN_USER=$TEST_USER
    AS_USER=(runuser -u "$TEST_USER" --)
else
    RUN_USER=$(id -un)
    AS_USER=()
fi
as_user() { "${AS_USER[@]}" "$@"; }

# --- the work directory, removed on any exit ------------------------------
# As root the directory goes to /tmp (LESSONS_TEST_TMPDIR to change it):
# $TMPDIR may be private to root, and the test user must reach it.
if [ "$(id -u)" -eq 0 ]; then
    TMPBASE=${LESSONS_TEST_TMPDIR:-/tmp}
else
    TMPBASE=${LESSONS_TEST_TMPDIR:-${TMPDIR:-/tmp}}
fi
WORK=$(mktemp -d "$TMPBASE/lessons-it.XXXXXX")
PG_STARTED=""
SUITE_PID=""
SMALLFS=""
FIXER_PID=""
cleanup() {
    rc=$?
    trap - EXIT INT TERM
    # Interrupted: stop the suite, i.e. its whole process group (t/TEST
    # re-runs itself under sh -c, so its parent alone is not enough).
    if [ -n "$SUITE_PID" ]; then
        kill -TERM -- "-$SUITE_PID" 2>/dev/null || true
        wait "$SUITE_PID" 2>/dev/null || true
    fi
    # Apache::Test stops its httpd, unless it was interrupted.
    pidfile="$WORK/src/t/logs/httpd.pid"
    if [ -s "$pidfile" ]; then
        httpd_pid=$(cat "$pidfile")
        kill -TERM "$httpd_pid" 2>/dev/null || true
        for _ in $(seq 1 50); do
            kill -0 "$httpd_pid" 2>/dev/null || break
            sleep 0.2
        done
    fi
    [ -z "$FIXER_PID" ] || kill "$FIXER_PID" 2>/dev/null || true
    if [ -n "$PG_STARTED" ]; then
        as_user "$PGBIN/pg_ctl" -D "$WORK/pg/data" -m immediate -w stop \
            >/dev/null 2>&1 || true
    fi
    if [ -n "$SMALLFS" ]; then
        umount "$SMALLFS" 2>/dev/null || umount -l "$SMALLFS" 2>/dev/null || true
    fi
    if [ -n "${LESSONS_TEST_KEEP:-}" ]; then
        echo "integration: kept $WORK"
    else
        rm -rf "$WORK"
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

mkdir -p "$WORK/src/build" "$WORK/keys" "$WORK/db"
# Only the sources: no logs or generated config of an earlier in-tree run.
# The Prometheus rules and Grafana dashboard, for t/api/metrics.t.
tar -C "$ROOT" -cf - \
    --exclude=t/logs --exclude=t/unit --exclude=t/htdocs \
    --exclude=t/conf/httpd.conf --exclude=t/conf/extra.conf \
    --exclude=t/conf/apache_test_config.pm \
    --exclude=t/conf/modperl_inc.pl --exclude=t/conf/modperl_startup.pl \
    t sql conf/openapi.yaml conf/prometheus conf/grafana | tar -C "$WORK/src" -xf -
cp "$MODULE" "$WORK/src/build/mod_lessons.so"
# The package's token tool (make builds it), for t/api/token_tool.t.
if [ -x "$ROOT/build/lessons-token" ]; then
    cp "$ROOT/build/lessons-token" "$WORK/src/build/lessons-token"
fi

# --- sanitizers: httpd through a wrapper that preloads their runtimes ---
if [ -n "$SANITIZE" ]; then
    ASAN_LIB=$(gcc -print-file-name=libasan.so)
    UBSAN_LIB=$(gcc -print-file-name=libubsan.so)
    [ -f "$ASAN_LIB" ] && [ -f "$UBSAN_LIB" ] \
        || die "the sanitizers' runtimes (libasan, libubsan) not found: install gcc"
    mkdir -p "$WORK/sanitizer"
    # use_sigaltstack=0: gcc 12's ASan reports a stack-buffer-overflow in
    # its own sigaltstack interceptor as each thread ends
    # (AsanThread::Destroy) and the process then dies of SIGSEGV.  Every
    # child that ended wrote and symbolized such a report: after a
    # graceful restart, prefork's 64 ending children held every slot for
    # 80-95 s doing so (soak.t's stall), and restart storms lost children
    # to the crash.  The module's own code is checked as before.
    # allow_addr2line=1: a root without llvm-symbolizer (the other
    # release's, make test-release) still names the sources; a frame it
    # cannot name is counted by the module's file (below).
    cat >"$WORK/apache2-asan" <<WRAP
#!/bin/sh
# httpd with AddressSanitizer and UBSan loaded first (the module needs
# them; httpd itself is not instrumented).  Leaks are not checked: httpd
# leaves its pools to the process's end.
ASAN_OPTIONS=detect_leaks=0:use_sigaltstack=0:allow_addr2line=1:log_path=$WORK/sanitizer/asan:abort_on_error=0:handle_abort=1 \\
UBSAN_OPTIONS=print_stacktrace=1:allow_addr2line=1:log_path=$WORK/sanitizer/ubsan \\
LD_PRELOAD="$ASAN_LIB $UBSAN_LIB" exec $HTTPD "\$@"
WRAP
    chmod 755 "$WORK/apache2-asan"
    HTTPD=$WORK/apache2-asan
fi
# The test identity provider (t/idp/idp.js) with the modules make idp-deps
# installed, copied next to it: the test user may not reach the checkout.
# Tests find it in LESSONS_TEST_IDP (empty without make idp-deps).
IDP_DIR=""
if [ -d "$ROOT/build/idp/node_modules" ] && [ -f "$WORK/src/t/idp/idp.js" ]; then
    cp -R "$ROOT/build/idp/node_modules" "$WORK/src/t/idp/node_modules"
    IDP_DIR=$WORK/src/t/idp
fi
# The same for the OpenID Certified provider and client (t/oidcp, make
# oidcp-deps): LESSONS_TEST_OIDCP, empty without them.
OIDCP_DIR=""
if [ -d "$ROOT/build/oidcp/node_modules" ] && [ -f "$WORK/src/t/oidcp/provider.mjs" ]; then
    cp -R "$ROOT/build/oidcp/node_modules" "$WORK/src/t/oidcp/node_modules"
    OIDCP_DIR=$WORK/src/t/oidcp
fi
# promtool (make promtool-deps), for t/api/metrics.t, where the test
# user can run it (empty without it: the test says so and skips that).
PROMTOOL=""
if [ -x "$ROOT/build/promtool/usr/bin/promtool" ]; then
    cp "$ROOT/build/promtool/usr/bin/promtool" "$WORK/promtool"
    PROMTOOL=$WORK/promtool
fi
# The OpenAPI validator (make openapi-deps), where t/api/openapi.t looks.
if [ -d "$ROOT/build/openapi/node_modules" ]; then
    mkdir -p "$WORK/src/build/openapi" && cp -a "$ROOT/build/openapi/node_modules" "$WORK/src/build/openapi/"
fi

# --- key material -------------------------------------------------------
K=$WORK/keys
openssl rand -hex 32 | tr -d '\n' > "$K/hs256.key"
openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 \
    -out "$K/rsa.key" 2>/dev/null
openssl pkey -in "$K/rsa.key" -pubout -out "$K/rsa.pub"
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 \
    -out "$K/ec.key" 2>/dev/null
openssl pkey -in "$K/ec.key" -pubout -out "$K/ec.pub"

# --- free TCP ports -----------------------------------------------------
. "$ROOT/t/tools/ports.sh"

# httpd's ports: a random base with room for the vhosts after it (several
# runs at once would all pick Apache::Test's default 8529 otherwise),
# reserved as pick_port's are.
HTTPD_PORT=$(pick_ports 6) || die "no free TCP ports for httpd"

# --- databases ----------------------------------------------------------
# A lesson in each level group the reads touch: PostgreSQL skips the
# faulting levels view when the join's other side is empty, which would
# make a read "succeed" without ever meeting the fault.
FAULT_SQL_SEED="INSERT INTO lessons (level_id, title, sort_order, topic, description)
    VALUES (1, 'Fault seed one', 1, 'seed', 'first'),
           (2, 'Fault seed two', 2, 'seed', 'second'),
           (4, 'Fault seed four', 1, 'seed', 'fourth'),
           (5, 'Fault seed five', 1, 'seed', 'fifth');"

if [ "$DRIVER" = sqlite3 ]; then
    DB=$WORK/db/lessons.db
    FAULT_DB=$WORK/db/fault.db
    READFAULT_DB=$WORK/db/readfault.db
    for db in "$DB" "$FAULT_DB"; do
        # Twice: the schema must be idempotent.
        sqlite3 -bail "$db" < "$ROOT/sql/schema.sqlite.sql" >/dev/null
        sqlite3 -bail "$db" < "$ROOT/sql/schema.sqlite.sql" >/dev/null
    done
    sqlite3 -bail "$FAULT_DB" >/dev/null <<EOF
$FAULT_SQL_SEED
CREATE TRIGGER simulated_fault_insert BEFORE INSERT ON lessons
WHEN NEW.title NOT LIKE 'Passes the fault %'
BEGIN SELECT RAISE(ABORT, 'simulated fault'); END;
CREATE TRIGGER simulated_fault_update BEFORE UPDATE ON lessons
BEGIN SELECT RAISE(ABORT, 'simulated fault'); END;
CREATE TRIGGER simulated_fault_delete BEFORE DELETE ON lessons
BEGIN SELECT RAISE(ABORT, 'simulated fault'); END;
EOF
    # Reads fail when run (not when prepared): levels becomes a view whose
    # filter overflows.
    sqlite3 -bail "$READFAULT_DB" < "$ROOT/sql/schema.sqlite.sql" >/dev/null
    sqlite3 -bail "$READFAULT_DB" >/dev/null <<EOF
$FAULT_SQL_SEED
ALTER TABLE levels RENAME TO levels_real;
CREATE VIEW levels AS SELECT id, code, name FROM levels_real
    WHERE abs(-9223372036854775807 - 1) > 0;
EOF
    # SQLite faults an admin meets: a read-only file, a read-only
    # directory (no journal can be made), a full disk (max_page_count at
    # the file's size), a file replaced while the server runs, a file that
    # is missing (the URI form never creates one), a file without schema.
    for f in rofile rodir/lessons full moved; do
        mkdir -p "$(dirname "$WORK/db/$f.db")"
        sqlite3 -bail "$WORK/db/$f.db" < "$ROOT/sql/schema.sqlite.sql" >/dev/null
        sqlite3 -bail "$WORK/db/$f.db" "$FAULT_SQL_SEED" >/dev/null
    done
    sqlite3 -bail "$WORK/db/rodir/lessons.db" "PRAGMA journal_mode = DELETE" >/dev/null
    sqlite3 -bail "$WORK/db/noschema.db" "VACUUM" >/dev/null
    FULL_PAGES=$(sqlite3 "$WORK/db/full.db" "VACUUM; PRAGMA page_count")
    ROFILE_DBPARAMS=$WORK/db/rofile.db
    RODIR_DBPARAMS=$WORK/db/rodir/lessons.db
    FULL_DBPARAMS=$WORK/db/full.db
    FULL_INITSQL="PRAGMA max_page_count = $FULL_PAGES"
    MOVED_DBPARAMS=$WORK/db/moved.db
    MISSING_DBPARAMS="file:$WORK/db/missing.db?mode=rw"
    NOSCHEMA_DBPARAMS=$WORK/db/noschema.db
    DBPARAMS=$DB
    FAULT_DBPARAMS=$FAULT_DB
    READFAULT_DBPARAMS=$READFAULT_DB
    DOWN_DBPARAMS=$WORK/no-such-dir/lessons.db
    # Not PRAGMA foreign_keys: it expires mod_dbd's prepared statements
    # (see sql/schema.sqlite.sql); triggers there enforce the reference.
    INITSQL="PRAGMA busy_timeout = 5000"
    PG_ENV=()
else
    DB=lessons
    FAULT_DB=lessons_fault
    READFAULT_DB=lessons_readfault
fi

if [ "$(id -u)" -eq 0 ]; then
    chown -R "$RUN_USER:" "$WORK"
    as_user test -w "$WORK" \
        || die "$RUN_USER cannot reach $WORK (set LESSONS_TEST_TMPDIR)"
fi
if [ "$DRIVER" = sqlite3 ]; then
    # As an admin's file often is: root's, which the server's user reads
    # and cannot write, in a directory it can write, so SQLite makes the
    # -wal and -shm files its own with the file's mode.
    # t/api/dbfaults.t has it given to that user under load, by writing
    # a line to fix-rofile, which root reads here.  (A 0444 file would
    # not do: its -shm, made 0444, stays read-only to every process
    # that opens it later, fixed or not, until all its connections end.)
    # Without root, the mode alone, and that test is skipped.
    if [ "$(id -u)" -eq 0 ]; then
        chown root: "$WORK/db/rofile.db"
        mkfifo -m 0600 "$WORK/fix-rofile"
        chown "$RUN_USER:" "$WORK/fix-rofile"
        ( read -r _ <"$WORK/fix-rofile" && chown "$RUN_USER:" "$WORK/db/rofile.db" ) &
        FIXER_PID=$!
    else
        chmod 0444 "$WORK/db/rofile.db"
    fi
    chmod 0555 "$WORK/db/rodir"
fi

if [ "$DRIVER" = pgsql ]; then
    mkdir -p "$WORK/pg"
    [ "$(id -u)" -eq 0 ] && chown "$RUN_USER:" "$WORK/pg"
    as_user "$PGBIN/initdb" -D "$WORK/pg/data" -U lessons -A trust \
        -E UTF8 --no-locale --no-sync >"$WORK/pg/initdb.log" 2>&1 \
        || { cat "$WORK/pg/initdb.log" >&2; die "initdb failed"; }
    started=""
    for attempt in 1 2 3 4 5; do
        PGPORT=$(pick_port)
        if as_user "$PGBIN/pg_ctl" -D "$WORK/pg/data" -l "$WORK/pg/server.log" \
            -w -t 60 -o "-c listen_addresses=127.0.0.1 -p $PGPORT \
                -c unix_socket_directories=$WORK/pg -c fsync=off \
                -c synchronous_commit=off -c full_page_writes=off" \
            start >/dev/null 2>&1; then
            started=1
            break
        fi
    done
    [ -n "$started" ] || { tail -n 20 "$WORK/pg/server.log" >&2 || true;
                           die "PostgreSQL did not start"; }
    PG_STARTED=1
    export PGHOST=127.0.0.1 PGPORT PGUSER=lessons
    psql_run() { as_user env PGHOST=$PGHOST PGPORT=$PGPORT PGUSER=$PGUSER \
        PGOPTIONS="-c client_min_messages=warning" \
        "$PGBIN/psql" -X -q -v ON_ERROR_STOP=1 "$@"; }
    for db in "$DB" "$FAULT_DB"; do
        as_user env PGHOST=$PGHOST PGPORT=$PGPORT PGUSER=$PGUSER \
            "$PGBIN/createdb" "$db"
        psql_run -d "$db" -f "$WORK/src/sql/schema.pgsql.sql" >/dev/null
        psql_run -d "$db" -f "$WORK/src/sql/schema.pgsql.sql" >/dev/null
    done
    psql_run -d "$FAULT_DB" >/dev/null <<EOF
$FAULT_SQL_SEED
CREATE FUNCTION simulated_fault() RETURNS trigger LANGUAGE plpgsql AS
\$\$ BEGIN
    IF TG_OP = 'INSERT' AND NEW.title LIKE 'Passes the fault %' THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'simulated fault';
END \$\$;
CREATE TRIGGER simulated_fault BEFORE INSERT OR UPDATE OR DELETE ON lessons
    FOR EACH ROW EXECUTE FUNCTION simulated_fault();
EOF
    # Reads fail when run: levels becomes a view whose filter raises.
    as_user env PGHOST=$PGHOST PGPORT=$PGPORT PGUSER=$PGUSER \
        "$PGBIN/createdb" "$READFAULT_DB"
    psql_run -d "$READFAULT_DB" -f "$WORK/src/sql/schema.pgsql.sql" >/dev/null
    psql_run -d "$READFAULT_DB" >/dev/null <<EOF
$FAULT_SQL_SEED
ALTER TABLE levels RENAME TO levels_real;
CREATE FUNCTION simulated_read_fault() RETURNS boolean LANGUAGE plpgsql AS
\$\$ BEGIN RAISE EXCEPTION 'simulated read fault'; END \$\$;
CREATE VIEW levels AS SELECT id, code, name FROM levels_real
    WHERE simulated_read_fault();
EOF
    DOWN_PORT=$(pick_port "$PGPORT")
    pgparams() { echo "host=127.0.0.1 port=$1 dbname=$2 user=lessons connect_timeout=5"; }
    DBPARAMS=$(pgparams "$PGPORT" "$DB")
    FAULT_DBPARAMS=$(pgparams "$PGPORT" "$FAULT_DB")
    READFAULT_DBPARAMS=$(pgparams "$PGPORT" "$READFAULT_DB")
    DOWN_DBPARAMS=$(pgparams "$DOWN_PORT" "$DB")
    # A database without the schema; the SQLite-only fault hosts point
    # at the main database (their tests are skipped on PostgreSQL).
    as_user env PGHOST=$PGHOST PGPORT=$PGPORT PGUSER=$PGUSER \
        "$PGBIN/createdb" lessons_noschema
    NOSCHEMA_DBPARAMS=$(pgparams "$PGPORT" lessons_noschema)
    ROFILE_DBPARAMS=$DBPARAMS
    RODIR_DBPARAMS=$DBPARAMS
    FULL_DBPARAMS=$DBPARAMS
    FULL_INITSQL="SET TIME ZONE 'UTC'"
    MOVED_DBPARAMS=$DBPARAMS
    MISSING_DBPARAMS=$DBPARAMS
    # DBDInitSQL needs something harmless on PostgreSQL.
    INITSQL="SET TIME ZONE 'UTC'"
    PG_ENV=(PGHOST=$PGHOST PGPORT=$PGPORT PGUSER=$PGUSER PGCONNECT_TIMEOUT=5
            LESSONS_TEST_PSQL="$PGBIN/psql"
            LESSONS_TEST_PG_CTL="$PGBIN/pg_ctl"
            LESSONS_TEST_PGDATA="$WORK/pg/data")
fi

# --- Apache::Test's base config (Debian has no httpd.conf) ---------------
cat > "$WORK/base.conf" <<EOF
LoadModule mpm_event_module  $HTTPD_MODULES/mod_mpm_event.so
LoadModule authz_core_module $HTTPD_MODULES/mod_authz_core.so
LoadModule authn_core_module $HTTPD_MODULES/mod_authn_core.so
LoadModule mime_module       $HTTPD_MODULES/mod_mime.so
LoadModule dbd_module        $HTTPD_MODULES/mod_dbd.so
TypesConfig /etc/mime.types
EOF
[ "$(id -u)" -eq 0 ] && chown "$RUN_USER:" "$WORK/base.conf"

# --- run ----------------------------------------------------------------
# In the background, so that a signal to this script is handled at once
# (bash runs traps only between foreground commands), and in a session of
# its own, so that cleanup can stop all of it.
cd "$WORK/src"
# A small file system the soak (t/api/soak.t) can fill, to see a disk
# really full; only root can mount one (the soak skips that fault else).
if [ "$(id -u)" -eq 0 ] && mkdir -p "$WORK/smallfs" \
    && mount -t tmpfs -o "size=32m,mode=0700,uid=$(id -u "$RUN_USER")" \
        tmpfs "$WORK/smallfs" 2>/dev/null; then
    SMALLFS=$WORK/smallfs
fi
setsid "${AS_USER[@]}" env \
    HOME="$WORK" \
    PATH="$PATH" \
    LANG=C.UTF-8 \
    APACHE_TEST_NO_STICKY_PREFERENCES=1 \
    APACHE_TEST_COLOR=0 \
    HARNESS_VERBOSE=1 \
    LESSONS_TEST_DRIVER="$DRIVER" \
    LESSONS_TEST_DB="$DB" \
    LESSONS_TEST_FAULT_DB="$FAULT_DB" \
    LESSONS_TEST_DBPARAMS="$DBPARAMS" \
    LESSONS_TEST_FAULT_DBPARAMS="$FAULT_DBPARAMS" \
    LESSONS_TEST_READFAULT_DB="$READFAULT_DB" \
    LESSONS_TEST_READFAULT_DBPARAMS="$READFAULT_DBPARAMS" \
    LESSONS_TEST_DOWN_DBPARAMS="$DOWN_DBPARAMS" \
    LESSONS_TEST_NOSCHEMA_DBPARAMS="$NOSCHEMA_DBPARAMS" \
    LESSONS_TEST_ROFILE_DBPARAMS="$ROFILE_DBPARAMS" \
    LESSONS_TEST_RODIR_DBPARAMS="$RODIR_DBPARAMS" \
    LESSONS_TEST_FULL_DBPARAMS="$FULL_DBPARAMS" \
    LESSONS_TEST_FULL_INITSQL="$FULL_INITSQL" \
    LESSONS_TEST_MOVED_DBPARAMS="$MOVED_DBPARAMS" \
    LESSONS_TEST_MISSING_DBPARAMS="$MISSING_DBPARAMS" \
    LESSONS_TEST_WORK="$WORK" \
    LESSONS_TEST_SMALLFS="$SMALLFS" \
    LESSONS_TEST_SANITIZE="$SANITIZE" \
    LESSONS_TEST_IDP="$IDP_DIR" \
    LESSONS_TEST_OIDCP="$OIDCP_DIR" \
    LESSONS_TEST_PROMTOOL="$PROMTOOL" \
    LESSONS_TEST_INITSQL="$INITSQL" \
    LESSONS_TEST_KEY_DIR="$K" \
    LESSONS_TEST_HS_KEY="$K/hs256.key" \
    LESSONS_TEST_RSA_KEY="$K/rsa.key" \
    LESSONS_TEST_RSA_PUB="$K/rsa.pub" \
    LESSONS_TEST_EC_KEY="$K/ec.key" \
    LESSONS_TEST_EC_PUB="$K/ec.pub" \
    LESSONS_TEST_MODULE="$WORK/src/build/mod_lessons.so" \
    LESSONS_TEST_HTTPD="$HTTPD" \
    LESSONS_TEST_HTTPD_MODULES="$HTTPD_MODULES" \
    "${PG_ENV[@]}" \
    perl t/TEST -apxs "$APXS" -httpd "$HTTPD" -httpd_conf "$WORK/base.conf" \
        -port "$HTTPD_PORT" "$@" </dev/null >"$WORK/suite.log" 2>&1 &
SUITE_PID=$!
rc=0
wait "$SUITE_PID" || rc=$?
SUITE_PID=""

# --- result -------------------------------------------------------------
# suite.log holds the harness's verbose output: a "t/api/x.t .. " line
# for each file, then its TAP, then its status line ("ok", or "Failed
# N/M subtests"), and at the end the summary ("Files=N, Tests=N, ...",
# and on failure "Test Summary Report").  Tests counts the assertions
# that ran; each failed one counts, and so does a file that failed with
# none failed (a bad plan, a die).
LOG=$WORK/suite.log
read -r ran files tests failed_asserts failed < <(perl -ne '
    sub done_file { $failed += $f || ($bad ? 1 : 0) if defined $f; undef $f }
    if (/^Files=(\d+), Tests=(\d+),/) { done_file(); ($ran, $files, $tests) = (1, $1, $2) }
    elsif (/^\S+\.t\s+\(Wstat: (\d+).* Tests: \d+ Failed: (\d+)\)/) {
        done_file(); ($f, $bad) = ($2, $1 != 0); $fa += $2 }
    elsif (defined $f && /^\s+(Parse errors|Non-zero (exit|wait) status)/) { $bad = 1 }
    END { done_file(); printf "%d %d %d %d %d\n", $ran, $files, $tests, $fa, $failed }
    ' "$LOG") || true
passed=$((${tests:-0} - ${failed_asserts:-0}))
# Assertions skipped with a reason ("ok N # skip ..."): those this
# machine's release cannot run, among others; counted, not passed.
skipped=$(grep -ciE '^[[:space:]]*ok [0-9]+ # skip' "$LOG" || true)
SKIP_NOTE=""
[ "${skipped:-0}" -eq 0 ] || SKIP_NOTE=", $skipped skipped"
[ "${ran:-0}" -eq 1 ] || failed=1
[ $rc -ne 0 ] && [ "$failed" -eq 0 ] && failed=1
# Sanitizer reports: one file per process that wrote any.  A report
# with a frame in the module's code (its sources are modules/FOLDER/ and
# mod_lessons.c, or build/asan/mod_lessons.so+OFFSET where no symbolizer
# named it) counts against the run; others (httpd, APR, a library)
# are shown but are not the module's.
SAN_NOTE=""
if [ -n "$SANITIZE" ]; then
    reports=0 ours=0
    for f in "$WORK"/sanitizer/*; do
        [ -f "$f" ] || continue
        n=$(grep -cE '^(==[0-9]+==ERROR: |.*runtime error: )' "$f" || true)
        reports=$((reports + n))
        if grep -qE 'modules/([a-z]+/)?(lessons|mod_lessons)_[a-z0-9_]+\.c|mod_lessons\.c|/mod_lessons\.so\+0x' "$f"; then
            ours=$((ours + n))
        fi
    done
    SAN_NOTE=", sanitizers: $reports report(s), $ours in module code"
    if [ "$ours" -gt 0 ]; then
        failed=$((failed + 1))
        SAN_FAIL=1
    fi
fi

if [ -n "${INTEGRATION_COUNTS:-}" ]; then
    echo "$((passed - skipped)) $failed $skipped" >> "$INTEGRATION_COUNTS"
fi

if [ "$failed" -eq 0 ]; then
    printf '%-4s  %-24s %5d tests%s\n' PASS "$LABEL" "$tests" \
        " ($files file$([ "$files" -eq 1 ] || echo s), ${SECONDS} s$SKIP_NOTE$SAN_NOTE)"
    exit 0
fi
if [ -n "${SAN_FAIL:-}" ]; then
    echo "    sanitizer reports in module code (files in $WORK/sanitizer):"
    grep -hE '^(==[0-9]+==ERROR: |.*runtime error: |    #[0-9]+ )' "$WORK"/sanitizer/* \
        | head -n 60 | sed 's/^/      /'
fi

if [ "${ran:-0}" -eq 1 ]; then
    printf '%-4s  %-24s %5d tests%s\n' FAIL "$LABEL" $((passed + failed)) \
        ", $failed failed (exit $rc; ${SECONDS} s$SAN_NOTE)"
else
    printf '%-4s  %-24s %5d tests%s\n' FAIL "$LABEL" 0 \
        ": the suite did not run (exit $rc; ${SECONDS} s)"
fi
# For each failing file, its "not ok" lines, then what else it printed
# but "ok" lines: the diagnostics (a test's stderr reaches the log before
# the TAP the harness relays, so the two do not interleave; what came
# after the previous file's status line, or for the first file its "# "
# lines before it, counts as this file's).  Then the
# harness's summary.  Without any file run, the end of the output.
perl -ne '
    BEGIN { $max = 40; $n = 0 }
    chomp;
    sub upto { my @l = @_; return @l <= $max ? @l
        : (@l[0 .. $max - 1], "... (" . (@l - $max) . " more lines in suite.log)") }
    sub done_file {
        return unless defined $file;
        my @notok = grep { /^not ok\b/ && !/# TODO/ } @lines;
        my @other = grep { !/^(not )?ok\b/ && !/^# Using Apache\/Test\.pm/
                           && !/^1\.\.\d+$/ && !/^\s*$/ } @lines;
        if (@notok || grep { /^(Dubious,|Failed \d+\/\d+ subtests|# Looks like)/ } @lines) {
            print "    $file:\n";
            print "      $_\n" for upto(@notok), upto(@other);
        }
        undef $file;
    }
    if ($summary) { print "    $_\n"; next }
    if (/^Test Summary Report/) { done_file(); $summary = 1; print "    $_\n"; next }
    if (/^(All tests successful|Files=\d+, Tests=)/) { done_file(); $end = 1; next }
    if (/^(\S+\.t) \.+ ?(.*)$/) {
        done_file(); ($file, @lines) = ($1, @carry); @carry = (); $status = 0;
        push @lines, $2 if length $2; $n++; next;
    }
    if (!defined $file) {
        # The first file'"'"'s diagnostics come before its name line.
        push @carry, $_ if /^# / && !$end;
        push @pre, $_ unless $end;
        next;
    }
    if ($status) { push @carry, $_; next }
    push @lines, $_;
    $status = 1 if /^(ok\s*$|Failed \d+\/\d+ subtests|All \d+ subtests passed)/;
    END {
        done_file();
        if (!$n) { print "    $_\n" for @pre > 30 ? @pre[-30 .. -1] : @pre }
    }
    ' "$LOG"
echo "    last errors and warnings in t/logs/error_log:"
if [ -f "$WORK/src/t/logs/error_log" ]; then
    grep -aE ':(emerg|alert|crit|error|warn|notice)\]' \
        "$WORK/src/t/logs/error_log" | tail -n 40 | sed 's/^/      /' || true
else
    echo "      (no error_log)"
fi
if [ "$DRIVER" = pgsql ]; then
    echo "    tail of the PostgreSQL log:"
    tail -n 20 "$WORK/pg/server.log" 2>/dev/null | sed 's/^/      /' || true
fi
echo "    t/TEST's whole output: $LOG (removed unless LESSONS_TEST_KEEP=1)"
exit 1
