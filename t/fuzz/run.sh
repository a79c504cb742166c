#!/bin/bash
# Run the libFuzzer harnesses (t/fuzz/fuzz.mk builds them): each for
# FUZZ_TIME seconds (default 60) from its seeds (t/fuzz/corpus/NAME) and
# the corpus earlier runs grew (build/fuzz/corpus/NAME), with its
# dictionary (t/fuzz/NAME.dict).  First every input of
# t/fuzz/regress/NAME runs once.  One line per harness: executions,
# edges covered, crashes; the whole output in build/fuzz/NAME.log.
# FUZZ_JOBS harnesses run at once (default: the CPUs).
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

# One harness: its line (and on failure the lines that say why) in
# build/fuzz/NAME.result, its counts in build/fuzz/NAME.count.
fuzz_one() {
    local name=$1 bin=build/fuzz/fuzz_$1 log=build/fuzz/$1.log
    local corpus=build/fuzz/corpus/$1 crashes=build/fuzz/crashes
    local out=build/fuzz/$1.result fail=0 why="" rc execs edges corp info
    mkdir -p "$corpus" "$crashes"
    : >"$log"
    # Regression inputs: each must run clean.
    if [ -d "t/fuzz/regress/$name" ] && ls "t/fuzz/regress/$name"/* >/dev/null 2>&1; then
        if ! "$bin" "t/fuzz/regress/$name"/* >>"$log" 2>&1; then
            fail=1 why=", a regression input fails (t/fuzz/regress/$name)"
        fi
    fi
    local dict=()
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
        printf "$LINE" PASS "fuzz $name" 1 "$info" >"$out"
        echo "1 0" >"build/fuzz/$name.count"
    else
        { printf "$LINE" FAIL "fuzz $name" 1 "$why$info"
          grep -E 'ERROR: |SUMMARY: |runtime error|^    #[0-9]+ ' "$log" | head -n 30 | sed 's/^/    /'
        } >"$out"
        echo "0 1" >"build/fuzz/$name.count"
    fi
}

# As many harnesses at once as there are CPUs (FUZZ_JOBS): each is one
# process on one CPU for its FUZZ_TIME, so a harness gets as many
# executions as alone, in a fraction of the wall time.
JOBS=${FUZZ_JOBS:-$(nproc)}
running=0
for name in "${names[@]}"; do
    rm -f "build/fuzz/$name.result" "build/fuzz/$name.count"
    fuzz_one "$name" &
    running=$((running + 1))
    if [ "$running" -ge "$JOBS" ]; then
        wait -n
        running=$((running - 1))
    fi
done
wait

total_fail=0
for name in "${names[@]}"; do
    if [ -f "build/fuzz/$name.result" ]; then
        cat "build/fuzz/$name.result"
        read -r p f <"build/fuzz/$name.count"
    else
        printf "$LINE" FAIL "fuzz $name" 1 " (it did not finish)"
        p=0 f=1
    fi
    [ "$f" -eq 0 ] || total_fail=1
    [ -n "${INTEGRATION_COUNTS:-}" ] && echo "$p $f" >>"$INTEGRATION_COUNTS"
done
exit $total_fail
