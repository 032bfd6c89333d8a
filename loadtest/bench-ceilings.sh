# Section 9 of loadtest/bench (sourced there: its helpers, its stack): the
# machine's own ceilings next to the figures: the HTTP floor, sysbench's
# single-row update (loadtest/sysbench/flash_sale.lua), rawdb per MySQL
# guard, and redis-benchmark EVALSHA of the scripts each guard calls.
# shellcheck shell=bash
if section_on 9 ceilings; then
say ""
say "9. ceilings measured here, next to the figures (sales/s = section 4 when it ran): the HTTP floor"
say "   (build/bin/floor, wrk -t2 -c64), sysbench's single-row UPDATE ... SET stock=stock-1 WHERE id=1"
say "   AND stock>0 ($SVC_THREADS threads, autocommit, the stack's MariaDB), rawdb (the MySQL guards' own"
say "   statements, no HTTP), and Redis's own rate for each guard's scripts: redis-benchmark -c 16"
say "   EVALSHA of every script a short run of the guard called (MONITOR), replayed with its last"
say "   call's keys and arguments and a new order id each call, combined by the calls per sale"

ceil_floor() { # -> req/s of the HTTP floor (section 0's median when it ran)
    if [ -n "${fl_med:-}" ]; then echo "$fl_med"; return; fi
    local port=$((INV_PORT + 90)) pid i cmd
    "$BIN/floor" "$port" 2 > "$TMP/floor9.log" 2>&1 &
    pid=$!
    for ((i = 0; i < 50; i++)); do curl -fsS -m 1 "http://127.0.0.1:$port/" >/dev/null 2>&1 && break; sleep 0.1; done
    if [ "$HAVE_WRK" = 1 ]; then
        cmd=(wrk -t 2 -c 64 -d "${SECS}s" "http://127.0.0.1:$port/livez")
        show "${cmd[@]}"
        "${cmd[@]}" 2>&1 | awk '/^Requests\/sec:/ {print $2}'
    else
        cmd=("$LOADGEN" -t 2 -c 64 -d "${SECS}s" --progress off --json "$TMP/floor9.json" "http://127.0.0.1:$port/livez")
        show "${cmd[@]}"
        "${cmd[@]}" >/dev/null 2>&1 && jq '.rps | round' "$TMP/floor9.json"
    fi
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
}
ceil_sysbench() { # -> updates/s of the single-row flash-sale update, or a reason
    command -v sysbench >/dev/null || { echo "n/a (sysbench not installed)"; return; }
    mariadb -h 127.0.0.1 -P "$MYSQL_PORT" -u root -e "CREATE DATABASE IF NOT EXISTS bench_ceiling" ||
        { echo "n/a (no database)"; return; }
    local sb=(sysbench "$ROOT/loadtest/sysbench/flash_sale.lua" --db-driver=mysql --mysql-host=127.0.0.1
              --mysql-port="$MYSQL_PORT" --mysql-user=root --mysql-db=bench_ceiling --threads="$SVC_THREADS"
              --time="$SECS")
    show "${sb[@]}" run
    if ! "${sb[@]}" prepare > "$TMP/sb.out" 2>&1 || ! "${sb[@]}" run >> "$TMP/sb.out" 2>&1; then
        echo "n/a (sysbench failed: $(tail -n 1 "$TMP/sb.out"))"
        return
    fi
    "${sb[@]}" cleanup >/dev/null 2>&1 || true
    sed -n 's/^ *transactions: *[0-9]* *(\([0-9.]*\) per sec.*/\1/p' "$TMP/sb.out" | awk '{printf "%.0f\n", $1}'
}
ceil_rawdb() { # guard -> ops/s of rawdb (section 2's median when it ran)
    if [ -n "${RAW_MED[$1]:-}" ]; then echo "${RAW_MED[$1]}"; return; fi
    local cmd=("$RAWDB" --mode "$1" --threads "$SVC_THREADS" --duration "${SECS}s" --mysql-port "$MYSQL_PORT")
    [ "${SHOW_CMD:-0}" = 1 ] && show "${cmd[@]}"
    "${cmd[@]}" 2>&1 | sed -n 's/.*ops_per_s=\([0-9.]*\).*/\1/p'
}
ceil_capture() { # guard -> "port calls sha" per script its sales called; sales in $TMP/ceil.json
    local g=$1 sku="B9-$$-$1" p pids=()
    curl -fsS -m 10 -X PUT -H "Content-Type: application/json" \
        ${LAB_ADMIN_TOKEN:+-H "Authorization: Bearer $LAB_ADMIN_TOKEN"} "$INV/inventory/$sku" \
        -d '{"stock":1000000000}' >/dev/null || return 1
    for p in "${REDIS_PORTS[@]}"; do
        redis-cli -p "$p" monitor > "$TMP/mon-$g-$p" 2>/dev/null &
        pids+=($!)
    done
    sleep 0.3
    "$LOADGEN" -t 1 -c 4 -n 200 --progress off --json "$TMP/ceil.json" -m POST -H 'Content-Type: application/json' \
        -b "{\"sku\":\"$sku\",\"order_id\":\"b9-$$-$g-{seq}\",\"guard\":\"$g\"}" "$INV/inventory/deduct" \
        > "$TMP/ceil.out" 2>&1 || true
    sleep 0.5   # what follows the answers: redis-stream's flush, lock releases
    kill "${pids[@]}" 2>/dev/null || true
    wait "${pids[@]}" 2>/dev/null || true
    for p in "${REDIS_PORTS[@]}"; do
        python3 "$ROOT/loadtest/tools/script_calls.py" "$TMP/mon-$g-$p" "$TMP/scripts-$p" "b9-$$-$g-" |
            while read -r calls sha; do echo "$p $calls $sha"; done
    done
}
ceil_script_rate() { # port sha -> EVALSHA calls/s (redis-benchmark), its arguments from the capture
    local p=$1 sha=$2 args=() dir=$TMP/scripts-$1
    mapfile -d '' -t args < "$dir/$sha.args"
    [ -f "$dir/$sha.lua" ] && redis-cli -p "$p" -x script load < "$dir/$sha.lua" >/dev/null
    local cmd=(redis-benchmark -p "$p" -c 16 -n $((SECS * 10000)) -r 1000000000 -q EVALSHA "$sha" "${args[@]}")
    [ "${SHOW_CMD:-0}" = 1 ] && show "${cmd[@]}"
    "${cmd[@]}" 2>&1 | tr '\r' '\n' | sed -n 's/.*: \([0-9.]*\) requests per second.*/\1/p' | tail -n 1
}
ceil_redis() { # guard -> tsv: the scripts' ceiling in sales/s, and "sha8 calls/sale @ rate/s ..."
    local g=$1 p calls sha rate sales detail="" inv=0 first=1
    if ! command -v redis-benchmark >/dev/null || ! command -v python3 >/dev/null; then printf 'n/a\t-\n'; return; fi
    ceil_capture "$g" > "$TMP/ceil.calls" || { printf 'n/a\tno capture\n'; return; }
    sales=$(jq '.by_status["200"] // 0' "$TMP/ceil.json" 2>/dev/null || echo 0)
    if [ ! -s "$TMP/ceil.calls" ] || [ "$sales" -le 0 ]; then printf -- '-\t-\n'; return; fi
    while read -r p calls sha; do
        rate=$(SHOW_CMD=$first ceil_script_rate "$p" "$sha")
        first=0
        [ -n "$rate" ] || continue
        inv=$(awk -v i="$inv" -v c="$calls" -v s="$sales" -v r="$rate" 'BEGIN {print i + c / s / r}')
        # a script on a redlock master is named with its port
        detail+=$(awk -v c="$calls" -v s="$sales" -v r="$rate" -v h="${sha:0:8}" -v p="$p" -v main="$REDIS_PORT" \
            'BEGIN {printf "%s %.2f/sale @ %.0f/s", h (p == main ? "" : ":" p), c / s, r}')"; "
    done < "$TMP/ceil.calls"
    printf '%s\t%s\n' "$(awk -v i="$inv" 'BEGIN {if (i > 0) printf "%.0f", 1 / i; else print "n/a"}')" "${detail%; }"
}

