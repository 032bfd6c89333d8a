#!/usr/bin/env bash
# deploy/local/stack up --mysql galera3 on a private stack
# (3 inventory instances, no order, no redlock masters) on a free port base
# in 26000-31900, always torn down:
#   - three MariaDB Galera nodes, each Synced in a cluster of size 3, each
#     running as 'mysql'; inventory-i uses galera-i; 'status' shows the state;
#   - a write on one node is read on another (a sale through inventory-2 on
#     galera-2 after a reseed through inventory-1 on galera-1, read on
#     galera-3);
#   - a node killed with SIGKILL leaves a cluster of 2, 'start' brings it
#     back Synced with what was written meanwhile;
#   - 'down' then 'up' bootstraps from the node whose grastate.dat says
#     safe_to_bootstrap: 1 and keeps the data.
# Prints the times measured. Exit 0 pass, 77 skip (Galera cannot start
# here: no galera-4, rsync, mariadbd or 'mysql' user), 1 fail.
set -u
name=test_stack_galera
fail() {
    echo "$name: FAIL: $*"
    for f in "${tmp:-/nonexistent}"/stack/logs/galera-*.err "${tmp:-/nonexistent}"/stack/logs/*.log; do
        [ -f "$f" ] && { echo "--- $f"; tail -n 8 "$f"; }
    done
    exit 1
}
skip() { echo "$name: skip: $*"; exit 77; }
[ -f /usr/lib/galera/libgalera_smm.so ] || skip "Galera not installed (apt-get install galera-4)"
command -v rsync >/dev/null || skip "rsync not installed (the nodes' state transfer uses it)"
command -v mariadbd >/dev/null || skip "mariadbd not installed"
id mysql >/dev/null 2>&1 || skip "no 'mysql' user to run the nodes as"
[ "$(id -u)" = 0 ] || skip "the nodes' folders must be given to 'mysql': run as root"
# shellcheck source=tests/checks/stack_common.sh
. "$(dirname "$0")/stack_common.sh"
private_stack galera 150
chmod 711 "$tmp"   # the nodes run as 'mysql' and must reach their folders
up() { st up --inventory 3 --orders 0 --redis-masters 0 --mysql galera3; }
H='Content-Type: application/json'
node_port() { echo $((base + 50 + $1 - 1)); }
sql() { # node sql...
    local p; p=$(node_port "$1"); shift
    mariadb --no-defaults --connect-timeout=5 -h127.0.0.1 -P"$p" -uroot -N -B -e "$*" 2>&1
}
var() { sql "$1" "SHOW GLOBAL STATUS LIKE '$2'" | awk '{print $2}'; }
ms() { date +%s%3N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", (b - a) / 1000 }'; }

t0=$(ms)
up > "$tmp/up.log" 2>&1 || { cat "$tmp/up.log"; fail "up --mysql galera3"; }
t_up=$(secs "$t0" "$(ms)")
for i in 1 2 3; do
    [ "$(var "$i" wsrep_local_state_comment)" = Synced ] || fail "galera-$i not Synced: $(var "$i" wsrep_local_state_comment)"
    [ "$(var "$i" wsrep_cluster_size)" = 3 ] || fail "galera-$i sees cluster size $(var "$i" wsrep_cluster_size)"
    pid=$(cat "$tmp/stack/pids/galera-$i.pid")
    [ "$(stat -c %U "/proc/$pid")" = mysql ] || fail "galera-$i runs as $(stat -c %U "/proc/$pid"), not mysql"
    st status | grep -q "^galera-$i *up .*Synced, cluster size 3" || fail "status: $(st status)"
    ipid=$(cat "$tmp/stack/pids/inventory-$i.pid")
    tr '\0' ' ' < "/proc/$ipid/cmdline" | grep -q -- "--mysql-port $(node_port "$i") " \
        || fail "inventory-$i is not attached to galera-$i"
done
st status | grep -q '^mysql ' && fail "a single 'mysql' runs next to the cluster: $(st status)"

# --- a write on one node, read on another
curl -fsS -XPUT -H "$H" "http://127.0.0.1:$((base + 1))/inventory/GL-1" -d '{"stock":10}' >/dev/null \
    || fail "reseed through inventory-1 (galera-1)"
out=$(curl -sS -m 10 -H "$H" "http://127.0.0.1:$((base + 2))/inventory/deduct" \
      -d '{"sku":"GL-1","order_id":"gl-o1","guard":"conditional-update"}')
echo "$out" | grep -q '"ok":true' || fail "sale through inventory-2 (galera-2): $out"
got=$(sql 3 "SET SESSION wsrep_sync_wait=1; SELECT stock FROM db_shopping.inventory WHERE sku='GL-1'")
[ "$got" = 9 ] || fail "galera-3 reads stock '$got' after one sale of 10, want 9"

# --- a node killed with SIGKILL leaves, then rejoins
st kill galera-2 >/dev/null || fail "kill galera-2"
t0=$(ms)
for _ in $(seq 1 100); do [ "$(var 1 wsrep_cluster_size)" = 2 ] && break; sleep 0.3; done
[ "$(var 1 wsrep_cluster_size)" = 2 ] || fail "galera-1 still sees size $(var 1 wsrep_cluster_size) 30 s after the kill"
t_evict=$(secs "$t0" "$(ms)")
sql 1 "UPDATE db_shopping.inventory SET stock = 7 WHERE sku='GL-1'" >/dev/null
t0=$(ms)
st start galera-2 >/dev/null || fail "start galera-2 after kill"
t_rejoin=$(secs "$t0" "$(ms)")
[ "$(var 2 wsrep_local_state_comment)" = Synced ] || fail "galera-2 back but $(var 2 wsrep_local_state_comment)"
[ "$(var 2 wsrep_cluster_size)" = 3 ] || fail "galera-2 back in a cluster of $(var 2 wsrep_cluster_size)"
got=$(sql 2 "SET SESSION wsrep_sync_wait=1; SELECT stock FROM db_shopping.inventory WHERE sku='GL-1'")
[ "$got" = 7 ] || fail "the rejoined galera-2 reads stock '$got', want 7 (written while it was down)"

# --- down, then up: the node that may bootstraps
st down > /dev/null || fail down
safe=""
for i in 1 2 3; do
    grep -q '^safe_to_bootstrap: 1' "$tmp/stack/galera-$i/data/grastate.dat" 2>/dev/null && safe=$i
done
[ -n "$safe" ] || fail "no node has safe_to_bootstrap: 1 after a clean down"
t0=$(ms)
up > "$tmp/up2.log" 2>&1 || { cat "$tmp/up2.log"; fail "up after down"; }
t_restart=$(secs "$t0" "$(ms)")
pid=$(cat "$tmp/stack/pids/galera-$safe.pid")
tr '\0' ' ' < "/proc/$pid/cmdline" | grep -q -- --wsrep-new-cluster \
    || fail "galera-$safe (safe_to_bootstrap: 1) did not bootstrap the cluster"
for i in 1 2 3; do
    [ "$(var "$i" wsrep_cluster_size)" = 3 ] || fail "after down/up galera-$i sees size $(var "$i" wsrep_cluster_size)"
    [ "$(sql "$i" "SELECT stock FROM db_shopping.inventory WHERE sku='GL-1'")" = 7 ] || fail "galera-$i lost the row"
done
echo "fresh up (3 nodes Synced, whole stack): $t_up s; killed node evicted after $t_evict s;" \
     "rejoin (start to Synced): $t_rejoin s; up after down (bootstrap galera-$safe): $t_restart s"
echo "$name: pass"
