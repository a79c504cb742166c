#!/bin/bash
# Run the libFuzzer harnesses (t/fuzz/fuzz.mk builds them): each for
# FUZZ_TIME seconds (default 60) from its seeds (t/fuzz/corpus/NAME) and
# the corpus earlier runs grew (build/fuzz/corpus/NAME), with its
# dictionary (t/fuzz/NAME.dict).  First every input of
# t/fuzz/regress/NAME runs once.  One line per harness: executions,
# edges covered, crashes; the whole output in build/fuzz/NAME.log.
#
#   t/fuzz/run.sh [NAME...]      (default: every harness)
#
# With INTEGRATION_COUNTS set (make test), appends "passed failed" to it.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT" || exit 1
TIME=${FUZZ_TIME:-60}
LINE='%-4s  %-24s %5d tests%s\n'

make -s --no-print-directory fuzz-build || exit 1
names=("$@")
if [ ${#names[@]} -eq 0 ]; then
    for f in t/fuzz/fuzz_*.c; do
        n=${f##*/fuzz_}; names+=("${n%.c}")
    done
fi

total_fail=0
for name in "${names[@]}"; do
    bin=build/fuzz/fuzz_$name
    log=build/fuzz/$name.log
    corpus=build/fuzz/corpus/$name
    crashes=build/fuzz/crashes
    mkdir -p "$corpus" "$crashes"
    : >"$log"
    fail=0 why=""
    # Regression inputs: each must run clean.
    if [ -d "t/fuzz/regress/$name" ] && ls "t/fuzz/regress/$name"/* >/dev/null 2>&1; then
        if ! "$bin" "t/fuzz/regress/$name"/* >>"$log" 2>&1; then
            fail=1 why=", a regression input fails (t/fuzz/regress/$name)"
        fi
    fi
    dict=()
    [ -f "t/fuzz/$name.dict" ] && dict=(-dict="t/fuzz/$name.dict")
    if [ $fail -eq 0 ]; then
        ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1} \
        UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
            "$bin" -max_total_time="$TIME" -print_final_stats=1 -timeout=10 \
                -rss_limit_mb=2048 "${dict[@]}" \
                -artifact_prefix="$crashes/$name-" "$corpus" "t/fuzz/corpus/$name" \
                >>"$log" 2>&1
        rc=$?
        [ $rc -ne 0 ] && fail=1 why=", crashed (exit $rc; input in $crashes, output in $log)"
    fi
    execs=$(awk '/^stat::number_of_executed_units:/ { print $NF }' "$log" | tail -n 1)
    edges=$(grep -o 'cov: [0-9]*' "$log" | tail -n 1 | awk '{ print $2 }')
    corp=$(ls "$corpus" | wc -l)
    info=" (${execs:-0} execs, ${edges:-0} edges, corpus $corp, ${TIME} s)"
    if [ $fail -eq 0 ]; then
        printf "$LINE" PASS "fuzz $name" 1 "$info"
        [ -n "${INTEGRATION_COUNTS:-}" ] && echo "1 0" >>"$INTEGRATION_COUNTS"
    else
        total_fail=1
        printf "$LINE" FAIL "fuzz $name" 1 "$why$info"
        grep -E 'ERROR: |SUMMARY: |runtime error|^    #[0-9]+ ' "$log" | head -n 30 | sed 's/^/    /'
        [ -n "${INTEGRATION_COUNTS:-}" ] && echo "0 1" >>"$INTEGRATION_COUNTS"
    fi
done
exit $total_fail
