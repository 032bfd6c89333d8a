# Section 8 of loadtest/bench (sourced there: its helpers, its stack): every
# guard on a catalogue whose SKUs are drawn from a Zipf law, s = 1.0, at
# each size of BENCH_CATALOGUE (default 1, 1,000 and 100,000 SKUs).
# shellcheck shell=bash
if section_on 8 catalogue; then
read -r -a CAT_SIZES <<< "${BENCH_CATALOGUE:-1 1000 100000}"
for n in "${CAT_SIZES[@]}"; do
    if ! [[ "$n" =~ ^[1-9][0-9]{0,6}$ ]] || [ "$n" -gt 1000000 ]; then
        echo "bench: BENCH_CATALOGUE: sizes 1..1000000, got '$n'" >&2; exit 2
    fi
done
CAT_STOCK=1000000000
say ""
say "8. a catalogue: every guard on N SKUs drawn from a Zipf law (s = 1.0: loadgen {zipf:N:1.0}),"
say "   2 instances, closed loop, ${CELL}s a cell, connections as in 4; each catalogue seeded once"
say "   (deploy/local/stack seed-catalogue, stock $CAT_STOCK each, 10 segments). Per cell: sales/s,"
say "   p99, service CPU µs/sale (inventory processes), MySQL rows touched per sale (Handler_update +"
say "   Handler_write), Redis keys and bytes per SKU the cell added (DBSIZE, INFO used_memory of the main"
say "   Redis, divided by N: noise of a few kB at small N). growth = the largest catalogue's figure /"
say "   the smallest's (target for sales/s >= 0.80 of the one-SKU rate)"

cat_redis() { # -> "used_memory keys" of the main Redis
    local mem keys
    mem=$(redis-cli -p "$REDIS_PORT" info memory 2>/dev/null | tr -d '\r' | sed -n 's/^used_memory://p')
    keys=$(redis-cli -p "$REDIS_PORT" dbsize 2>/dev/null)
    echo "${mem:-0} ${keys:-0}"
}
# MariaDB 10.11 has no Innodb_rows_* counters: the handler's row writes and
# updates count the same rows (a SHOW STATUS adds none, measured).
cat_rows() { # -> rows updated + inserted so far
    mariadb -h 127.0.0.1 -P "$MYSQL_PORT" -u root -N -B -e \
        "SHOW GLOBAL STATUS WHERE Variable_name IN ('Handler_update', 'Handler_write')" 2>/dev/null |
        awk '{t += $2} END {print t + 0}'
}
cat_seed() { # n -> tsv: seconds, Redis bytes per SKU, keys per SKU (every guard's seeded keys)
    local n=$1 m0 k0 m1 k1 t1=$SECONDS
    read -r m0 k0 < <(cat_redis)
    local cmd=("$ROOT/deploy/local/stack" seed-catalogue "C$n-" "$n" "$CAT_STOCK" --dir "$STACK")
    show "${cmd[@]}"
    LAB_BUILD=$BUILD "${cmd[@]}" > "$TMP/seedcat.out" 2>&1 || { cat "$TMP/seedcat.out" >&2; return 1; }
    read -r m1 k1 < <(cat_redis)
    awk -v s=$((SECONDS - t1)) -v m=$((m1 - m0)) -v k=$((k1 - k0)) -v n="$n" \
        'BEGIN {printf "%d\t%.0f\t%.1f\n", s, m / n, k / n}'
}
cat_cell() { # guard n -> tsv: sales/s p99 svc-µs/sale rows/sale keys/SKU bytes/SKU other
    local g=$1 n=$2 i urls=()
    for ((i = 0; i < 2; i++)); do urls+=(-u "http://127.0.0.1:$((INV_PORT + i))/inventory/deduct"); done
    local cmd=("$LOADGEN" -t "$LGT" -c "$(conns_of "$g")" -d "${CELL}s" --progress off --json "$TMP/cat.json"
               -m POST -H 'Content-Type: application/json'
               -b "{\"sku\":\"C$n-{zipf:$n:1.0}\",\"order_id\":\"b8-$$-$g-$n-{seq}\",\"guard\":\"$g\"}" "${urls[@]}")
    [ "${SHOW_CMD:-0}" = 1 ] && show "${cmd[@]}"
    local m0 k0 w0 a0 m1 k1 w1 a1
    read -r m0 k0 < <(cat_redis)
    w0=$(cat_rows) a0=$(ticks "${PIDS_INV[@]}")
    "${cmd[@]}" > "$TMP/cat.out" 2>&1 || { cat "$TMP/cat.out" >&2; return 1; }
    a1=$(ticks "${PIDS_INV[@]}") w1=$(cat_rows)
    read -r m1 k1 < <(cat_redis)
    jq -r --argjson a $((a1 - a0)) --argjson hz "$HZ" --argjson w $((w1 - w0)) --argjson n "$n" \
          --argjson k $((k1 - k0)) --argjson m $((m1 - m0)) '
        (.by_status["200"] // 0) as $s
        | [($s / .duration_s | round), .latency_ms.p99,
           (if $s > 0 then ($a * 1e6 / $hz / $s | round) else "n/a" end),
           (if $s > 0 then ($w / $s * 100 | round / 100) else "n/a" end),
           ($k / $n * 100 | round / 100), ($m / $n | round),
           ([.by_status | to_entries[] | select(.key != "200") | "\(.key):\(.value)"] | join(" "))
           | if . == "" then "-" else . end] | @tsv' "$TMP/cat.json"
}

declare -A CAT_RATE CAT_P99 CAT_CPU CAT_ROWS CAT_KEYS CAT_MEM CAT_OTH
for n in "${CAT_SIZES[@]}"; do
    if ! IFS=$'\t' read -r secs mem keys < <(cat_seed "$n"); then
        say "   $n SKUs: the seed failed (see above); its cells are skipped"
        continue
    fi
    say "$(printf '   seeded %7s SKUs in %4ss: Redis %6s bytes and %5s keys per SKU (all guards'"'"' seeded state)' "$n" "$secs" "$mem" "$keys")"
    first=1
    for g in "${GUARDS[@]}"; do
        v1="" v2="" v3="" v4="" v5="" v6="" v7=""
        IFS=$'\t' read -r v1 v2 v3 v4 v5 v6 v7 < <(SHOW_CMD=$first cat_cell "$g" "$n") || true
        first=0
        CAT_RATE[$g|$n]=${v1:-n/a} CAT_P99[$g|$n]=${v2:-n/a} CAT_CPU[$g|$n]=${v3:-n/a} CAT_ROWS[$g|$n]=${v4:-n/a}
        CAT_KEYS[$g|$n]=${v5:-n/a} CAT_MEM[$g|$n]=${v6:-n/a} CAT_OTH[$g|$n]=${v7:--}
    done
