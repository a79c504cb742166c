#!/bin/bash
# The Debian package, end to end, on this machine's own apache2:
#   build libapache2-mod-lessons (dpkg-buildpackage -us -uc -b, out of tree)
#   and check it with lintian (errors fail); install it with apt-get;
#   a2enmod lessons (mod_dbd comes too) and configtest, with the running
#   server still answering as before; a2enconf lessons-api: configtest
#   names the missing key, then the missing database; make both as
#   docs/operations.md says; configtest passes; the system Apache serves
#   the API on a free loopback port (curl with a token: 401, 201 +
#   Location, 200, list, 204, 404, and the health handler); an upgrade
#   (the same package repacked one version up) reloads the running
#   Apache, which then runs the new mod_lessons.so, and leaves a stopped one stopped; apt-get
#   remove leaves the conffiles, the admin's key and database; apt-get
#   purge removes the rest and still leaves the key and database.  Then the test removes
#   what it made and checks that the system Apache is as it found it:
#   running or stopped, the same modules, confs and sites enabled.
#
#   t/package/package-test.sh          (as root, or through sudo)
#   make package-test                  the same
#
# Prints one line (PASS or FAIL and the number of checks), the failed
# checks with their output, and with INTEGRATION_COUNTS=FILE appends
# "passed failed" to FILE, as t/tools/integration.sh does for make test.
# LESSONS_TEST_VERBOSE=1 prints each check as it runs; LESSONS_TEST_KEEP=1
# keeps the build directory.
#
# Safe to run again and again, and after an interrupted run: what a run
# changes is written down first in $STATE, and every exit (a failure, a
# signal) puts it back; a run that died without that (kill -9, a power
# cut) is put back by the next run before it starts.  It runs only where
# it cannot harm an admin's setup: not when libapache2-mod-lessons is
# installed already, nor when /etc/lessons or /var/lib/lessons exist
# (then it says so and counts nothing).  apt-get starts and restarts no
# service meanwhile (a policy-rc.d); the test starts, reloads and stops
# Apache itself, except in the upgrade checks, where the package's
# postinst may act on apache2 (and nothing else).  No network: everything the package needs is installed
# (make test-deps).
set -uo pipefail

PKG=libapache2-mod-lessons
NAME="package $PKG"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
SELF=$ROOT/t/package/$(basename "$0")

if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 \
        || { echo "package-test: needs root (or sudo) to install the package" >&2; exit 1; }
    exec sudo env INTEGRATION_COUNTS="${INTEGRATION_COUNTS:-}" \
        LESSONS_TEST_VERBOSE="${LESSONS_TEST_VERBOSE:-}" \
        LESSONS_TEST_KEEP="${LESSONS_TEST_KEEP:-}" "$SELF" "$@"
fi

export LANG=C.UTF-8 LC_ALL=C.UTF-8 DEBIAN_FRONTEND=noninteractive
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:$PATH

APACHE_ETC=/etc/apache2
KEY_DIR=/etc/lessons
KEY=$KEY_DIR/jwt.key
DB_DIR=/var/lib/lessons
DB=$DB_DIR/lessons.db
SQL_DIR=/usr/share/mod-lessons/sql
MODULE_SO=/usr/lib/apache2/modules/mod_lessons.so
TEST_CONF=zz-lessons-package-test
# What this run changed, so that any later run can put it back.
STATE=/var/lib/mod-lessons-package-test
LOCK_DIR=/run/lock
[ -d "$LOCK_DIR" ] || LOCK_DIR=/tmp
TEST_LOCK=$LOCK_DIR/mod-lessons-package-test.lock
# t/tools/deps.sh's lock: one policy-rc.d at a time.
DEPS_LOCK=$LOCK_DIR/mod-lessons-deps.lock
POLICY=/usr/sbin/policy-rc.d
POLICY_SAVED=/usr/sbin/policy-rc.d.mod-lessons-package-test-saved
POLICY_MARK="written by mod_lessons t/package/package-test.sh"

die() { echo "package-test: $*" >&2; exit 1; }

# --- tools ------------------------------------------------------------------
for tool in dpkg-buildpackage dh dh_apache2 lintian apt-get apache2ctl a2enmod \
            a2enconf a2query curl sqlite3 openssl perl flock runuser; do
    command -v "$tool" >/dev/null 2>&1 \
        || die "$tool not found: run make test-deps (t/tools/deps.sh test)"
done
[ -f "$ROOT/debian/control" ] || die "$ROOT/debian not found"