declare -p RAW_MED >/dev/null 2>&1 || declare -A RAW_MED=()   # section 2's, when it ran
FLOOR9=$(ceil_floor)
SB9=$(ceil_sysbench)
say "   HTTP floor: ${FLOOR9:-n/a} req/s; sysbench single-row update: $SB9 updates/s"
say "$(printf '   %-20s %9s %9s %7s %9s %7s %9s %7s   %s' guard 'sales/s' rawdb 'x' sysbench 'x' 'redis' 'x' 'Redis scripts: sha calls/sale @ EVALSHA/s')"
first_raw=1
for g in "${GUARDS[@]}"; do
    sat=${SAT[$g]:-} raw="-" rd="-" det="-"
    for x in "${RAW_GUARDS[@]}"; do
        [ "$x" = "$g" ] || continue
        raw=$(SHOW_CMD=$first_raw ceil_rawdb "$g")
        first_raw=0
    done
    IFS=$'\t' read -r rd det < <(ceil_redis "$g") || true
    sbr=$SB9
    [[ "$sbr" =~ ^[0-9]+$ ]] || sbr="-"
    xr=- xs=- xd=-
    if [ -n "$sat" ]; then xr=$(ratio "$sat" "${raw:-0}") xs=$(ratio "$sat" "$sbr") xd=$(ratio "$sat" "${rd:-0}"); fi
    say "$(printf '   %-20s %9s %9s %7s %9s %7s %9s %7s   %s' "$g" "${sat:--}" "${raw:--}" "$xr" \
        "$sbr" "$xs" "${rd:--}" "$xd" "${det:--}")"
done
say "   (x = sales/s over that ceiling; sysbench's row has no ledger and one statement per sale, so it"
say "    bounds every guard that writes MySQL per sale; a replayed lock script meets a held lock, so a"
say "    lock guard's Redis figure is an upper bound)"
fi
