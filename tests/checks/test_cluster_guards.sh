#!/usr/bin/env bash
# Guards on a three-node MariaDB Galera cluster: a private stack
# (deploy/local/stack up --mysql galera3, inventory-i on galera-i) on a free
# port base in 26000-31900, always torn down. Three inventories on three
# nodes, 12 connections, 600 deductions of a stock of 200:
#   - conditional-update holds: sold exactly 200, no lost update, every node
#     converged to the same stock and ledger (the audit's `nodes`), the
#     conflicts Galera answered (1213) counted in lab_db_conflicts_total and
#     retried, no 500;
#   - none does not: the audit finds lost updates (or an oversell) on
#     converged nodes, and no 500 either (a conflict is a 503).
# conditional-update runs right after the nodes joined: before the ledger
# insert refused to run outside its transaction (lib/stock/store_ledger.c), the
# first run on a fresh cluster lost 1-3 updates in 5 of 8 tries here (a
# statement after a brute-force abort ran in autocommit).
# Exit 0 pass, 77 skip (Galera cannot start here), 1 fail.
set -u
# shellcheck source=tests/checks/stack_common.sh
. "$(dirname "$0")/stack_common.sh"
galera_check test_cluster_guards
LOADGEN=$BUILD/bin/loadgen
[ -x "$LOADGEN" ] || fail "$LOADGEN missing: run make first"
private_stack cluster 150
chmod 711 "$tmp"   # the nodes run as 'mysql' and must reach their folders
H='Content-Type: application/json'
inv() { echo "http://127.0.0.1:$((base + $1))"; }

st up --inventory 3 --orders 0 --redis-masters 0 --mysql galera3 > "$tmp/up.log" 2>&1 \
    || { tail -n 20 "$tmp/up.log"; skip "the Galera cluster did not start here (see above)"; }

conflicts() { # sum of lab_db_conflicts_total{guard="$1"} over the three instances
    local s=0 i v
    for i in 1 2 3; do
        v=$(curl -fsS -m 5 "$(inv "$i")/metrics" | awk -v g="lab_db_conflicts_total{guard=\"$1\"}" '$1 == g { print int($2) }')
        s=$((s + ${v:-0}))
    done
    echo "$s"
}
field() { # json key
    python3 -c 'import json,sys; v=json.load(sys.stdin).get(sys.argv[1]); print(json.dumps(v))' "$1"
}

run_guard() { # guard [sku] -> leaves $tmp/GUARD.audit and $tmp/GUARD.lg.json
    local g=$1 sku=${2:-CL-$1}
    curl -fsS -m 10 -XPUT -H "$H" "$(inv 1)/inventory/$sku" -d '{"stock":200}' >/dev/null || fail "seed $sku"
    c0=$(conflicts "$g")
    "$LOADGEN" -t 2 -c 12 -n 600 --timeout 10s --progress off --json "$tmp/$g.lg.json" -m POST \
        -H "$H" -b "{\"sku\":\"$sku\",\"qty\":1,\"guard\":\"$g\",\"order_id\":\"$sku-{seq}\"}" \
        -u "$(inv 1)/inventory/deduct" -u "$(inv 2)/inventory/deduct" -u "$(inv 3)/inventory/deduct" \
        > "$tmp/$g.lg.out" 2>&1 || { cat "$tmp/$g.lg.out"; fail "loadgen $g"; }
    curl -fsS -m 30 "$(inv 2)/inventory/$sku/audit" > "$tmp/$g.audit" || fail "audit $sku"
    c1=$(conflicts "$g")
    n500=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["by_status"].get("500", 0))' "$tmp/$g.lg.json")
    echo "$g on 3 nodes: $(python3 -c 'import json,sys; a=json.load(sys.stdin); print("sold", a["sold"], "oversold", a["oversold"], "lost", a["lost_updates"], "converged", a.get("converged"), "nodes", [(n.get("stock"), n.get("ledger_rows")) for n in a.get("nodes", [])])' < "$tmp/$g.audit"); conflicts $((c1 - c0)); answers $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["by_status"])' "$tmp/$g.lg.json")"
    [ "$n500" = 0 ] || fail "$g: $n500 answers 500 (a Galera error must be a 503)"
    [ "$(field converged < "$tmp/$g.audit")" = true ] || fail "$g: nodes did not converge: $(cat "$tmp/$g.audit")"
    [ "$(python3 -c 'import json,sys; print(len(json.load(sys.stdin)["nodes"]))' < "$tmp/$g.audit")" = 3 ] \
        || fail "$g: the audit does not list 3 nodes: $(cat "$tmp/$g.audit")"
}

twins() { # ledger rows of SKU $1 that share a `remaining`: a sale the stock row never saw
    mariadb --no-defaults -h127.0.0.1 -P$((base + 50)) -uroot -N -B -e "SELECT remaining, \
        GROUP_CONCAT(CONCAT(order_id, '@', instance, ' ', created_at)) FROM db_shopping.ledger \
        WHERE sku='$1' GROUP BY remaining HAVING COUNT(*) > 1" 2>&1
}
run_guard conditional-update
a=$tmp/conditional-update.audit
[ "$(field consistent < "$a")" = true ] || echo "rows of one remaining value: $(twins CL-conditional-update)"
[ "$(field sold < "$a")" = 200 ] || fail "conditional-update sold $(field sold < "$a") of 200"
[ "$(field lost_updates < "$a")" = 0 ] || fail "conditional-update lost updates: $(cat "$a")"
[ "$(field consistent < "$a")" = true ] || fail "conditional-update inconsistent: $(cat "$a")"
[ "$((c1 - c0))" -gt 0 ] || fail "conditional-update across 3 nodes saw no conflict (1213) at all"

run_guard none
a=$tmp/none.audit
[ "$(field consistent < "$a")" = false ] || fail "none on 3 nodes came out exact: $(cat "$a")"
lost=$(field lost_updates < "$a"); over=$(field oversold < "$a")
[ "$lost" != 0 ] || [ "$over" != 0 ] || fail "none: neither lost updates nor oversold: $(cat "$a")"
echo "$name: pass"