# --- counting -----------------------------------------------------------------
PASSED=0
FAILED=0
DETAILS=""
DONE=""
FATAL=""
SKIPPED_HTTP=""
note() { [ -z "${LESSONS_TEST_VERBOSE:-}" ] || echo "    $*"; }
pass() { PASSED=$((PASSED + 1)); note "ok    $1"; }
fail() {
    FAILED=$((FAILED + 1))
    note "FAIL  $1"
    DETAILS+="  $1"$'\n'
    [ -z "${2:-}" ] || detail "$2"
}
# More output for the details, without counting a check.
detail() { DETAILS+=$(printf '%s\n' "$1" | head -n 40 | sed 's/^/      /')$'\n'; }
# check DESCRIPTION COMMAND...: passes when COMMAND exits 0; its output
# is the failure's detail.
check() {
    local desc=$1 out rc
    shift
    out=$("$@" 2>&1)
    rc=$?
    if [ $rc -eq 0 ]; then pass "$desc"; else fail "$desc (exit $rc)" "$out"; fi
    return $rc
}
# check_fails DESCRIPTION PATTERN COMMAND...: COMMAND must fail and say PATTERN.
check_fails() {
    local desc=$1 pattern=$2 out rc
    shift 2
    out=$("$@" 2>&1)
    rc=$?
    if [ $rc -ne 0 ] && grep -qF -- "$pattern" <<<"$out"; then
        pass "$desc"
    else
        fail "$desc (exit $rc, expected a failure naming $pattern)" "$out"
    fi
}

# --- the system Apache's state ----------------------------------------------
enabled() {  # mods|conf|sites
    local d=$APACHE_ETC/$1-enabled
    [ -d "$d" ] || return 0
    ls "$d" | sed -n 's/\.\(load\|conf\)$//p' | sort -u
}
apache_pid() {
    local pid
    pid=$(cat /var/run/apache2/apache2.pid 2>/dev/null) || return 1
    [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = apache2 ] && echo "$pid"
}
# Whether process PID runs in this system's root, not in another root on
# the machine (make test-all runs this test again in the other Debian
# release's root, whose system Apache is an apache2 -k start too).  By
# device and inode: readlink names every root "/" from inside a chroot.
same_root() {
    [ "$(stat -L -c %d:%i "/proc/$1/root/" 2>/dev/null)" = "$(stat -L -c %d:%i /)" ]
}
# The system Apache's parent process even before it writes its pid file
# (it does so a moment after apache2ctl start returns): an apache2 -k start
# whose parent is not apache2, without -f or -d (other httpds, such as the
# test suites' and make run's, have both; apache2 -t and -k stop, which
# apache2ctl runs, are not servers).
apache_master() {
    local pid ppid args
    for pid in $(pgrep -x apache2); do
        same_root "$pid" || continue
        ppid=$(ps -o ppid= -p "$pid" 2>/dev/null | tr -d ' ')
        [ "$(cat "/proc/$ppid/comm" 2>/dev/null)" = apache2 ] && continue
        # 2>/dev/null first: the process may be gone by now.
        args=$(tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline")
        case " $args " in *" -k start "*) ;; *) continue ;; esac
        case " $args " in *" -f "*|*" -d "*|*" -t "*) continue ;; esac
        echo "$pid"
        return 0
    done
    return 1
}
apache_running() { apache_pid >/dev/null || apache_master >/dev/null; }
with_systemd() { [ -d /run/systemd/system ]; }
# Started and reloaded without this script's lock descriptor, which a
# daemon would otherwise hold for ever.
apache_start() {
    if with_systemd; then systemctl start apache2 9>&-; else apache2ctl start 9>&-; fi
}
# apache2ctl graceful checks the config first and refuses a broken one.
apache_graceful() { apache2ctl graceful 9>&-; }
apache_stop() {
    local pid="" _
    # Just started, it may not have written its pid file yet.
    for _ in $(seq 1 150); do
        pid=$(apache_pid) && break
        apache_master >/dev/null || return 0
        sleep 0.2
    done
    [ -n "$pid" ] || { echo "apache2 (pid $(apache_master)) wrote no pid file within 30 s" >&2; return 1; }
    # apache2ctl stop reads the config first; a broken one (an interrupted
    # run's) gets the signal it would have sent.
    if with_systemd; then systemctl stop apache2; else apache2ctl stop || kill -TERM "$pid"; fi
    for _ in $(seq 1 150); do
        kill -0 "$pid" 2>/dev/null || return 0
        sleep 0.2
    done
    echo "apache2 (pid $pid) did not stop within 30 s" >&2
    return 1
}
pkg_status() {
    dpkg-query -W -f='${db:Status-Status}' "$PKG" 2>/dev/null || echo not-installed
}
# The remembered a2enmod/a2enconf choices, for the comparison.
apache_state_files() {
    (cd /var/lib/apache2 2>/dev/null && find module conf site 2>/dev/null | sort)
}
snapshot() {  # DIR: everything "as found" means
    local d=$1
    enabled mods >"$d/mods"
    enabled conf >"$d/conf"
    enabled sites >"$d/sites"
    if apache_running; then echo running; else echo stopped; fi >"$d/running"
    pkg_status >"$d/package"
    apache_state_files >"$d/state-files"
    { md5sum "$POLICY" 2>/dev/null || echo "no policy-rc.d"; } >"$d/policy"
}