done
small=${CAT_SIZES[0]} large=${CAT_SIZES[${#CAT_SIZES[@]} - 1]}
say "$(printf '   %-20s %7s %9s %8s %8s %9s %9s %10s   %s' guard N 'sales/s' 'p99 ms' 'svc µs' 'rows/sale' 'keys/SKU' 'bytes/SKU' 'other answers')"
for g in "${GUARDS[@]}"; do
    for n in "${CAT_SIZES[@]}"; do
        say "$(printf '   %-20s %7s %9s %8s %8s %9s %9s %10s   %s' "$g" "$n" "${CAT_RATE[$g|$n]:-n/a}" "${CAT_P99[$g|$n]:-n/a}" \
            "${CAT_CPU[$g|$n]:-n/a}" "${CAT_ROWS[$g|$n]:-n/a}" "${CAT_KEYS[$g|$n]:-n/a}" "${CAT_MEM[$g|$n]:-n/a}" "${CAT_OTH[$g|$n]:--}")"
    done
    if [ "$small" != "$large" ]; then
        x=$(ratio "${CAT_RATE[$g|$large]:-0}" "${CAT_RATE[$g|$small]:-0}")
        say "$(printf '   %-20s growth %s -> %s SKUs: sales/s x%s (target >= 0.80: %s), svc µs/sale x%s, rows/sale x%s' "$g" "$small" "$large" \
            "$x" "$(verdict "$x" '>=' 0.8)" "$(ratio "${CAT_CPU[$g|$large]:-0}" "${CAT_CPU[$g|$small]:-0}")" \
            "$(ratio "${CAT_ROWS[$g|$large]:-0}" "${CAT_ROWS[$g|$small]:-0}")")"
    fi
done
say "   (a guard that batches the sales of one SKU, batched-update, redis-decr's group commit,"
say "    redis-stream's coalescing, gets smaller batches as the sales spread; a lock guard's queue"
say "    per SKU gets shorter; redis-stream's flusher writes that land after a cell are not in its"
say "    rows/sale; keys and bytes per SKU over a cell include the keys its sales leave, e.g. orders)"
fi
