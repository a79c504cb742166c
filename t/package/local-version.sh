#!/bin/bash
# support/local-version (issue 57, section 1): a local build's version
# without devscripts.  On a copy of debian/changelog: +NAME1, then
# +NAME2, each above the one it came from and below the next releases;
# a bad NAME changes nothing; the entry parses as dpkg reads it.  TAP
# lines ("ok - ...", "not ok - ..."), for make lint's support checks.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
mkdir -p "$T/support" "$T/debian"
cp "$ROOT/support/local-version" "$T/support/"
cp "$ROOT/debian/changelog" "$T/debian/"

ok() {  # DESCRIPTION COMMAND...
    local what=$1
    shift
    if "$@"; then echo "ok - $what"; else echo "not ok - $what"; fi
}
version() { (cd "$T" && dpkg-parsechangelog -S Version); }

v0=$(version)
v1=$(DEBFULLNAME='Ada Admin' DEBEMAIL=ada@example.org "$T/support/local-version" site "first fix")
ok "the first local version is $v0+site1 ($v1)" test "$v1" = "$v0+site1"
ok "debian/changelog says it" test "$(version)" = "$v1"
ok "it sorts above $v0" dpkg --compare-versions "$v1" gt "$v0"
below_next() {
    dpkg --compare-versions "$v1" lt "${v0%-*}-2" && dpkg --compare-versions "$v1" lt 0.9.1-1
}
entry_ok() {
    [ "$(cd "$T" && dpkg-parsechangelog -S Distribution)" = UNRELEASED ] \
        && (cd "$T" && dpkg-parsechangelog -S Changes) | grep -q "first fix" \
        && [ "$(cd "$T" && dpkg-parsechangelog -S Maintainer)" = "Ada Admin <ada@example.org>" ]
}
no_warning() { [ -z "$(cd "$T" && dpkg-parsechangelog 2>&1 >/dev/null)" ]; }
ok "and below the next releases (${v0%-*}-2, 0.9.1-1)" below_next
ok "its entry is UNRELEASED, with the note and DEBFULLNAME <DEBEMAIL>" entry_ok
ok "dpkg reads the changelog without a warning" no_warning
v2=$("$T/support/local-version" site "second fix")
ok "the next is $v0+site2 ($v2)" test "$v2" = "$v0+site2"
ok "it sorts above $v1" dpkg --compare-versions "$v2" gt "$v1"
before=$(md5sum <"$T/debian/changelog")
"$T/support/local-version" Site "bad" >/dev/null 2>&1
rc=$?
ok "a NAME that is not lower-case letters and digits: refused (exit $rc)" test "$rc" -eq 2
ok "... and the changelog unchanged" test "$(md5sum <"$T/debian/changelog")" = "$before"