# --- policy-rc.d: apt-get starts nothing ------------------------------------
restore_policy() {
    if grep -qs "$POLICY_MARK" "$POLICY"; then
        if [ -e "$POLICY_SAVED" ]; then mv -f "$POLICY_SAVED" "$POLICY"; else rm -f "$POLICY"; fi
    fi
}
APT_LOG=""
# apt_get ARGS...: apt-get under a policy-rc.d that forbids every service
# action, holding deps.sh's lock so the two never swap policies.  With
# APT_ALLOW=SERVICE, that service's actions are allowed (as on a machine
# without a policy-rc.d): what the package's maintainer scripts do to
# Apache then really happens.
apt_get() {
    local rc
    (
        exec 8>"$DEPS_LOCK"
        flock -w 900 8 || { echo "package-test: t/tools/deps.sh's lock is held" >&2; exit 1; }
        restore_policy
        [ -e "$POLICY" ] && mv -f "$POLICY" "$POLICY_SAVED"
        if [ -n "${APT_ALLOW:-}" ]; then
            # policy-rc.d [--options] SERVICE ACTIONS [RUNLEVEL]
            printf '#!/bin/sh\n# %s: only %s may start,\n# stop or reload while it installs packages.\nfor a; do\n    case $a in --*) ;; %s) exit 0 ;; *) exit 101 ;; esac\ndone\nexit 101\n' \
                "$POLICY_MARK" "$APT_ALLOW" "$APT_ALLOW" >"$POLICY"
        else
            printf '#!/bin/sh\n# %s: no service starts\n# or restarts while it installs packages.\nexit 101\n' \
                "$POLICY_MARK" >"$POLICY"
        fi
        chmod 755 "$POLICY"
        # Without the locks' descriptors: a server a maintainer script
        # started would hold them for ever.
        apt-get -y -o DPkg::Lock::Timeout=600 "$@" 8>&- 9>&-
        rc=$?
        restore_policy
        exit $rc
    ) >"$APT_LOG" 2>&1
    rc=$?
    cat "$APT_LOG" >>"$WORK/apt.log"
    [ $rc -eq 0 ] || cat "$APT_LOG"
    return $rc
}

# README's production guide, run as a test (guide_test, below); its
# restore step (guide_restore) is part of ours.
. "$ROOT/t/package/guide.sh"

# --- putting things back ----------------------------------------------------
# From $STATE alone, so that it also works for a run that died.
restore() {
    local s=$STATE what name
    [ -d "$s" ] || return 0
    [ -n "$APT_LOG" ] || APT_LOG=$(mktemp)
    [ -n "${WORK:-}" ] || WORK=$(mktemp -d)
    guide_restore
    if [ -e "$APACHE_ETC/conf-enabled/$TEST_CONF.conf" ]; then
        a2disconf -q "$TEST_CONF" >/dev/null 2>&1
    fi
    rm -f "$APACHE_ETC/conf-available/$TEST_CONF.conf"
    # Modules, confs and sites as they were, first: the config is then
    # the one found, valid again, before Apache stops or reloads.  (The
    # admin's choices that a2en*/a2dis* remember under /var/lib/apache2
    # go back below.)
    for what in mods conf sites; do
        [ -f "$s/before/$what" ] || continue
        case $what in mods) name=mod ;; conf) name=conf ;; sites) name=site ;; esac
        comm -13 "$s/before/$what" <(enabled "$what") | while read -r x; do
            "a2dis$name" -q -f "$x" >/dev/null 2>&1 || "a2dis$name" -q "$x" >/dev/null 2>&1
        done
        comm -23 "$s/before/$what" <(enabled "$what") | while read -r x; do
            "a2en$name" -q "$x" >/dev/null 2>&1
        done
    done
    if [ "$(cat "$s/before/running" 2>/dev/null)" != running ]; then
        apache_stop >/dev/null 2>&1
    fi
    # The package, if this run installed it (purge: its conffiles too).
    if [ -e "$s/installed" ] && [ "$(pkg_status)" != not-installed ]; then
        apt_get purge "$PKG" >/dev/null || dpkg --purge "$PKG" >/dev/null 2>&1
    fi
    # The key and the database, if this run made their directories.
    [ -e "$s/made-key-dir" ] && rm -rf "$KEY_DIR"
    [ -e "$s/made-db-dir" ] && rm -rf "$DB_DIR"
    if [ -f "$s/apache2-state.tar" ]; then
        rm -rf /var/lib/apache2/module /var/lib/apache2/conf /var/lib/apache2/site
        tar -C /var/lib/apache2 -xf "$s/apache2-state.tar"
    fi
    if [ "$(cat "$s/before/running" 2>/dev/null)" = running ]; then
        if apache_running; then apache_graceful >/dev/null 2>&1; else apache_start >/dev/null 2>&1; fi
    fi
    restore_policy
    rm -rf "$s"
}

