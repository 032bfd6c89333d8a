#!/usr/bin/env bash
# libFuzzer over the HTTP edge and request parsing (tests/fuzz/fuzz_edge.c)
# for a bounded time: builds build-fuzz/ with clang (make fuzz-build), runs
# FUZZ_CHECK_S seconds (default 20) from the committed seed corpus into a
# scratch folder. Exit 0 pass, 77 skip (no clang / libFuzzer), 1 fail (a
# crash or a property violation; the input is printed as hex).
set -u
name=test_fuzz_edge
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT" || exit 1
secs=${FUZZ_CHECK_S:-20}
command -v clang >/dev/null || { echo "$name: skip: clang not installed"; exit 77; }
echo 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n){(void)d;(void)n;return 0;}' \
    > /tmp/$name.$$.c
if ! clang -fsanitize=fuzzer /tmp/$name.$$.c -o /tmp/$name.$$ 2>/dev/null; then
    rm -f /tmp/$name.$$.c /tmp/$name.$$
    echo "$name: skip: clang has no libFuzzer runtime"; exit 77
fi
rm -f /tmp/$name.$$.c /tmp/$name.$$
if ! make -s fuzz-build > "/tmp/$name.$$.build" 2>&1; then
    tail -n 20 "/tmp/$name.$$.build"; rm -f "/tmp/$name.$$.build"
    echo "$name: FAIL: build"; exit 1
fi
rm -f "/tmp/$name.$$.build"
work=$(mktemp -d /tmp/lab-fuzz.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/corpus"
build-fuzz/fuzz/fuzz_edge -max_total_time="$secs" -timeout=10 -rss_limit_mb=1024 -max_len=4096 \
    -print_final_stats=1 -artifact_prefix="$work/" "$work/corpus" tests/fuzz/corpus \
    > "$work/log" 2>&1
rc=$?
runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/log")
if [ "$rc" -ne 0 ]; then
    grep -m5 -E 'property violated|ERROR:|runtime error' "$work/log"
    for f in "$work"/crash-* "$work"/leak-* "$work"/timeout-*; do
        [ -e "$f" ] && { echo "input $f:"; od -An -tx1 "$f" | head -n 8; }
    done
    echo "$name: FAIL after ${runs:-?} runs"
    exit 1
fi
echo "$name: pass, ${runs:-?} runs in ${secs}s"
