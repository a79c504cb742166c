#!/bin/bash
# Checks t/tools/ports.sh's and LessonsTest's port reservations: a port
# one suite picked is not handed to another suite before its server has
# bound it, and is free again once the suite that picked it has ended.
# Prints "ok - ..." / "not ok - ..." lines and "N passed, M failed"
# (make test's run_checks).
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
die() { echo "not ok - $*"; exit 1; }
. "$ROOT/t/tools/ports.sh"

passed=0 failed=0
check() {   # check NAME CONDITION-COMMAND...
    local name=$1; shift
    if "$@"; then echo "ok - $name"; passed=$((passed + 1))
    else echo "not ok - $name"; failed=$((failed + 1)); fi
}
# 0 when another process (any suite's) could reserve $1 now.
reservable() {
    perl -I"$ROOT/t/lib" -MLessonsTest::Ports=reserve_port \
        -e 'exit(defined reserve_port($ARGV[0]) ? 0 : 1)' -- "$1"
}
not() { ! "$@"; }

# A suite's shell: it picks a port and lives on (its server not started).
dir=$(mktemp -d) || exit 1
trap 'rm -rf "$dir"' EXIT
bash -c 'die() { echo "$*" >&2; exit 1; }; . "$1/t/tools/ports.sh"; pick_port >"$2/port"; exec sleep 30' _ \
    "$ROOT" "$dir" &
suite=$!
for _ in $(seq 1 100); do [ -s "$dir/port" ] && break; sleep 0.1; done
port=$(cat "$dir/port" 2>/dev/null)
check "pick_port gave a port" test -n "$port"
check "pick_port's port is held against every other suite" not reservable "$port"

# The test files' free_port: in a range of ten ports with eight held by
# another process, it hands out the other two, then none.
given=$(perl -I"$ROOT/t/lib" -MLessonsTest::Ports=reserve_ports -e '
    my ($base, @held) = reserve_ports(10);
    splice @held, 8;            # the last two are free again
    $ENV{LESSONS_TEST_PORTS} = $base . "-" . ($base + 9);
    require LessonsTest;
    my @given = sort map { LessonsTest::free_port() } 1 .. 2;
    my $more = eval { LessonsTest::free_port() };
    print "$base: @given", (defined $more ? " $more" : ""), "\n";' 2>&1)
base=${given%%:*}
[[ $base =~ ^[0-9]+$ ]] || base=0
check "free_port hands out no port another process holds ($given)" \
    test "$given" = "$base: $((base + 8)) $((base + 9))"

kill "$suite"; wait "$suite" 2>/dev/null
sleep 1.5      # the holder looks for its shell once a second
check "the port is free again once the suite that picked it has ended" reservable "$port"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
