#!/usr/bin/env bash
# deploy/local/stack seed-catalogue PREFIX N STOCK [--guard G]: on a private
# stack (2 inventory instances, no order service), a catalogue of 2,000 SKUs
# is seeded in one call; MySQL holds exactly PREFIX1..PREFIX2000 at STOCK, a
# sample of them (first, last, spread) reads STOCK on both instances with
# every Redis-stock guard's counter at STOCK and a clean audit, and sells
# (one SKU busy with held sales during the seed is seeded again after them)
# under the Redis guards; a SKU that sold is back at STOCK with an empty
# ledger after a second seed; --guard other than segmented seeds one
# segment; bad arguments change nothing.
# Exit 0 pass, 1 fail.
set -u
name=test_seed_catalogue
fail() { echo "$name: FAIL: $*"; exit 1; }
# shellcheck source=tests/checks/stack_common.sh
. "$(dirname "$0")/stack_common.sh"
private_stack seedcat 300
st up --inventory 2 --orders 0 --redis-masters 0 > "$tmp/up.log" 2>&1 || fail "stack up: $(tail -n 5 "$tmp/up.log")"
inv1=http://127.0.0.1:$((base + 1)) inv2=http://127.0.0.1:$((base + 2)) mport=$((base + 50))
sql() { mariadb -h 127.0.0.1 -P "$mport" -u root -N -B -e "$1"; }
field() { curl -fsS -m 10 "$1/inventory/$2" | jq -r "$3"; }
N=2000 STOCK=7

# CAT-5 busy on both instances (a sale holding it 2.5 s): its PUT gets 409
# sku_busy wherever it lands, so the check in MySQL must find it and seed it
# again once the sales are done.
curl -fsS -m 10 -X PUT -H 'Content-Type: application/json' "$inv1/inventory/CAT-5" -d '{"stock":100}' >/dev/null ||
    fail "seed CAT-5"
for u in "$inv1" "$inv2"; do
    curl -sS -m 20 -o "$tmp/held-${u##*:}.json" -X POST -H 'Content-Type: application/json' "$u/inventory/deduct" \
        -d "{\"sku\":\"CAT-5\",\"qty\":1,\"order_id\":\"held-${u##*:}\",\"guard\":\"none\",\"hold_ms\":2500}" &
done
sleep 0.3
out=$(st seed-catalogue CAT- "$N" "$STOCK" 2>&1) || fail "seed-catalogue: $out"
echo "$name: $out"
wait
[[ "$out" == *"409:"* ]] || fail "no PUT met the held sales (409 sku_busy): '$out'"
[[ "$out" != *"0 retry round(s)"* ]] || fail "the busy SKU was not seeded again: '$out'"
got=$(sql "SELECT COUNT(*), SUM(stock = $STOCK AND initial = $STOCK), MIN(segments), MAX(segments)
           FROM db_shopping.inventory WHERE sku LIKE 'CAT-%'")
[ "$got" = "$N	$N	10	10" ] || fail "MySQL after the seed: count, at stock, segments = '$got', want '$N $N 10 10'"
[ "$(sql "SELECT COUNT(*) FROM db_shopping.inventory WHERE sku IN ('CAT-0', 'CAT-$((N + 1))')")" = 0 ] ||
    fail "a SKU outside 1..$N was seeded"

for i in 1 5 777 1500 "$N"; do
    sku=CAT-$i
    for u in "$inv1" "$inv2"; do
        v=$(field "$u" "$sku" '[.stock, .initial, .redis_stock, .stream_stock, (.segments | add)] | map(tostring) | join(" ")')
        [ "$v" = "$STOCK $STOCK $STOCK $STOCK $STOCK" ] ||
            fail "$sku on $u: stock initial redis_stock stream_stock sum(segments) = '$v', want $STOCK each"
    done
    c=$(curl -fsS -m 10 "$inv1/inventory/$sku/audit" | jq -r '[.consistent, .sold, .drift] | map(tostring) | join(" ")')
    [ "$c" = "true 0 0" ] || fail "$sku audit: consistent sold drift = '$c', want 'true 0 0'"
done

# The seeded state sells: one unit of CAT-1500 under each Redis-stock guard.
for g in redis-decr redis-stream segmented; do
    r=$(curl -sS -m 10 -X POST -H 'Content-Type: application/json' "$inv2/inventory/deduct" \
        -d "{\"sku\":\"CAT-1500\",\"qty\":1,\"order_id\":\"seedcat-$g\",\"guard\":\"$g\",\"hold_ms\":0}")
    [ "$(jq -r .ok <<< "$r")" = true ] || fail "a sale of CAT-1500 under $g: $r"
done
for ((t = 0; t < 50; t++)); do   # redis-stream's write reaches MySQL behind the answer
    [ "$(field "$inv1" CAT-1500 .stock)" = $((STOCK - 3)) ] && break
    sleep 0.1
done
[ "$(field "$inv1" CAT-1500 .stock)" = $((STOCK - 3)) ] || fail "CAT-1500 after 3 sales: stock $(field "$inv1" CAT-1500 .stock)"

# Seeding again (with --guard redis-decr) resets what sold, one segment each.
out=$(st seed-catalogue CAT- "$N" "$STOCK" --guard redis-decr 2>&1) || fail "second seed-catalogue: $out"
echo "$name: $out"
v=$(field "$inv1" CAT-1500 '[.stock, .initial, .redis_stock, .stream_stock, .segment_count] | map(tostring) | join(" ")')
[ "$v" = "$STOCK $STOCK $STOCK $STOCK 1" ] || fail "CAT-1500 after the second seed: '$v', want '$STOCK $STOCK $STOCK $STOCK 1'"
[ "$(sql "SELECT COUNT(*) FROM db_shopping.ledger WHERE sku LIKE 'CAT-%'")" = 0 ] || fail "ledger rows left after the reseed"
c=$(curl -fsS -m 10 "$inv1/inventory/CAT-1500/audit" | jq -r .consistent)
[ "$c" = true ] || fail "CAT-1500 audit after the reseed: consistent $c"

# Refused, nothing written.
for bad in "CAT- 0 5" "CAT- 1000001 5" "BAD/ 3 5" "CAT- 3 -1" "CAT- 3 1000000001" "CAT- 3" "X- 3 5 --guard nope"; do
    # shellcheck disable=SC2086  # the words of each case are its arguments
    if st seed-catalogue $bad > "$tmp/bad.log" 2>&1; then fail "seed-catalogue $bad accepted"; fi
    grep -q "^stack: " "$tmp/bad.log" || fail "seed-catalogue $bad: no clear message: $(cat "$tmp/bad.log")"
done
[ "$(sql "SELECT COUNT(*) FROM db_shopping.inventory WHERE sku LIKE 'X-%' OR sku LIKE 'BAD%'")" = 0 ] ||
    fail "a refused call seeded something"
echo "$name: pass"
