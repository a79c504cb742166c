#!/bin/sh
# Install the Debian packages mod_lessons needs, but only those that are
# missing.  Safe to run again and again: with nothing missing it does
# nothing.
#   t/tools/deps.sh build          what building, running and installing the
#                                  module needs (make, make run, make install)
#   t/tools/deps.sh test           that, plus the test tools (make test);
#                                  the default
#   t/tools/deps.sh release        the test tools but the fuzzers' and
#                                  sanitizers' (make test-release, what
#                                  the other Debian release's root runs)
#   t/tools/deps.sh bench          the build packages, plus what make bench
#                                  needs (wrk, valgrind, curl, strace, the
#                                  PostgreSQL server binaries and pgbench)
#   t/tools/deps.sh build|test|bench --check
#                                  only report; exit 1 if something is missing
# It installs with apt-get as root, through sudo when started as another
# user, and leaves the system as it found it:
#   - no service starts or restarts while apt runs (a policy-rc.d that
#     forbids it, in place of any other for the time of the install);
#   - no PostgreSQL cluster is made: the tests need only the server's
#     binaries (initdb, pg_ctl, psql, createdb) and initdb their own;
#   - an Apache module a package enables by itself (libapache2-mod-perl2
#     enables mod_perl) is disabled again unless it was enabled before.
set -eu

MODE="test"
CHECK=""
for arg in "$@"; do
    case "$arg" in
        build|test|release|bench) MODE=$arg ;;
        --check) CHECK=1 ;;
        *) echo "usage: $0 [build|test|release|bench] [--check]" >&2; exit 2 ;;
    esac
done

BUILD_PACKAGES="apache2 apache2-dev libcjose-dev libjansson-dev libssl-dev
libaprutil1-dev libpq-dev libsqlite3-dev libaprutil1-dbd-sqlite3
libaprutil1-dbd-pgsql sqlite3 openssl pkg-config zlib1g-dev
libcurl4-openssl-dev"
# The test tools: cmocka, Apache::Test, the package build (dh_apache2
# comes with apache2-dev) and lintian, clang with libFuzzer and the
# sanitizers' runtimes (libclang-rt-dev) and llvm-symbolizer (llvm), wrk for
# the RSS check (t/api/rss.t).  Node.js for the test identity
# provider and the OpenAPI validator is checked apart (node_ok): a
# machine may have it from elsewhere.  postgresql-client and
# ca-certificates: what README's production guide installs beside the
# build's packages, so that the package test, which runs it
# (t/package/guide.sh), needs no network.
TEST_PACKAGES="libcmocka-dev libapache2-mod-perl2 libwww-perl curl
libjson-validator-perl libyaml-libyaml-perl libdbd-sqlite3-perl libdbd-pg-perl
build-essential
dpkg-dev debhelper fakeroot lintian wrk
postgresql-client ca-certificates
openssh-client
patroni python3-etcd etcd-server etcd-client"
# openssh-client: ssh-keygen, for configtest.t's SSH keys that an HS*
# key file must never be taken as (issue 55).
# patroni, etcd-server and etcd-client: the history suite's Patroni tier
# (issue 58), here and in the other release's root, whose servers it
# starts itself; the units the packages enable for the next boot are
# disabled again (undo).  python3-etcd by name: Debian 13's patroni
# takes python3-consul for its store and then knows no etcd.
# What only make test on the machine itself needs, not the other
# release's root (make test-release): the fuzzers' and sanitizers' clang,
# and debootstrap, which makes that root.
HOST_PACKAGES="clang libclang-rt-dev llvm debootstrap"
# gnuplot-nox (with fonts-dejavu-core): make bench's figures.
BENCH_PACKAGES="wrk valgrind curl strace gnuplot-nox fonts-dejavu-core"

PACKAGES=$BUILD_PACKAGES
[ "$MODE" = test ] && PACKAGES="$PACKAGES $TEST_PACKAGES $HOST_PACKAGES"
[ "$MODE" = release ] && PACKAGES="$PACKAGES $TEST_PACKAGES"
[ "$MODE" = bench ] && PACKAGES="$PACKAGES $BENCH_PACKAGES"

