#!/usr/bin/env bash
# loadtest/compare's holds scenario, tiny (conditional-update and for-update
# plus the broken confirm_check none, 2 instances, stock 20, 40 buyers, ttl
# 1000 ms) on its OWN embedded stack in a temp folder on a free port base,
# always torn down. The guards that reserve must hold (audit exact, nothing
# stranded, every 200 confirm a ledger unit, late payers refused or served
# fresh units); confirm_check none must oversell. Then one hold-crash cell:
# inventory-1 killed (SIGKILL) with live holds, which inventory-2 confirms or
# expires: held, audit exact.
# Exit 0 pass, 77 skip (no python3/jq), 1 fail.
set -u
name=test_holds_scenario
fail() { echo "$name: FAIL: $*"; [ -f "${tmp:-/nonexistent}/out/compare.log" ] && tail -n 20 "$tmp/out/compare.log"; exit 1; }
command -v python3 >/dev/null || { echo "$name: skip: python3 not installed"; exit 77; }
command -v jq >/dev/null || { echo "$name: skip: jq not installed"; exit 77; }
# shellcheck source=tests/checks/stack_common.sh
. "$(dirname "$0")/stack_common.sh"
[ -x "$BUILD/bin/loadgen" ] || fail "$BUILD/bin/loadgen missing"

tmp=$(mktemp -d /tmp/lab-holds.XXXXXX) || fail mktemp
cleanup() {
    "$ROOT/deploy/local/stack" down --dir "$tmp/stack" >/dev/null 2>&1 || true
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
base=$(free_base) || fail "no free port base in 26000-31900"

cat > "$tmp/tiny.conf" <<'CONF'
name        = holds-tiny
description = check: two guards that reserve and the broken confirm
kind        = holds
guards      = conditional-update for-update redis-decr
variant     = confirm-none : guard=conditional-update confirm_check=none
instances   = 2
stock       = 20
requests    = 40
concurrency = 8
ttl_ms      = 1000
pay_pct     = 70
late_pct    = 10
CONF
t0=$SECONDS
LAB_PORT_BASE="$base" LAB_BUILD="$BUILD" LAB_BIN_DIR="$BUILD/bin" LAB_MYSQL_FLUSH=2 LAB_WAIT_S=60 \
    timeout 300 python3 "$ROOT/loadtest/compare" --scenario "$tmp/tiny.conf" --seed 7 \
    --out "$tmp/out" --dir "$tmp/stack" > "$tmp/compare.out" 2>&1
rc=$?
cat "$tmp/compare.out"
[ "$rc" = 0 ] || fail "compare exited $rc"
echo "compare took $((SECONDS - t0)) s on port base $base"
r=$tmp/out/results.json
[ "$(jq '.cells | length' "$r")" = 4 ] || fail "expected 4 cells, got $(jq '.cells | length' "$r")"
# redis-decr does not reserve: skipped with the reason, never run
[ "$(jq -r '.cells[] | select(.guard == "redis-decr") | .status' "$r")" = skipped ] \
    || fail "redis-decr should be skipped: $(jq -c '.cells[] | select(.guard == "redis-decr")' "$r")"
for g in conditional-update for-update; do
    c=$(jq -c ".cells[] | select(.label == \"$g\")" "$r")
    [ "$(jq -r '.status' <<< "$c")" = ok ] || fail "$g did not run: $c"
    h=$(jq -c '.holds' <<< "$c")
    [ "$(jq -r '.verdict' <<< "$h")" = held ] || fail "$g: measured $(jq -r '.verdict' <<< "$h"): $c"
    [ "$(jq '.oversold' <<< "$c")" = 0 ] || fail "$g oversold"
    [ "$(jq '.held' <<< "$h")" = 20 ] || fail "$g: expected the 20 units held at first: $h"
    [ "$(jq '.paid' <<< "$h")" = 14 ] || fail "$g: 70% of 20 = 14 should have paid: $h"
    [ "$(jq '.late' <<< "$h")" = 2 ] || fail "$g: 10% of 20 = 2 late payers: $h"
    [ "$(jq '.late_refused + .late_fresh' <<< "$h")" = 2 ] || fail "$g: a late payer neither refused nor fresh: $h"
    [ "$(jq '.late_stale' <<< "$h")" = 0 ] || fail "$g: a late payer confirmed its swept hold: $h"
    [ "$(jq '.answers_match and .exact and .live_after == 0 and .expired_unswept == 0' <<< "$h")" = true ] \
        || fail "$g: audit not exact: $h"
    # every unit given back was sold again (6 back, 20 refused buyers) or is in stock
    [ "$(jq '.sold + .stock_left' <<< "$c")" = 20 ] || fail "$g: sold + stock != 20: $c"
done
c=$(jq -c '.cells[] | select(.label == "confirm-none")' "$r")
h=$(jq -c '.holds' <<< "$c")
[ "$(jq -r '.verdict' <<< "$h")" = broke ] || fail "confirm_check none held: $c"
[ "$(jq '.oversold' <<< "$c")" -ge 1 ] || fail "confirm_check none did not oversell: $c"
[ "$(jq '.late_stale' <<< "$h")" = 2 ] || fail "confirm_check none: both late payers should confirm their swept hold: $h"
[ "$(jq '.late_confirms | length' <<< "$h")" -ge 1 ] || fail "the audit lists no late confirm: $h"
grep -q '^## Holds' "$tmp/out/report.md" || fail "report.md has no Holds table"
grep -q '^| confirm-none | 2 | 20 | 40 | 1000 |' "$tmp/out/report.md" || fail "report.md holds row for confirm-none"
grep -q 'table class="holds"' "$tmp/out/report.html" || fail "report.html has no holds table"
cat > "$tmp/crash.conf" <<'CONF'
name        = hold-crash-tiny
fault       = hold-crash
guards      = conditional-update
CONF
LAB_PORT_BASE="$base" LAB_BUILD="$BUILD" LAB_BIN_DIR="$BUILD/bin" LAB_MYSQL_FLUSH=2 LAB_WAIT_S=60 \
    timeout 300 python3 "$ROOT/loadtest/compare" --scenario "$tmp/crash.conf" --seed 7 \
    --out "$tmp/out2" --dir "$tmp/stack" > "$tmp/compare2.out" 2>&1
rc=$?
cat "$tmp/compare2.out"
[ "$rc" = 0 ] || fail "compare (hold-crash) exited $rc"
c=$(jq -c '.cells[0]' "$tmp/out2/results.json")
[ "$(jq -r '.expected + " " + .measured' <<< "$c")" = "held held" ] || fail "hold-crash: $c"
[ "$(jq -r '.events[0].what' <<< "$c")" = "kill -9 inventory-1 with live holds" ] || fail "hold-crash: no kill: $c"
h=$(jq -c '.holds' <<< "$c")
[ "$(jq '.held == 40 and .paid == 28 and .expired == 12 and .live_after == 0 and .expired_unswept == 0 and .exact and .answers_match' <<< "$h")" = true ] \
    || fail "hold-crash: holds not confirmed or expired through inventory-2: $h"
if [ -d "$tmp/stack/pids" ] && [ -n "$(ls "$tmp/stack/pids")" ]; then
    fail "compare left processes: $(ls "$tmp/stack/pids")"
fi
echo "$name: pass"