WORK=""
BUILD_PID=""
cleanup() {
    local rc=$? diff
    trap - EXIT INT TERM
    if [ -n "$BUILD_PID" ]; then
        kill -TERM -- "-$BUILD_PID" 2>/dev/null
        wait "$BUILD_PID" 2>/dev/null
    fi
    if [ -z "$DONE" ] && [ -d "$STATE/before" ]; then
        # Stopped early: put everything back, and say whether that worked.
        cp -r "$STATE/before" "$WORK/before" 2>/dev/null
        restore
        mkdir -p "$WORK/after"
        snapshot "$WORK/after"
        if diff=$(diff -r "$WORK/before" "$WORK/after" 2>&1); then
            pass "the system Apache is as it was found (after the early stop)"
        else
            fail "the system Apache is as it was found (after the early stop)" "$diff"
        fi
    fi
    if [ -z "$DONE" ]; then
        # A signal or an error outside the checks counts as one more.
        [ -n "$FATAL" ] || FAILED=$((FAILED + 1))
        [ -n "${INTEGRATION_COUNTS:-}" ] && echo "$PASSED $FAILED" >>"$INTEGRATION_COUNTS"
        printf '%-4s  %-24s %5d tests%s\n' FAIL "$NAME" $((PASSED + FAILED)) \
            ", stopped early (exit $rc; ${SECONDS} s)"
        [ -z "$DETAILS" ] || printf '%s' "$DETAILS"
        [ $rc -ne 0 ] || rc=1
    fi
    [ -n "$APT_LOG" ] && rm -f "$APT_LOG"
    if [ -n "$WORK" ]; then
        if [ -n "${LESSONS_TEST_KEEP:-}" ]; then echo "package-test: kept $WORK"; else rm -rf "$WORK"; fi
    fi
    exit "$rc"
}

# --- one run at a time; the last one's leftovers first ------------------------
exec 9>"$TEST_LOCK"
flock -w 600 9 || die "another package test still runs after 10 minutes ($TEST_LOCK)"
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
WORK=$(mktemp -d /tmp/lessons-pkg.XXXXXX)
chmod 755 "$WORK"       # apt's _apt user reads the .deb from here
APT_LOG=$(mktemp)
: >"$WORK/apt.log"
if [ -d "$STATE" ]; then
    echo "package-test: putting back what an interrupted run left (from $STATE)" >&2
    old_work=$(cat "$STATE/work" 2>/dev/null)
    case "$old_work" in /tmp/lessons-pkg.?*) rm -rf "$old_work" ;; esac
    restore
fi

# An admin's package, key or database: not ours to touch.
skip() {
    DONE=1
    [ -n "${INTEGRATION_COUNTS:-}" ] && echo "0 0" >>"$INTEGRATION_COUNTS"
    printf '%-4s  %-24s %5d tests%s\n' SKIP "$NAME" 0 " ($*)"
    exit 0
}
[ "$(pkg_status)" = not-installed ] \
    || skip "$PKG is installed here ($(pkg_status)); the test would remove it"
[ ! -e "$KEY_DIR" ] || skip "$KEY_DIR exists: an admin's key, which the test would use"
[ ! -e "$DB_DIR" ] || skip "$DB_DIR exists: an admin's database, which the test would use"

mkdir -p "$STATE/before"
echo $$ >"$STATE/pid"
echo "$WORK" >"$STATE/work"
snapshot "$STATE/before"
# shellcheck disable=SC2046
tar -C /var/lib/apache2 -cf "$STATE/apache2-state.tar" \
    $(cd /var/lib/apache2 && ls -d module conf site 2>/dev/null) 2>/dev/null
WAS_RUNNING=$(cat "$STATE/before/running")

# --- build ----------------------------------------------------------------------
# A copy of the sources (nothing built, no dev key or database), so the
# work tree stays as it is.  In the background, in a session of its own,
# so that a signal stops the whole build at once.
mkdir "$WORK/src"
tar -C "$ROOT" -cf - \
    Makefile README.md docs CHANGELOG mod_lessons.c modules support conf sql debian \
    | tar -C "$WORK/src" -xf -
# The build is README's step (support/build-package), run as written.
VERSION=$(cd "$WORK/src" && dpkg-parsechangelog -S Version)
ARCH=$(dpkg --print-architecture)
CHANGES=$WORK/${PKG}_${VERSION}_$ARCH.changes
DEB=""
if guide_build && [ "$DEB" = "$WORK/${PKG}_${VERSION}_$ARCH.deb" ]; then
    pass "README's build step (support/build-package) builds $(basename "$DEB") and prints its absolute path"
