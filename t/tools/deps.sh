#!/bin/sh
# Install the Debian packages mod_lessons needs to build, run and test,
# but only those that are missing.  Safe to run again and again.
#   t/tools/deps.sh            install what is missing (apt-get, via sudo
#                              when not root)
#   t/tools/deps.sh --check    only report; exit 1 if something is missing
set -eu

PACKAGES="apache2 apache2-dev libjansson-dev libjwt-dev libssl-dev
libaprutil1-dev libpq-dev libsqlite3-dev libaprutil1-dbd-sqlite3 libaprutil1-dbd-pgsql libcmocka-dev
libapache2-mod-perl2 libwww-perl postgresql sqlite3 openssl pkg-config curl"

missing=""
for p in $PACKAGES; do
    status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
    [ "$status" = installed ] || missing="$missing $p"
done
missing=${missing# }

if [ -z "$missing" ]; then
    echo "deps: all $(echo $PACKAGES | wc -w) packages already installed"
    exit 0
fi

if [ "${1:-}" = "--check" ]; then
    echo "deps: missing: $missing"
    exit 1
fi

if [ "$(id -u)" -eq 0 ]; then
    SUDO=""
elif command -v sudo >/dev/null 2>&1; then
    SUDO="sudo"
else
    echo "deps: missing: $missing; run as root or install sudo" >&2
    exit 1
fi

# The postgresql package would create and start a system cluster; we only
# need its binaries (the tests make their own throw-away cluster), but a
# stock install is harmless, so let apt do its usual thing.
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
# shellcheck disable=SC2086
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
    --no-install-recommends $missing >/dev/null
echo "deps: installed $missing"
