#!/bin/bash
# libjwt's other build (issue 22).  Debian builds libjwt twice: with
# OpenSSL (libjwt-dev, which the module is built and shipped with) and
# with GnuTLS (libjwt-gnutls-dev, which conflicts with it).  From 1.16 on
# the GnuTLS build verifies PS256/384/512, where Debian 13's OpenSSL
# build (1.17) does not; so only there can the module's PS* path be
# proven.  This runs the token units and the token suites against it
# without installing it: its runtime library, unpacked under
# build/jwt-flavor/, is loaded under the OpenSSL build's file name (the
# same source and version, so the same ABI) through LD_LIBRARY_PATH, and
# the module's own probe must then find PS* verified.
#
#   t/release/flavor.sh     (make test-release runs it, in the other
#                            release's root; make jwt-flavor-test alone)
#
# Where the libjwt in use is older than 1.16 (Debian 12) no build of it
# names PS*: one SKIP line.  With INTEGRATION_COUNTS=FILE appends
# "passed failed skipped" to FILE, as t/tools/integration.sh does.
set -uo pipefail

SRC=$(cd "$(dirname "$0")/../.." && pwd)
cd "$SRC" || exit 1
NAME="libjwt gnutls"
UNITS="test_jwtcaps test_key test_jwks test_token test_keysource"
SUITES="t/api/pss.t t/api/configtest.t t/api/auth_alg.t t/api/token_edges.t t/api/jwks.t"
DIR=$SRC/build/jwt-flavor
START=$(date +%s)

line() { printf '%-4s  %-24s %5d tests%s\n' "$@"; }
counts() { [ -n "${INTEGRATION_COUNTS:-}" ] && echo "$*" >>"$INTEGRATION_COUNTS"; return 0; }
fail() { counts 0 1; line FAIL "$NAME" 0 " ($*)"; exit 1; }
as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

version=$(pkg-config --modversion libjwt 2>/dev/null) || fail "no libjwt: run t/tools/deps.sh"
if ! pkg-config --atleast-version=1.16 libjwt; then
    counts 0 0
    line SKIP "$NAME" 0 " (libjwt $version names no PS*: no build of it verifies them)"
    exit 0
fi
[ -f build/mod_lessons.so ] || fail "build/mod_lessons.so not found: run make first"

# The OpenSSL build's runtime package and file name, and its twin.
so=$(ldd build/mod_lessons.so | awk '$1 ~ /^libjwt/ { print $3; exit }')
soname=$(ldd build/mod_lessons.so | awk '$1 ~ /^libjwt/ { print $1; exit }')
[ -n "$so" ] || fail "the module does not link libjwt"
pkg=$(dpkg -S "$(readlink -f "$so")" 2>/dev/null | cut -d: -f1 | head -n 1)
[ -n "$pkg" ] || fail "no package owns $so"
pkgver=$(dpkg-query -W -f='${Version}' "$pkg")
twin=${pkg/libjwt/libjwt-gnutls}

rm -rf "$DIR" && mkdir -p "$DIR/root" "$DIR/lib" || fail "cannot make $DIR"
(cd "$DIR" && apt-get download "$twin=$pkgver" >"$DIR/download.log" 2>&1) \
    || fail "apt-get download $twin=$pkgver failed: $(tail -n 1 "$DIR/download.log")"
deb=$(ls "$DIR"/*.deb)
# Its dependencies (GnuTLS) are installed; it is not (it conflicts).
missing=()
for dep in $(dpkg-deb -f "$deb" Depends | tr ',' '\n' | sed 's/[ (|].*//; s/^ *//'); do
    case $dep in ''|libjwt*) continue ;; esac
    dpkg-query -W -f='${Status}' "$dep" 2>/dev/null | grep -q 'ok installed' || missing+=("$dep")
done
if [ ${#missing[@]} -gt 0 ]; then
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        "${missing[@]}" >"$DIR/install.log" 2>&1 \
        || fail "cannot install ${missing[*]}: $(tail -n 1 "$DIR/install.log")"
fi
dpkg-deb -x "$deb" "$DIR/root" || fail "cannot unpack $deb"
lib=$(find "$DIR/root" -name 'libjwt-gnutls.so.*' -type f | head -n 1)
[ -n "$lib" ] || fail "$deb holds no libjwt-gnutls.so"
cp "$lib" "$DIR/lib/$soname"

# Prove the swap: the loader takes the twin, and the probe finds PS*.
got=$(LD_LIBRARY_PATH=$DIR/lib ldd build/unit/test_jwtcaps | awk '$1 ~ /^libjwt/ { print $3 }')
[ "$got" = "$DIR/lib/$soname" ] || fail "the loader took $got, not $DIR/lib/$soname"

passed=0 failed=0 skipped=0
for t in $UNITS; do
    log=$DIR/$t.log
    LD_LIBRARY_PATH=$DIR/lib "build/unit/$t" >"$log" 2>&1
    rc=$?
    p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test(s)\./\1/p' "$log" | tail -n 1)
    s=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) test(s), listed below:/\1/p' "$log" | tail -n 1)
    f=$(sed -n 's/^\[  FAILED  \] \([^ ]*: \)\{0,1\}\([0-9]*\) test(s), listed below:/\2/p' "$log" | tail -n 1)
    p=${p:-0} s=${s:-0} f=${f:-0}
    [ "$rc" -ne 0 ] && [ "$f" -eq 0 ] && f=1
    passed=$((passed + p)) failed=$((failed + f)) skipped=$((skipped + s))
    [ "$f" -eq 0 ] || { echo "  $t failed (all output in $log):"; grep -E '^\[  (FAILED|  ERROR) ' "$log" | head -n 20 | sed 's/^/    /'; }
done
if ! grep -q '^\[       OK \] test_pss_where_libjwt_verifies_it' "$DIR/test_token.log"; then
    failed=$((failed + 1))
    echo "  libjwt's GnuTLS build $version did not verify PS256 through the module (test_token.log)"
fi
counts "$passed" "$failed" "$skipped"
x=""; [ "$skipped" -gt 0 ] && x=", $skipped skipped"
if [ "$failed" -eq 0 ]; then
    line PASS "$NAME units" "$passed" " ($version$x)"
else
    line FAIL "$NAME units" $((passed + failed)) ", $failed failed"
fi

# The token suites with the module on the twin, on SQLite.
# shellcheck disable=SC2086
LESSONS_TEST_LIBDIR=$DIR/lib LESSONS_TEST_LABEL="$NAME integration" \
    t/tools/integration.sh sqlite3 $SUITES
rc=$?
echo "$NAME: $(( $(date +%s) - START )) s"
[ "$failed" -eq 0 ] && [ "$rc" -eq 0 ]
