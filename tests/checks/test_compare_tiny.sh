#!/usr/bin/env bash
# loadtest/compare end to end on a tiny scenario (none and
# conditional-update, 1 and 2 instances, stock 50, 200 requests) with its
# OWN embedded stack in a temp folder on a free port base (26000-31900,
# below the kernel's ephemeral range and apart from tests/run's 20000-25900),
# always torn down. Checks the four report files and the verdicts.
# Exit 0 pass, 77 skip (no python3/jq), 1 fail.
set -u
name=test_compare_tiny
fail() { echo "$name: FAIL: $*"; [ -f "${tmp:-/nonexistent}/out/compare.log" ] && tail -n 20 "$tmp/out/compare.log"; exit 1; }
command -v python3 >/dev/null || { echo "$name: skip: python3 not installed"; exit 77; }
command -v jq >/dev/null || { echo "$name: skip: jq not installed"; exit 77; }
# shellcheck source=tests/checks/stack_common.sh
. "$(dirname "$0")/stack_common.sh"
[ -x "$BUILD/bin/loadgen" ] || fail "$BUILD/bin/loadgen missing"

tmp=$(mktemp -d /tmp/lab-compare.XXXXXX) || fail mktemp
cleanup() {
    "$ROOT/deploy/local/stack" down --dir "$tmp/stack" >/dev/null 2>&1 || true
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
base=$(free_base) || fail "no free port base in 26000-31900"

cat > "$tmp/tiny.conf" <<'CONF'
name        = tiny
description = check: none and conditional-update, 1 and 2 instances
guards      = none conditional-update
instances   = 1 2
stock       = 50
requests    = 200
concurrency = 16
hold_ms     = 1
CONF
t0=$SECONDS
# (stack_common.sh dropped tests/run's own stack addresses.)
LAB_PORT_BASE="$base" LAB_BUILD="$BUILD" LAB_BIN_DIR="$BUILD/bin" LAB_MYSQL_FLUSH=2 LAB_WAIT_S=60 \
    timeout 300 python3 "$ROOT/loadtest/compare" --scenario "$tmp/tiny.conf" \
    --out "$tmp/out" --dir "$tmp/stack" > "$tmp/compare.out" 2>&1
rc=$?
cat "$tmp/compare.out"
[ "$rc" = 0 ] || fail "compare exited $rc"
echo "compare took $((SECONDS - t0)) s on port base $base"

for f in results.json results.csv report.md report.html; do
    [ -s "$tmp/out/$f" ] || fail "$f missing or empty"
done
r=$tmp/out/results.json
[ "$(jq '.cells | length' "$r")" = 4 ] || fail "expected 4 cells, got $(jq '.cells | length' "$r")"
[ "$(jq '[.cells[] | select(.status != "ok")] | length' "$r")" = 0 ] || fail "a cell did not run: $(jq -c '[.cells[] | select(.status != "ok") | {label, reason}]' "$r")"
for n in 1 2; do
    c=$(jq -c ".cells[] | select(.guard == \"conditional-update\" and .instances == $n)" "$r")
    [ -n "$c" ] || fail "no conditional-update cell on $n instances"
    [ "$(jq '.consistent' <<< "$c")" = true ] || fail "conditional-update x$n not consistent: $c"
    [ "$(jq '.sold' <<< "$c")" = 50 ] || fail "conditional-update x$n sold $(jq '.sold' <<< "$c"), expected 50"
    [ "$(jq '.successes' <<< "$c")" = 50 ] || fail "conditional-update x$n: loadgen saw $(jq '.successes' <<< "$c") successes"
    c=$(jq -c ".cells[] | select(.guard == \"none\" and .instances == $n)" "$r")
    # `none` must at least be reported faithfully: verdict text matches the numbers.
    [ "$(jq '.sold == .successes' <<< "$c")" = true ] || fail "none x$n: sold != successes: $c"
done
# every cell carries the history checker's verdict, from its own history file
[ "$(jq '[.cells[] | select(.checker.model == "counter" and (.checker.ops > 200))] | length' "$r")" = 4 ] \
    || fail "a cell lacks the history checker: $(jq -c '[.cells[] | {label, checker: (.checker | {valid, ops})}]' "$r")"
for f in $(jq -r '.cells[].checker.file' "$r"); do
    [ -s "$tmp/out/$f" ] || fail "history file $f missing"
done
[ "$(jq '[.cells[] | select(.guard == "conditional-update" and .checker.valid == true and .valid == true)] | length' "$r")" = 2 ] \
    || fail "conditional-update not valid by the history checker: $(jq -c '[.cells[] | .checker.reason]' "$r")"
# none oversells at stock 50 with 16 connections: caught, with a window of
# operations and the order_ids that cannot be ordered
bad=$(jq '[.cells[] | select(.guard == "none" and .checker.valid == false and (.checker.window | length) > 1
           and (.checker.violations.not_linearizable | length) > 0)] | length' "$r")
[ "$bad" -ge 1 ] || fail "no none cell caught invalid with a window: $(jq -c '[.cells[] | select(.guard == "none") | .checker | {valid, reason}]' "$r")"
grep -q 'class="history"' "$tmp/out/report.html" || fail "report.html draws no history window"
[ "$(jq '.seed > 0' "$r")" = true ] || fail "results.json has no seed"
grep -q "^compare: seed $(jq '.seed' "$r") " "$tmp/compare.out" || fail "compare did not print its seed"
# shellcheck disable=SC2016  # backquotes are Markdown here
grep -q '^| `conditional-update` | consistent | consistent |$' "$tmp/out/report.md" \
    || fail "report.md verdict row for conditional-update missing: $(grep conditional "$tmp/out/report.md" | head -2)"
[ "$(head -1 "$tmp/out/results.csv" | cut -d, -f1-3)" = "cell,label,guard" ] || fail "results.csv header"
[ "$(wc -l < "$tmp/out/results.csv")" = 5 ] || fail "results.csv should have 4 rows"
grep -q '<svg' "$tmp/out/report.html" || fail "report.html has no <svg>"
# the stack compare started is gone
if [ -d "$tmp/stack/pids" ] && [ -n "$(ls "$tmp/stack/pids")" ]; then
    fail "compare left processes: $(ls "$tmp/stack/pids")"
fi
echo "$name: pass"
