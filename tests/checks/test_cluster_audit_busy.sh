#!/usr/bin/env bash
# The Galera audit of one SKU while OTHER SKUs are written: on a private
# stack (deploy/local/stack up --mysql galera3, inventory-i on galera-i) on
# a free port base in 26000-31900, always torn down. SKU CA-idle is seeded
# with 10 and never sold; SKU CA-busy is sold through the three instances
# (conditional-update) the whole time. Five audits of CA-idle during that
# load must each answer at once: `converged` true (every node holds stock 10
# and no ledger row of it), `consistent` true, within 1 s (the bound is
# 10 s). The cluster's write-set counters differ between nodes all the
# while (they apply CA-busy's write sets at their own pace): they say
# nothing about CA-idle. Exit 0 pass, 77 skip (Galera cannot start here),
# 1 fail.
set -u
# shellcheck source=tests/checks/stack_common.sh
. "$(dirname "$0")/stack_common.sh"
galera_check test_cluster_audit_busy
LOADGEN=$BUILD/bin/loadgen
[ -x "$LOADGEN" ] || fail "$LOADGEN missing: run make first"
private_stack cluster-audit 150
chmod 711 "$tmp"   # the nodes run as 'mysql' and must reach their folders
H='Content-Type: application/json'
inv() { echo "http://127.0.0.1:$((base + $1))"; }

st up --inventory 3 --orders 0 --redis-masters 0 --mysql galera3 > "$tmp/up.log" 2>&1 \
    || { tail -n 20 "$tmp/up.log"; skip "the Galera cluster did not start here (see above)"; }

curl -fsS -m 10 -XPUT -H "$H" "$(inv 1)/inventory/CA-idle" -d '{"stock":10}' >/dev/null || fail "seed CA-idle"
curl -fsS -m 10 -XPUT -H "$H" "$(inv 1)/inventory/CA-busy" -d '{"stock":1000000}' >/dev/null || fail "seed CA-busy"

"$LOADGEN" -t 2 -c 9 -d 45s --timeout 10s --progress off --json "$tmp/lg.json" -m POST -H "$H" \
    -b '{"sku":"CA-busy","qty":1,"guard":"conditional-update","order_id":"CA-busy-{seq}"}' \
    -u "$(inv 1)/inventory/deduct" -u "$(inv 2)/inventory/deduct" -u "$(inv 3)/inventory/deduct" \
    > "$tmp/lg.out" 2>&1 &
lg=$!
sleep 3   # the load is on

summary() {
    python3 -c 'import json,sys
a = json.load(sys.stdin)
print("converged", json.dumps(a.get("converged")), "consistent", json.dumps(a.get("consistent")),
      "wait_s", a.get("converge_wait_s"),
      "nodes", [(n.get("stock"), n.get("ledger_rows"), n.get("last_committed")) for n in a.get("nodes", [])])'
}
bad=0
for i in 1 2 3 4 5; do
    t0=$(date +%s.%N)
    curl -fsS -m 30 "$(inv $(( (i % 3) + 1 )))/inventory/CA-idle/audit" > "$tmp/audit.$i" || fail "audit $i"
    t1=$(date +%s.%N)
    echo "audit $i of the idle SKU during load: $(summary < "$tmp/audit.$i") (answered in $(python3 -c "print(round($t1 - $t0, 2))") s)"
    python3 -c 'import json,sys
a = json.load(sys.stdin)
ok = (a.get("converged") is True and a.get("consistent") is True and a.get("stock") == 10
      and len(a.get("nodes", [])) == 3 and (a.get("converge_wait_s") or 0) < 1
      and all(n.get("stock") == 10 and n.get("ledger_rows") == 0 for n in a["nodes"]))
sys.exit(0 if ok else 1)' < "$tmp/audit.$i" || bad=$((bad + 1))
    sleep 1
done
wait "$lg" || { cat "$tmp/lg.out"; fail "loadgen"; }
sold=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["by_status"].get("200", 0))' "$tmp/lg.json")
echo "CA-busy sold $sold meanwhile"
[ "$sold" -gt 50 ] || fail "the load on CA-busy sold only $sold: the audits were not made during writes"
[ "$bad" = 0 ] || fail "$bad of 5 audits of the idle SKU did not converge at once (see above)"
# The busy SKU, once its load is over, converges as well.
curl -fsS -m 30 "$(inv 2)/inventory/CA-busy/audit" > "$tmp/audit.busy" || fail "audit CA-busy"
echo "audit of the busy SKU after its load: $(summary < "$tmp/audit.busy")"
python3 -c 'import json,sys; a=json.load(sys.stdin); sys.exit(0 if a.get("converged") is True and a.get("consistent") is True else 1)' \
    < "$tmp/audit.busy" || fail "the busy SKU did not converge after its load: $(cat "$tmp/audit.busy")"
echo "$name: pass"