else
    fail "README's build step (support/build-package) builds the package and prints its path (printed: ${DEB:-nothing})" \
        "$(cat "$WORK/build.log"; grep -E 'error|Error|\*\*\*' "$WORK/build-package.log" 2>/dev/null | head -n 20)"
    FATAL=1
    exit 1
fi
check "lintian finds no errors" lintian --fail-on error "$CHANGES"
contents=$(dpkg-deb -c "$DEB" | awk '{ print $6 }' | sed 's|^\./|/|')
missing=""
for f in "$MODULE_SO" $APACHE_ETC/mods-available/lessons.load \
         $APACHE_ETC/mods-available/lessons.conf $APACHE_ETC/conf-available/lessons-api.conf \
         $SQL_DIR/schema.sqlite.sql $SQL_DIR/schema.pgsql.sql $SQL_DIR/sample-lessons.sql \
         /usr/share/mod-lessons/openapi.yaml \
         /usr/share/doc/$PKG/README.md.gz /usr/share/doc/$PKG/docs/directives.md.gz \
         /usr/share/doc/$PKG/copyright; do
    grep -qx -- "$f" <<<"$contents" || missing+="$f "
done
if [ -z "$missing" ]; then
    pass "the package holds the module, its confs, the SQL, the OpenAPI document, README and docs/"
else
    fail "the package holds the module, its confs, the SQL, the OpenAPI document, README and docs/" "missing: $missing"
fi
conffiles=$(dpkg-deb --ctrl-tarfile "$DEB" | tar -xOf - ./conffiles 2>/dev/null | sort)
check "the three confs are conffiles" test "$conffiles" = "$(printf '%s\n' \
    $APACHE_ETC/conf-available/lessons-api.conf $APACHE_ETC/mods-available/lessons.conf \
    $APACHE_ETC/mods-available/lessons.load | sort)"
check "lessons.load says Depends: dbd" \
    sh -c "dpkg-deb --fsys-tarfile '$DEB' | tar -xOf - ./etc/apache2/mods-available/lessons.load | grep -qx '# Depends: dbd'"

# --- install ----------------------------------------------------------------------
: >"$STATE/installed"
check "apt-get install ./$(basename "$DEB")" apt_get install "$DEB" || { FATAL=1; exit 1; }
check "the package is installed" test "$(pkg_status)" = installed
check "installing enables neither the module nor the API conf" \
    sh -c "! a2query -q -m lessons && ! a2query -q -c lessons-api"
check "installing leaves Apache $WAS_RUNNING" \
    test "$(if apache_running; then echo running; else echo stopped; fi)" = "$WAS_RUNNING"
check "configtest passes with the package installed" apache2ctl configtest
check "a2enmod lessons" a2enmod -q lessons
check "a2enmod lessons enables mod_dbd too" a2query -q -m dbd
check "configtest passes with only the module enabled" apache2ctl configtest

# The server, on a free loopback port (and its own ports, if it was
# stopped and nothing else holds them).
. "$ROOT/t/tools/ports.sh"
PORT=$(pick_port)
BASE=http://127.0.0.1:$PORT
cat >"$APACHE_ETC/conf-available/$TEST_CONF.conf" <<EOF
# Written by mod_lessons t/package/package-test.sh; removed when it ends.
Listen 127.0.0.1:$PORT
<IfModule lessons_module>
    <Location "/health/lessons">
        SetHandler lessons-health
    </Location>
