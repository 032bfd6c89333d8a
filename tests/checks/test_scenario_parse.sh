#!/usr/bin/env bash
# Scenario files: every shipped one parses; bad ones stop loadtest/compare
# with FILE:LINE: reason before any traffic (no stack needed).
# Exit 0 pass, 77 skip (no python3), 1 fail.
set -u
name=test_scenario_parse
fail() { echo "$name: FAIL: $*"; exit 1; }
command -v python3 >/dev/null || { echo "$name: skip: python3 not installed"; exit 77; }
ROOT=${LAB_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
compare=$ROOT/loadtest/compare
tmp=$(mktemp -d) || fail mktemp
trap 'rm -rf "$tmp"' EXIT

for f in "$ROOT"/loadtest/scenarios/*.conf; do
    out=$(python3 "$compare" --check "$f" 2>&1) || fail "shipped $f does not parse: $out"
done

# case: label | expected line | expected text | file body (\n-separated)
check_bad() {
    local label=$1 line=$2 want=$3 body=$4 f out rc
    f=$tmp/$label.conf
    printf '%b' "$body" > "$f"
    out=$(python3 "$compare" --check "$f" 2>&1)
    rc=$?
    [ "$rc" = 2 ] || fail "$label: exit $rc, expected 2 ($out)"
    [[ "$out" == *"$f:$line: "* ]] || fail "$label: expected '$f:$line:' in: $out"
    [[ "$out" == *"$want"* ]] || fail "$label: expected '$want' in: $out"
    echo "ok  $label -> ${out#compare: }"
}
check_bad no-equals     2 "expected 'key = value'" "guards = none\nstock 100\n"
check_bad unknown-key   3 "unknown key 'stok'"    "# c\nguards = none\nstok = 5\n"
check_bad not-a-number  2 "whole number"           "guards = none\nrequests = lots\n"
check_bad out-of-range  2 "instances must be 1..16" "guards = none\ninstances = 1 17\n"
check_bad hold-range    1 "hold_ms must be 0..10000" "hold_ms = 20000\nguards = none\n"
check_bad bad-path      2 "path must be direct or order" "guards = none\npath = sideways\n"
check_bad duplicate     3 "already set on line 2"  "guards = none\nstock = 1\nstock = 2\n"
check_bad all-plus      1 "'all' cannot be combined" "guards = all none\n"
check_bad variant-form  2 "variant needs 'LABEL : key=value"  "guards = none\nvariant = just-a-label\n"
check_bad variant-guard 2 "guard=NAME is required" "guards = none\nvariant = v1 : watchdog=false\n"
check_bad variant-pair  2 "expected key=value"     "guards = none\nvariant = v1 : guard=redis-lock watchdog\n"
check_bad variant-twice 3 "defined twice"          "guards = none\nvariant = v : guard=none\nvariant = v : guard=mutex\n"
check_bad reserved      2 "set by the runner"      "guards = none\nfield = order_id=x\n"
check_bad empty-value   2 "needs a value"          "guards = none\nrate =\n"
check_bad nothing       2 "nothing to run"         "# only\nstock = 5\n"
out=$(python3 "$compare" --check "$tmp/missing-file.conf" 2>&1)
[[ "$out" == *"$tmp/missing-file.conf:0: cannot read"* ]] || fail "missing file: $out"

# A good file with comments, lists, variants and fields expands as documented.
printf '%s\n' '# comment' 'name = t  # trailing comment' 'guards = none, mutex' 'instances = 1 2' \
    'field = lock_wait_ms=100' \
    'variant = rl/no-wd : guard=redis-lock watchdog=false hold_ms=250' > "$tmp/good.conf"
out=$(python3 "$compare" --check "$tmp/good.conf" 2>&1) || fail "good file rejected: $out"
[[ "$out" == *"ok (6 cells)"* ]] || fail "good file: expected 6 cells: $out"
echo "$name: pass"
