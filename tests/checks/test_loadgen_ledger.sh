#!/usr/bin/env bash
# loadgen's success count equals the ledger's sold count on a real run
# against the test stack (tests/run's, both inventory instances), for a
# correct guard (conditional-update: exactly the stock) and for `none`
# (every 200 is a ledger row, oversold or not).
# Exit 0 pass, 77 skip (no stack in the environment), 1 fail.
set -u
name=test_loadgen_ledger
fail() { echo "$name: FAIL: $*"; exit 1; }
[ -n "${LAB_INVENTORY_URLS:-}" ] || { echo "$name: skip: LAB_INVENTORY_URLS not set (run via tests/run)"; exit 77; }
command -v jq >/dev/null || { echo "$name: skip: jq not installed"; exit 77; }
ROOT=${LAB_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
BUILD=${LAB_BUILD:-build}
case "$BUILD" in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
LOADGEN=$BUILD/bin/loadgen
[ -x "$LOADGEN" ] || fail "$LOADGEN missing"

tmp=$(mktemp -d) || fail mktemp
trap 'rm -rf "$tmp"' EXIT
IFS=, read -r -a urls <<< "$LAB_INVENTORY_URLS"
first=${urls[0]}
targets=()
for u in "${urls[@]}"; do targets+=(-u "$u/inventory/deduct"); done

for guard in conditional-update none; do
    sku="CHK-LG-$guard-$$"
    stock=300
    curl -fsS -m 10 -X PUT -H "Content-Type: application/json" "$first/inventory/$sku" -d "{\"stock\":$stock}" >/dev/null \
        || fail "seeding $sku"
    body="{\"sku\":\"$sku\",\"order_id\":\"chk-lg-$$-$guard-{seq}\",\"guard\":\"$guard\",\"hold_ms\":1}"
    timeout 120 "$LOADGEN" -t 2 -c 16 -n 500 --progress off --json "$tmp/lg.json" \
        -m POST -H 'Content-Type: application/json' -b "$body" "${targets[@]}" > "$tmp/lg.out" 2>&1 \
        || fail "loadgen ($guard) exited $?: $(tail -n 3 "$tmp/lg.out" | tr '\n' ' ')"
    ok=$(jq '[.by_status | to_entries[] | select(.key == "200") | .value] | add // 0' "$tmp/lg.json")
    total=$(jq '.requests' "$tmp/lg.json")
    audit=$(curl -fsS -m 10 "$first/inventory/$sku/audit") || fail "audit of $sku"
    sold=$(jq '.sold' <<< "$audit")
    echo "$guard: loadgen 200s $ok of $total, ledger sold $sold ($audit)"
    [ "$total" = 500 ] || fail "$guard: loadgen answered $total of 500 requests"
    [ "$ok" = "$sold" ] || fail "$guard: loadgen counted $ok successes, the ledger holds $sold"
    if [ "$guard" = conditional-update ]; then
        [ "$sold" = "$stock" ] || fail "conditional-update sold $sold of $stock"
        [ "$(jq '.consistent' <<< "$audit")" = true ] || fail "conditional-update inconsistent: $audit"
        n409=$(jq '.by_status["409"] // 0' "$tmp/lg.json")
        [ "$n409" = $((500 - stock)) ] || fail "expected $((500 - stock)) answers 409, got $n409"
    fi
done
echo "$name: pass"
