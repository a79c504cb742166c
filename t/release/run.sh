#!/bin/bash
# The other Debian release (issue 22): this tree's core tests -- unit, the
# house checks, the integration suite on SQLite and on PostgreSQL, and the
# package test -- run again inside a root of the Debian release this
# machine is not: Debian 13 (trixie) from Debian 12 (bookworm), and the
# other way round.  The root is made with debootstrap from the machine's
# own Debian mirror, kept between runs (apt brings it up to date each
# time), and entered with chroot, /proc, /sys and /dev mounted only for
# the run and unmounted on every exit.
#
#   t/release/run.sh                  (as root, or through sudo)
#   make release-test                 the same
#
# Prints the inner run's lines, each prefixed with the release, then one
# line (PASS or FAIL, the number of tests, the skipped ones, the time);
# with INTEGRATION_COUNTS=FILE appends "passed failed" to FILE, as
# t/tools/integration.sh does for make test.
#
# LESSONS_RELEASE_ROOTS   where roots are kept (default
#                         /var/cache/mod-lessons/roots)
# LESSONS_RELEASE_FRESH=1 make the root again from nothing
# LESSONS_RELEASE_TARGET  the make target run in the root (default
#                         test-release)
set -uo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
START=$(date +%s)

if [ "$(id -u)" -ne 0 ]; then
    exec sudo --preserve-env=INTEGRATION_COUNTS,LESSONS_RELEASE_ROOTS,LESSONS_RELEASE_FRESH,LESSONS_RELEASE_TARGET,CI,FAULTS,HA_SECONDS \
        "$0" "$@"
fi

die() { printf 'release: %s\n' "$*" >&2; exit 1; }
counts_fail() {
    [ -z "${INTEGRATION_COUNTS:-}" ] || echo "0 1" >>"$INTEGRATION_COUNTS"
    printf '%-4s  %-24s %5d tests%s\n' FAIL "$LABEL" 0 " ($1)"
    exit 1
}

# shellcheck disable=SC1091
. /etc/os-release
case "${VERSION_CODENAME:-}" in
    bookworm) OTHER=trixie;   LABEL="debian 13 (trixie)" ;;
    trixie)   OTHER=bookworm; LABEL="debian 12 (bookworm)" ;;
    *) die "this machine is ${PRETTY_NAME:-not Debian}: the other release is known only from Debian 12 or 13" ;;
esac

