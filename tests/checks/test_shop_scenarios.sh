#!/usr/bin/env bash
# loadtest/compare's cart, limits and retry scenarios (lab/shop.py), tiny, on
# their OWN embedded stack in a temp folder on a free port base, always torn
# down. Measured verdicts must match the expected ones:
#   cart: conditional-update and for-update held (audits exact, 200 units =
#     ledger per SKU), line_check per-line broke (oversold), lock_order
#     as-given held with its deadlocks/timeouts counted;
#   limits: conditional-update held (over_limit 0), batched-update refused
#     (no limits), limit_check separate broke (over_limit > 0);
#   retry: no key and new ids broke (orders > buyers), Idempotency-Key held
#     (orders = ledger = buyers).
# Exit 0 pass, 77 skip (no python3/jq), 1 fail.
set -u
name=test_shop_scenarios
fail() { echo "$name: FAIL: $*"; exit 1; }
command -v python3 >/dev/null || { echo "$name: skip: python3 not installed"; exit 77; }
command -v jq >/dev/null || { echo "$name: skip: jq not installed"; exit 77; }
# shellcheck source=tests/checks/stack_common.sh
. "$(dirname "$0")/stack_common.sh"

tmp=$(mktemp -d /tmp/lab-shop.XXXXXX) || fail mktemp
cleanup() {
    "$ROOT/deploy/local/stack" down --dir "$tmp/stack" >/dev/null 2>&1 || true
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
base=$(free_base) || fail "no free port base in 26000-31900"

run() {   # run NAME: compare the scenario in $tmp/NAME.conf into $tmp/NAME
    LAB_PORT_BASE="$base" LAB_BUILD="$BUILD" LAB_BIN_DIR="$BUILD/bin" LAB_MYSQL_FLUSH=2 LAB_WAIT_S=60 \
        timeout 300 python3 "$ROOT/loadtest/compare" --scenario "$tmp/$1.conf" --seed 7 \
        --out "$tmp/$1" --dir "$tmp/stack" > "$tmp/$1.out" 2>&1
    local rc=$?
    cat "$tmp/$1.out"
    [ "$rc" = 0 ] || { tail -n 20 "$tmp/$1/compare.log" 2>/dev/null; fail "compare $1 exited $rc"; }
}
cell() { jq -c ".cells[] | select(.label == \"$2\")" "$tmp/$1/results.json"; }
expect() {   # expect SCENARIO LABEL VERDICT: expected and measured both VERDICT
    local c; c=$(cell "$1" "$2")
    [ "$(jq -r '.status' <<< "$c")" = ok ] || fail "$1 $2 did not run: $c"
    [ "$(jq -r '.expected + " " + .measured' <<< "$c")" = "$3 $3" ] \
        || fail "$1 $2: expected/measured $(jq -r '.expected + "/" + .measured' <<< "$c"), want $3: $(jq -c '.shop' <<< "$c")"
}

cat > "$tmp/cart.conf" <<'CONF'
name        = cart-tiny
kind        = cart
guards      = conditional-update for-update
variant     = conditional-update/per-line : guard=conditional-update line_check=per-line
variant     = for-update/as-given : guard=for-update lock_order=as-given hold_ms=20
instances   = 2
stock       = 15
requests    = 60
concurrency = 12
CONF
run cart
expect cart conditional-update held
expect cart for-update held
expect cart conditional-update/per-line broke
expect cart for-update/as-given held
[ "$(cell cart conditional-update/per-line | jq '.oversold')" -ge 1 ] || fail "per-line did not oversell"
[ "$(cell cart for-update/as-given | jq '.shop.deadlocks + .shop.lock_wait_timeouts + .shop.n503')" -ge 1 ] \
    || fail "as-given: no deadlock counted: $(cell cart for-update/as-given | jq -c .shop)"
[ "$(cell cart for-update | jq '.shop.deadlocks')" = 0 ] || fail "sorted for-update deadlocked"
grep -q '^## Carts' "$tmp/cart/report.md" || fail "report.md has no Carts table"

cat > "$tmp/limits.conf" <<'CONF'
name           = limits-tiny
kind           = limits
guards         = conditional-update batched-update
variant        = conditional-update/separate : guard=conditional-update limit_check=separate hold_ms=50
instances      = 2
stock          = 100
requests       = 48
concurrency    = 16
limit_per_user = 2
users          = 4
CONF
run limits
expect limits conditional-update held
expect limits batched-update refused
expect limits conditional-update/separate broke
[ "$(cell limits conditional-update | jq '.shop.ok')" = 8 ] || fail "4 users x limit 2 should buy 8: $(cell limits conditional-update | jq -c .shop)"
[ "$(cell limits conditional-update/separate | jq '.shop.over_limit')" -ge 1 ] || fail "separate: over_limit 0"
grep -q '^## Purchase limits' "$tmp/limits/report.md" || fail "report.md has no limits table"

cat > "$tmp/retry.conf" <<'CONF'
name              = retry-tiny
kind              = retry
variant           = no-key : guard=conditional-update retry=plain
variant           = new-ids : guard=conditional-update retry=new-ids
variant           = key : guard=conditional-update retry=key
instances         = 2
stock             = 5
requests          = 12
concurrency       = 12
hold_ms           = 300
retries           = 2
client_timeout_ms = 200
CONF
run retry
expect retry no-key broke
expect retry new-ids broke
expect retry key held
[ "$(cell retry key | jq '.shop.orders == 12 and .shop.twice == 0 and .shop.none == 0 and .shop.ledger == 12')" = true ] || fail "key: $(cell retry key | jq -c .shop)"
[ "$(cell retry no-key | jq '.shop.orders > 12 and .shop.twice > 0')" = true ] || fail "no-key: $(cell retry no-key | jq -c .shop)"
grep -q '^## Client retries' "$tmp/retry/report.md" || fail "report.md has no retries table"
if [ -d "$tmp/stack/pids" ] && [ -n "$(ls "$tmp/stack/pids")" ]; then
    fail "compare left processes: $(ls "$tmp/stack/pids")"
fi
echo "$name: pass"