# The PostgreSQL server binaries, in the newest version directory (the one
# t/tools/integration.sh uses).  Any version will do.
pg_binaries_ok() {
    d=$( (ls -d /usr/lib/postgresql/*/bin 2>/dev/null || true) | sort -V | tail -n 1)
    [ -n "$d" ] && [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ] \
        && [ -x "$d/psql" ] && [ -x "$d/createdb" ] \
        && { [ "$MODE" != bench ] || [ -x "$d/pgbench" ]; }
}
# The server package of Debian's current PostgreSQL (postgresql-15 on
# Debian 12), not the "postgresql" metapackage.
pg_server_package() {
    v=$(apt-cache depends postgresql 2>/dev/null \
        | sed -n 's/^ *Depends: postgresql-\([0-9][0-9]*\)$/\1/p' | head -n 1)
    echo "postgresql-${v:-15}"
}

# node and npm, from any source (Debian's nodejs and npm, or another).
node_ok() {
    command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1
}

find_missing() {
    # shellcheck disable=SC2086
    installed=$(dpkg-query -W -f='${Package} ${db:Status-Status}\n' \
                    $PACKAGES 2>/dev/null | awk '$2 == "installed" { print $1 }')
    missing=""
    for p in $PACKAGES; do
        echo "$installed" | grep -qx "$p" || missing="$missing $p"
    done
    missing=${missing# }
    need_pg=""
    if [ "$MODE" != build ] && ! pg_binaries_ok; then
        need_pg=1
    fi
    if { [ "$MODE" = test ] || [ "$MODE" = release ]; } && ! node_ok; then
        missing="${missing:+$missing }nodejs npm"
    fi
}

find_missing
case "$MODE" in
    test) WHAT="build and test packages" ;;
    release) WHAT="build and test packages (no fuzzers)" ;;
    bench) WHAT="build and benchmark packages" ;;
    *) WHAT="build packages" ;;
esac
if [ -z "$missing" ] && [ -z "$need_pg" ]; then
    echo "deps: all $WHAT installed"
    exit 0
fi

if [ -n "$CHECK" ]; then
    [ -n "$need_pg" ] && missing="$missing postgresql-NN (server binaries)"
    echo "deps: missing: ${missing# }"
    exit 1
fi

if [ "$(id -u)" -ne 0 ]; then
    if ! command -v sudo >/dev/null 2>&1; then
        [ -n "$need_pg" ] && missing="$missing $(pg_server_package)"
        echo "deps: missing: ${missing# }; run as root or install sudo" >&2
        exit 1
    fi
    self=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
    echo "deps: installing the missing $WHAT with sudo"
    exec sudo "$self" "$MODE"
fi

# --- as root from here --------------------------------------------------
export DEBIAN_FRONTEND=noninteractive
# apt's chatter goes to a log that is shown only when apt fails.
APT_LOG=""
apt_get() {
    apt-get -qq -o DPkg::Lock::Timeout=600 "$@" >"$APT_LOG" 2>&1 \
        || { cat "$APT_LOG" >&2; echo "deps: apt-get $* failed" >&2; return 1; }
}

# One install at a time: two would fight over policy-rc.d.
LOCK_DIR=/run/lock
[ -d "$LOCK_DIR" ] || LOCK_DIR=/tmp
exec 9>"$LOCK_DIR/mod-lessons-deps.lock"
flock 9
find_missing        # another run may have installed them meanwhile
if [ -z "$missing" ] && [ -z "$need_pg" ]; then
    echo "deps: all $WHAT installed (by another run)"
    exit 0
fi

POLICY=/usr/sbin/policy-rc.d
POLICY_SAVED=/usr/sbin/policy-rc.d.mod-lessons-saved
POLICY_MARK="written by mod_lessons t/tools/deps.sh"
CC_DIR=/etc/postgresql-common/createcluster.d
CC_FILE=$CC_DIR/zz-mod-lessons-deps.conf
CC_DIR_MADE=""
MODS_BEFORE=""
UNITS_BEFORE=""
CLUSTERS_BEFORE=""
SNAPSHOT=""

restore_policy() {
    if grep -qs "$POLICY_MARK" "$POLICY"; then
        if [ -e "$POLICY_SAVED" ]; then
            mv -f "$POLICY_SAVED" "$POLICY"
        else
            rm -f "$POLICY"
        fi
    fi
}

# The services whose units the HA packages enable for the next boot.
HA_UNITS="etcd.service patroni.service"
enabled_units() {
    [ -d /etc/systemd/system/multi-user.target.wants ] || return 0
    for u in $HA_UNITS; do
        [ -e "/etc/systemd/system/multi-user.target.wants/$u" ] && echo "$u"
    done
    return 0
}

enabled_modules() {
    [ -d /etc/apache2/mods-enabled ] || return 0
    ls /etc/apache2/mods-enabled | sed -n 's/\.load$//p' | sort
}

# "version/name status" for each PostgreSQL cluster.
clusters() {
    command -v pg_lsclusters >/dev/null 2>&1 || return 0
    pg_lsclusters -h 2>/dev/null | awk '{ print $1 "/" $2, $4 }' | sort
}

# Put back what the install changed; runs on every exit.
undo() {
    rc=$?
    trap - EXIT INT TERM
    set +e
    rm -f "$CC_FILE"
    [ -z "$CC_DIR_MADE" ] || rmdir "$CC_DIR" 2>/dev/null
    if [ -n "$SNAPSHOT" ]; then
        for m in $(enabled_modules); do
            if ! echo "$MODS_BEFORE" | grep -qx "$m"; then
                a2dismod -q "$m" >/dev/null 2>&1 || true
                echo "deps: disabled module $m again in the system Apache (a package enabled it)"
            fi
        done
        for u in $(enabled_units); do
            if ! echo "$UNITS_BEFORE" | grep -qx "$u"; then
                if [ -d /run/systemd/system ]; then
                    systemctl disable --now "$u" >/dev/null 2>&1 || true
                else
                    rm -f "/etc/systemd/system/multi-user.target.wants/$u"
                fi
                echo "deps: disabled $u again (the package enabled it for the next boot)"
            fi
        done
        clusters | while read -r c status; do
            v=${c%/*}; n=${c#*/}
            before=$(echo "$CLUSTERS_BEFORE" | awk -v c="$c" '$1 == c { print $2 }')
            if [ -z "$before" ]; then
                pg_dropcluster --stop "$v" "$n" >/dev/null 2>&1 || true
                echo "deps: removed PostgreSQL cluster $c that the install made"
            elif [ "${status%%,*}" = online ] && [ "${before%%,*}" != online ]; then
                pg_ctlcluster "$v" "$n" stop >/dev/null 2>&1 || true
                echo "deps: stopped PostgreSQL cluster $c that the install started"
            fi
        done
    fi
    restore_policy
    [ -z "$APT_LOG" ] || rm -f "$APT_LOG"
    exit "$rc"
}
trap undo EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
APT_LOG=$(mktemp)

restore_policy      # left over from an interrupted run
[ -e "$POLICY" ] && mv -f "$POLICY" "$POLICY_SAVED"
printf '#!/bin/sh\n# %s: no service starts\n# or restarts while it installs packages.\nexit 101\n' \
    "$POLICY_MARK" > "$POLICY"
chmod 755 "$POLICY"

apt_get update
if [ -n "$need_pg" ]; then
    missing="$missing $(pg_server_package)"
    # postgresql-common reads this directory (include_dir in its
    # createcluster.conf) before it makes the version's main cluster.
    if [ ! -d "$CC_DIR" ]; then
        mkdir -p "$CC_DIR"
        CC_DIR_MADE=1
    fi
    echo "create_main_cluster = false" > "$CC_FILE"
fi
missing=${missing# }

# apache2 first, so that what it enables by default counts as before.
first=""
case " $missing " in *" apache2 "*) first=apache2 ;; esac
if [ -n "$first" ]; then
    # shellcheck disable=SC2086
    apt_get install -y --no-install-recommends $first
fi
MODS_BEFORE=$(enabled_modules)
UNITS_BEFORE=$(enabled_units)
CLUSTERS_BEFORE=$(clusters)
SNAPSHOT=1
# shellcheck disable=SC2086
apt_get install -y --no-install-recommends $missing
echo "deps: installed $missing"