</IfModule>
EOF
check "a2enconf $TEST_CONF (Listen 127.0.0.1:$PORT)" a2enconf -q "$TEST_CONF"
busy=""
if [ "$WAS_RUNNING" = stopped ]; then
    # ports.conf's own Listen lines (outside <IfModule>): another program
    # there would make the start fail, and it is not ours to disturb.
    for p in $(awk 'tolower($1) ~ /^<ifmodule/ { d++ } tolower($1) ~ /^<\/ifmodule/ { d-- }
                    d == 0 && tolower($1) == "listen" { n = split($2, a, ":"); print a[n] }' \
               "$APACHE_ETC/ports.conf"); do
        port_free "$p" || busy+="${busy:+ }$p"
    done
fi

# http METHOD PATH [curl args]: sets CODE, HEADERS, BODY.
TOKEN=""
http() {
    local method=$1 path=$2
    shift 2
    CODE=$(curl -sS -o "$WORK/body" -D "$WORK/headers" -w '%{http_code}' --max-time 20 \
               -X "$method" "$@" "$BASE$path" 2>"$WORK/curl.err") || CODE="curl failed: $(cat "$WORK/curl.err")"
    HEADERS=$(tr -d '\r' <"$WORK/headers" 2>/dev/null)
    BODY=$(cat "$WORK/body" 2>/dev/null)
}
authed() { http "$@" -H "Authorization: Bearer $TOKEN"; }
# wait_for CODE PATH: up to 30 s for the server to answer PATH with CODE
# (a start or a graceful restart takes effect a moment later).
wait_for() {
    local _
    for _ in $(seq 1 60); do
        http GET "$2"
        [ "$CODE" = "$1" ] && return 0
        sleep 0.5
    done
    echo "GET $2 answered $CODE, not $1" >&2
    return 1
}
expect() {  # DESCRIPTION CODE [header regex]
    local extra=""
    if [ "$CODE" = "$2" ] && { [ -z "${3:-}" ] || grep -qiE -- "$3" <<<"$HEADERS"; }; then
        pass "$1"
    else
        [ -z "${3:-}" ] || extra=" with a header matching $3"
        fail "$1 (expected $2$extra, got $CODE)" "$(printf '%s\n' "$HEADERS" "$BODY" | grep -v '^$')"
    fi
}
# What this run added to Apache's error log.
ERROR_LOG=/var/log/apache2/error.log
ERROR_LOG_START=$(( $(stat -c %s "$ERROR_LOG" 2>/dev/null || echo 0) + 1 ))
error_log_tail() { tail -c "+$ERROR_LOG_START" "$ERROR_LOG" 2>/dev/null | tail -n 15; }
start_or_log() { apache_start || { echo "error.log:"; error_log_tail; return 1; }; }

if [ -n "$busy" ]; then
    SKIPPED_HTTP="Apache's port $busy is taken by another program: the HTTP checks did not run"
elif [ "$WAS_RUNNING" = running ]; then
    check "apache2 reloads with the module enabled" apache_graceful
else
    check "apache2 starts with the module enabled" start_or_log
fi
if [ -z "$SKIPPED_HTTP" ]; then
    check "apache2 answers on 127.0.0.1:$PORT" wait_for 404 /api/lessons
    http GET /api/lessons
    expect "with only the module enabled, /api/lessons is not served (404)" 404
fi

check "a2enconf lessons-api" a2enconf -q lessons-api
check_fails "configtest fails and names the missing key" "$KEY" apache2ctl configtest
if [ -z "$SKIPPED_HTTP" ]; then
    check_fails "apache2ctl graceful refuses the broken config" "$KEY" apache_graceful
    http GET /api/lessons
    expect "the running server still answers as before (404)" 404
fi

# The key, as docs/operations.md says.
: >"$STATE/made-key-dir"
check "make the key as docs/operations.md says" sh -c "install -d -m 755 $KEY_DIR && (umask 077 && openssl rand -hex 32 > $KEY)"
check_fails "configtest fails and names the missing database" "$DB" apache2ctl configtest

# The SQLite database, as docs/operations.md says.
: >"$STATE/made-db-dir"
check "make the database as docs/operations.md says (sqlite3 prints wal)" sh -c "
    install -d -o www-data -g www-data -m 750 $DB_DIR &&
    runuser -u www-data -- sqlite3 $DB < $SQL_DIR/schema.sqlite.sql | grep -qx wal"
check "configtest passes once the key and database exist" apache2ctl configtest

if [ -z "$SKIPPED_HTTP" ]; then
    check "apache2 reloads with the API enabled" apache_graceful
    check "the API answers (401 without a token)" wait_for 401 /api/lessons
    http GET /api/lessons
    expect "no token: 401 with WWW-Authenticate: Bearer" 401 '^WWW-Authenticate: Bearer'
    TOKEN=$("$ROOT/t/tools/token" --key "$KEY" --sub pkg --ttl 600)
    authed GET /api/lessons
    expect "list: 200" 200
    check "list: an empty array in a new database" test "$BODY" = "[]"
    authed POST /api/lessons -H 'Content-Type: application/json' \
        -d '{"levelId":1,"title":"Paket getestet","order":1,"topic":"Packaging"}'
    expect "create: 201 with Location" 201 '^Location: /api/lessons/[0-9]+$'
    LOCATION=$(sed -n 's/^Location: //Ip' <<<"$HEADERS" | head -n 1)
    authed GET "${LOCATION:-/api/lessons/0}"
    expect "get the new lesson: 200" 200
    check "get: the title that was sent" grep -q '"title":"Paket getestet"' <<<"$BODY"
    authed GET /api/lessons
    check "list: holds the new lesson" grep -q '"title":"Paket getestet"' <<<"$BODY"
    authed DELETE "${LOCATION:-/api/lessons/0}"
    expect "delete: 204" 204
    authed GET "${LOCATION:-/api/lessons/0}"
    expect "get after delete: 404" 404
    http GET /health/lessons
    expect "health: 200 application/health+json" 200 '^Content-Type: application/health\+json'
    check "health: status pass" grep -q '"status":"pass"' <<<"$BODY"
    [ $FAILED -eq 0 ] || { DETAILS+="  (what this run added to $ERROR_LOG:)"$'\n'; detail "$(error_log_tail)"; }
fi
# --- lessons-token and the admin's documents, as installed ---------------------------
# The package's own tool, /usr/bin/lessons-token (not the checkout's),
# against the API the system Apache serves: a token from the admin's key
# is taken (check prints 200 and exits 0; make's token works with curl),
# one from another key is refused (check prints 401 and the reason the
# server gives, and exits 1).  And the documents Debian's own module
# packages ship: README.Debian, NEWS.Debian, the upstream changelog, the
# man page, the reference of every directive.
check_package_tool() {
    local tool=/usr/bin/lessons-token doc=/usr/share/doc/$PKG other out rc f missing=""
    for f in "$tool" /usr/share/man/man1/lessons-token.1.gz "$doc/README.Debian.gz" \
             "$doc/NEWS.Debian.gz" "$doc/changelog.gz" "$doc/changelog.Debian.gz" \
             "$doc/examples/lessons-reference.conf" "$doc/examples/lessons-alerts.yml" \
             "$doc/examples/lessons-dashboard.json"; do
        # dh_compress leaves a document under 4 KiB as it is.
        [ -e "$f" ] || [ -e "${f%.gz}" ] || missing+="$f "
    done
    if [ -z "$missing" ]; then
        pass "installed: lessons-token, its man page, README.Debian, NEWS.Debian, the changelogs, lessons-reference.conf, the Prometheus rules and Grafana dashboard"
    else
        fail "installed: lessons-token, its man page, README.Debian, NEWS.Debian, the changelogs, lessons-reference.conf, the Prometheus rules and Grafana dashboard" "missing: $missing"
    fi
    check "lessons-reference.conf names LessonsJWTKey and LessonsCacheSize, all commented out" \
        sh -c "grep -q '^#LessonsJWTKey ' '$doc/examples/lessons-reference.conf' &&
               grep -q '^#LessonsCacheSize ' '$doc/examples/lessons-reference.conf' &&
               ! grep -qv '^\(#.*\)\?\$' '$doc/examples/lessons-reference.conf'"
    [ -z "$SKIPPED_HTTP" ] || return 0
    out=$("$tool" check "$BASE/api/lessons" --key "$KEY" 2>&1)
    rc=$?
    if [ $rc -eq 0 ] && [ "$out" = "200 OK" ]; then
        pass "lessons-token check with the admin's key: 200, exit 0"
    else
        fail "lessons-token check with the admin's key: 200, exit 0 (exit $rc)" "$out"
    fi
    TOKEN=$("$tool" make --key "$KEY" --sub pkg-tool --ttl 600 2>&1)
    authed GET /api/lessons
    expect "a token from lessons-token make, sent with curl: 200" 200
    other=$WORK/other.key
    (umask 077 && openssl rand -hex 32 >"$other")
    out=$("$tool" check "$BASE/api/lessons" --key "$other" 2>&1)
    rc=$?
    if [ $rc -eq 1 ] && [ "$(head -n 1 <<<"$out")" = "401 Unauthorized" ] \
        && grep -qx 'error: invalid_token' <<<"$out" \
        && grep -q '^error_description: .' <<<"$out"; then
        pass "lessons-token check with another key: 401 and the reason, exit 1"
    else
        fail "lessons-token check with another key: 401 and the reason, exit 1 (exit $rc)" "$out"
    fi
}
check_package_tool

# --- upgrade -----------------------------------------------------------------------
# dpkg replaces mod_lessons.so with a new file; a server that has the
# module enabled must load it (the postinst reloads Apache), or it keeps
# running the old code until someone restarts it.  A stopped server stays
# stopped.  apt-get runs with apache2's actions allowed, as on a machine
# without a policy-rc.d, so whatever the postinst does to Apache happens.
#
# upgrade_deb N: the package one step up ($VERSION+upN), repacked from the
# one built: the same files, which dpkg replaces all the same.
upgrade_deb() {
    local dir=$WORK/up$1 deb=$WORK/${PKG}_$VERSION+up${1}_$ARCH.deb
    rm -rf "$dir"
    dpkg-deb -R "$DEB" "$dir" || return 1
    sed -i "s/^Version: .*/Version: $VERSION+up$1/" "$dir/DEBIAN/control" || return 1
    dpkg-deb --root-owner-group -b "$dir" "$deb" >/dev/null || return 1
    echo "$deb"
}
upgrade() {  # N
    local deb
    deb=$(upgrade_deb "$1") || return 1
    APT_ALLOW=apache2 apt_get install "$deb" || return 1
    test "$(dpkg-query -W -f='${Version}' "$PKG")" = "$VERSION+up$1"
}
# Which mod_lessons.so the system Apache's processes have mapped: "old"
# when one of them still maps a replaced (deleted) file, "new" when they
# map the installed one, "none" when none maps it.
module_mapped() {
    local master pid state=none
    master=$(apache_pid) || { echo none; return 0; }
    for pid in "$master" $(pgrep -P "$master"); do
        if grep -qF "$MODULE_SO (deleted)" "/proc/$pid/maps" 2>/dev/null; then
            echo old
            return 0
        fi
        grep -q " $MODULE_SO\$" "/proc/$pid/maps" 2>/dev/null && state=new
    done
    echo "$state"
}
# Up to 30 s (a graceful reload replaces the children as they finish).
runs_installed_module() {
    local _ state
    for _ in $(seq 1 60); do
        state=$(module_mapped)
        [ "$state" = new ] && return 0
        sleep 0.5
    done
    echo "the system Apache (pid $(apache_pid)) maps: $state"
    grep -h mod_lessons "/proc/$(apache_pid)/maps" 2>/dev/null | sort -u
    return 1
}
apache_stays_stopped() {
    sleep 1     # a server just started may not have written its pid file
    ! apache_running || { echo "apache2 runs (pid $(apache_pid || apache_master))"; return 1; }
}

if [ -z "$SKIPPED_HTTP" ]; then
    check "before the upgrade: the system Apache runs the installed module" runs_installed_module
    pid_before=$(apache_pid)
    check "upgrade to $VERSION+up1 with the module enabled and Apache running" upgrade 1
    check "after the upgrade: the system Apache runs the new module, not the replaced one" \
        runs_installed_module
    check "after the upgrade: reloaded, not restarted (the same parent pid)" \
        test "$(apache_pid)" = "$pid_before"
    check "after the upgrade: the API answers" wait_for 401 /api/lessons
fi
if [ "$WAS_RUNNING" = stopped ]; then
    check "apache2 stops" apache_stop
    # Only where the test started Apache itself: an admin's running
    # server is never stopped for this.
    check "upgrade to $VERSION+up2 with the module enabled and Apache stopped" upgrade 2
    check "after the upgrade: Apache is still stopped" apache_stays_stopped
fi

# --- remove, then purge --------------------------------------------------------------
# Removed while the module and the API conf are enabled: its prerm
# disables both, so the config left behind still passes configtest.
check "apt-get remove $PKG" apt_get remove "$PKG"
check "after remove: the package's conffiles are kept (config-files)" test "$(pkg_status)" = config-files
check "after remove: the module is gone" test ! -e "$MODULE_SO"
check "after remove: the SQL is gone" test ! -e "$SQL_DIR"
check "after remove: the confs are still there" test -f $APACHE_ETC/mods-available/lessons.conf \
    -a -f $APACHE_ETC/mods-available/lessons.load -a -f $APACHE_ETC/conf-available/lessons-api.conf
check "after remove: the module and the API conf are disabled" \
    test ! -e $APACHE_ETC/mods-enabled/lessons.load -a ! -e $APACHE_ETC/conf-enabled/lessons-api.conf
check "after remove: configtest passes" apache2ctl configtest
check "after remove: the key and the database are still there" test -s "$KEY" -a -s "$DB"
check "apt-get purge $PKG" apt_get purge "$PKG"
check "after purge: the package is gone" test "$(pkg_status)" = not-installed
check "after purge: the confs are gone" test ! -e $APACHE_ETC/mods-available/lessons.conf \
    -a ! -e $APACHE_ETC/mods-available/lessons.load -a ! -e $APACHE_ETC/conf-available/lessons-api.conf
check "after purge: the key and the database are still there" test -s "$KEY" -a -s "$DB"
check "after purge: configtest passes" apache2ctl configtest

# --- README's production guide, on this release -----------------------------------------
guide_test

# --- as found ---------------------------------------------------------------------------
cp -r "$STATE/before" "$WORK/before"
restore
mkdir -p "$WORK/after"
snapshot "$WORK/after"
check "the system Apache is as it was found (running or not, mods, confs, sites)" \
    diff -r "$WORK/before" "$WORK/after"
check "the test's key and database are removed" test ! -e "$KEY_DIR" -a ! -e "$DB_DIR"

# --- result ---------------------------------------------------------------------------------
DONE=1
[ -n "${INTEGRATION_COUNTS:-}" ] && echo "$PASSED $FAILED" >>"$INTEGRATION_COUNTS"
extra=""
[ -z "$SKIPPED_HTTP" ] || extra="; $SKIPPED_HTTP"
if [ $FAILED -eq 0 ]; then
    printf '%-4s  %-24s %5d tests%s\n' PASS "$NAME" "$PASSED" " (${SECONDS} s$extra)"
    exit 0
fi
printf '%-4s  %-24s %5d tests%s\n' FAIL "$NAME" $((PASSED + FAILED)) ", $FAILED failed (${SECONDS} s$extra)"
printf '%s' "$DETAILS"
echo "    build log, apt log: $WORK (removed unless LESSONS_TEST_KEEP=1)"
exit 1