ROOTS=${LESSONS_RELEASE_ROOTS:-/var/cache/mod-lessons/roots}
ROOT=$ROOTS/$OTHER
# The machine's own mirror (deb822 or one-line sources), else Debian's.
MIRROR=$( (sed -n 's/^URIs:[[:space:]]*\([^[:space:]]*debian\)\/\{0,1\}$/\1/p' \
               /etc/apt/sources.list.d/*.sources 2>/dev/null;
           sed -n 's/^deb[[:space:]]\{1,\}\(http[^[:space:]]*debian\)\/\{0,1\}[[:space:]].*/\1/p' \
               /etc/apt/sources.list 2>/dev/null) | grep -v security | head -n 1)
MIRROR=${MIRROR:-http://deb.debian.org/debian}
SECURITY=${MIRROR%/debian}/debian-security

MOUNTED=()
# Every process whose root is the release's root (what the run started
# there, servers included), then the mounts.
stop_root_processes() {
    local p sig
    for sig in TERM KILL; do
        for p in /proc/[0-9]*; do
            [ "$(readlink "$p/root" 2>/dev/null)" = "$ROOT" ] && kill -"$sig" "${p#/proc/}" 2>/dev/null
        done
        sleep 1
    done
}
cleanup() {
    local i
    [ -z "${RUNNING:-}" ] || stop_root_processes
    for (( i = ${#MOUNTED[@]} - 1; i >= 0; i-- )); do
        umount -l "${MOUNTED[$i]}" 2>/dev/null || true
    done
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

mount_in() {     # mount_in TARGET mount-args...
    local target=$1
    shift
    mkdir -p "$target"
    mount "$@" "$target" || die "cannot mount $target"
    MOUNTED+=("$target")
}

# --- the root ----------------------------------------------------------------
if ! command -v debootstrap >/dev/null 2>&1; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q debootstrap >/dev/null \
        || counts_fail "debootstrap could not be installed"
fi
[ -z "${LESSONS_RELEASE_FRESH:-}" ] || rm -rf "$ROOT"
if [ ! -e "$ROOT/.mod-lessons-root" ]; then
    echo "release: making a $OTHER root in $ROOT from $MIRROR" >&2
    rm -rf "$ROOT.new"
    mkdir -p "$ROOTS"
    # What README's two commands assume: git, make and a C compiler.
    debootstrap --variant=minbase --include=make,gcc,libc6-dev,git,ca-certificates \
        "$OTHER" "$ROOT.new" "$MIRROR" >"$ROOTS/$OTHER.debootstrap.log" 2>&1 \
        || { tail -n 20 "$ROOTS/$OTHER.debootstrap.log" >&2; counts_fail "debootstrap failed"; }
    cat >"$ROOT.new/etc/apt/sources.list" <<EOF
deb $MIRROR $OTHER main
deb $MIRROR $OTHER-updates main
deb $SECURITY $OTHER-security main
EOF
    touch "$ROOT.new/.mod-lessons-root"
    mv "$ROOT.new" "$ROOT"
fi

# The root a mount point of its own, so that a test may make / private
# in a mount namespace of its own (t/unit/test_fetch.c does).
mount_in "$ROOT" --bind "$ROOT"
mount_in "$ROOT/proc" -t proc proc
mount_in "$ROOT/sys" -t sysfs sysfs
mount_in "$ROOT/dev" --bind /dev
mount_in "$ROOT/dev/pts" --bind /dev/pts
mount_in "$ROOT/dev/shm" -t tmpfs tmpfs
mount_in "$ROOT/tmp" -t tmpfs -o size=4g,mode=1777 tmpfs
cp /etc/resolv.conf "$ROOT/etc/resolv.conf"
cp /etc/hosts "$ROOT/etc/hosts"
# The root goes out through this machine's network: it trusts the CAs
# this machine added to its own (a proxy's, an egress filter's).
mkdir -p "$ROOT/usr/local/share/ca-certificates"
rm -rf "$ROOT/usr/local/share/ca-certificates/"*
cp -r /usr/local/share/ca-certificates/. "$ROOT/usr/local/share/ca-certificates/" 2>/dev/null || true
# ... and its proxy settings, where it has any, and the history suite's
# choice of faults (LESSONS_RELEASE_TARGET=history-ha-release
# FAULTS=hastop).
PASS_ENV=()
for v in http_proxy https_proxy no_proxy HTTP_PROXY HTTPS_PROXY NO_PROXY \
         FAULTS HA_SECONDS; do
    [ -z "${!v:-}" ] || PASS_ENV+=("$v=${!v}")
done

# This tree as it is now (tracked files, and new ones git does not
# ignore), never what the root kept from a run before.
rm -rf "$ROOT/src"
mkdir -p "$ROOT/src"
( cd "$SRC" && git ls-files -z --cached --others --exclude-standard \
    | xargs -0 -r sh -c 'for f; do [ -e "$f" ] && printf "%s\0" "$f"; done' sh \
    | tar --null -T - -cf - ) | tar -xf - -C "$ROOT/src" \
    || counts_fail "could not copy the tree into the root"

# --- the run -------------------------------------------------------------------
OUT=$ROOTS/$OTHER.log
# In the background, so that a signal is handled at once (the trap
# stops what runs in the root); its status in /src/.rc.  In a PID
# namespace of its own: Debian's init script refuses to restart
# apache2 while processes named apache2 run that are not in its pid file,
# and pidof would find this machine's (the test suites' servers, its
# system Apache) beside the root's own.  The namespace ends, and every
# process in it, when the run does.
RUNNING=1
unshare --pid --fork --kill-child --mount-proc="$ROOT/proc" chroot "$ROOT" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
    LANG=C.UTF-8 TERM=dumb CI="${CI:-}" "${PASS_ENV[@]}" \
    NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt \
    /bin/bash -c 'cd /src && update-ca-certificates >/dev/null 2>&1;
        apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get -y -q upgrade >/dev/null
        make -s "$0"; echo $? >/src/.rc' "${LESSONS_RELEASE_TARGET:-test-release}" \
    2>&1 | tee "$OUT" | sed -u "s/^/$OTHER: /" &
wait $!
RUNNING=""
rc=$(cat "$ROOT/src/.rc" 2>/dev/null || echo 1)

read -r passed failed skipped < <(awk '/^[0-9]+ passed, [0-9]+ failed/ {
        s = 0; if (match($0, /[0-9]+ skipped/)) s = substr($0, RSTART, RLENGTH) + 0
        p = $1; f = $3 } END { print p + 0, f + 0, s + 0 }' "$OUT")
[ "$rc" -ne 0 ] && [ "$failed" -eq 0 ] && failed=1
[ -z "${INTEGRATION_COUNTS:-}" ] || echo "$passed $failed" >>"$INTEGRATION_COUNTS"
secs=$(( $(date +%s) - START ))
if [ "$failed" -eq 0 ]; then
    printf '%-4s  %-24s %5d tests (%d skipped for this release; %d s)\n' PASS "$LABEL" "$passed" "$skipped" "$secs"
else
    printf '%-4s  %-24s %5d tests, %d failed (%d s; all output in %s)\n' FAIL "$LABEL" \
        $((passed + failed)) "$failed" "$secs" "$OUT"
fi
[ "$failed" -eq 0 ]
