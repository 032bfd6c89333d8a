#!/usr/bin/env bash
# The stack's fault verbs and the Sentinel-managed Redis, on a private stack
# (1 inventory, no order, no redlock masters, --redis-replica) on a free
# port base in 26000-31900, always torn down:
#   pause/resume/kill by the recorded pid, status shows "paused", start
#   brings a killed process back, down never hangs on a paused process;
#   inventory finds the master through Sentinel and follows a failover
#   (master killed, replica promoted) without a restart; etcd answers,
#   pauses, and keeps a key across kill -9 + start.
# Exit 0 pass, 77 skip (no redis-sentinel), 1 fail.
set -u
name=test_stack_faults
fail() { echo "$name: FAIL: $*"; for f in "${tmp:-/nonexistent}"/stack/logs/*.log "${tmp:-/nonexistent}"/stack/logs/*.err; do [ -f "$f" ] && { echo "--- $f"; tail -n 5 "$f"; }; done; exit 1; }
command -v redis-sentinel >/dev/null || { echo "$name: skip: redis-sentinel not installed (apt-get install redis-sentinel)"; exit 77; }
# shellcheck source=tests/checks/stack_common.sh
. "$(dirname "$0")/stack_common.sh"
private_stack faults 120
inv=http://127.0.0.1:$((base + 1))
H='Content-Type: application/json'

st up --inventory 1 --orders 0 --redis-masters 0 --redis-replica > "$tmp/up.log" 2>&1 \
    || { cat "$tmp/up.log"; fail "up --redis-replica"; }
for n in redis-replica sentinel-1 sentinel-2 sentinel-3; do
    st status | grep -q "^$n *up " || fail "$n not up: $(st status)"
done

# --- pause / resume / kill / start
st pause inventory-1 >/dev/null || fail "pause"
st status | grep -q '^inventory-1 *paused ' || fail "status does not show paused: $(st status)"
curl -fsS -m 1 "$inv/healthz" >/dev/null 2>&1 && fail "a paused inventory answered"
st resume inventory-1 >/dev/null || fail "resume"
curl -fsS -m 5 "$inv/healthz" >/dev/null || fail "resumed inventory does not answer"
st status | grep -q '^inventory-1 *up ' || fail "status after resume: $(st status)"
pid=$(cat "$tmp/stack/pids/inventory-1.pid")
st kill inventory-1 >/dev/null || fail "kill"
[ -e "$tmp/stack/pids/inventory-1.pid" ] && fail "kill left the pid file"
# gone, or a zombie waiting for whoever reaps orphans here
state=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)
[ -z "$state" ] || [ "$state" = Z ] || fail "killed pid $pid still runs (state $state)"
st status | grep -q '^inventory-1 *down ' || fail "status after kill: $(st status)"
st start inventory-1 >/dev/null || fail "start after kill"
curl -fsS -m 5 "$inv/healthz" >/dev/null || fail "restarted inventory does not answer"
st pause nosuch >/dev/null 2>&1 && fail "pause of an unknown name succeeded"

# --- etcd: a kind like the others (status, kill/start, pause), data kept
etcd=http://127.0.0.1:$((base + 56))
etcd_get() { curl -sS -m 2 -X POST "$etcd/v3/kv/range" -d "{\"key\":\"$(printf sf-key | base64)\"}"; }
st status | grep -q '^etcd *up ' || fail "etcd not up: $(st status)"
curl -fsS -m 2 -X POST "$etcd/v3/kv/put" \
    -d "{\"key\":\"$(printf sf-key | base64)\",\"value\":\"$(printf sf-val | base64)\"}" >/dev/null \
    || fail "etcd put through the JSON gateway"
ipid=$(cat "$tmp/stack/pids/inventory-1.pid")
tr '\0' '\n' < "/proc/$ipid/environ" | grep -qx "LAB_ETCD_ENDPOINTS=$etcd" \
    || fail "inventory-1 lacks LAB_ETCD_ENDPOINTS=$etcd"
st pause etcd >/dev/null || fail "pause etcd"
st status | grep -q '^etcd *paused ' || fail "status does not show etcd paused: $(st status)"
st resume etcd >/dev/null || fail "resume etcd"
st kill etcd >/dev/null || fail "kill etcd"
st status | grep -q '^etcd *down ' || fail "status after killing etcd: $(st status)"
st start etcd >/dev/null || fail "start etcd after kill"
etcd_get | grep -q "\"value\":\"$(printf sf-val | base64)\"" || fail "etcd lost a key across kill -9: $(etcd_get)"
[ "$(stat -c %a "$tmp/stack/etcd/data")" = 700 ] || fail "etcd data folder not private"
ss -ltnH | awk '{print $4}' | grep -E ":($((base + 56))|$((base + 57)))\$" | grep -qv '^127\.0\.0\.1:' \
    && fail "etcd listens beyond loopback"

# --- Sentinel: the inventory follows a failover by itself
sentinel=$((base + 66))
m=$(redis-cli -p "$sentinel" sentinel get-master-addr-by-name lab | tr '\n' ' ')
[ "$m" = "127.0.0.1 $((base + 60)) " ] || fail "Sentinel names '$m' as master"
curl -fsS -XPUT -H "$H" "$inv/inventory/SF-1" -d '{"stock":100}' >/dev/null || fail reseed
deduct() { curl -sS -m 5 -H "$H" "$inv/inventory/deduct" -d "{\"sku\":\"SF-1\",\"order_id\":\"$1\",\"guard\":\"redis-lock\"}"; }
deduct o1 | grep -q '"ok":true' || fail "redis-lock sale before the failover: $(deduct o1b)"
st kill redis >/dev/null || fail "kill redis"
ok=0 t0=$SECONDS
for i in $(seq 1 60); do
    if deduct "f$i" | grep -q '"ok":true'; then ok=1; break; fi
    sleep 0.5
done
[ "$ok" = 1 ] || fail "no redis-lock sale within 30 s of killing the master"
m=$(redis-cli -p "$sentinel" sentinel get-master-addr-by-name lab | tr '\n' ' ')
[ "$m" = "127.0.0.1 $((base + 65)) " ] || fail "after the failover Sentinel names '$m'"
echo "first sale on the promoted replica $((SECONDS - t0)) s after the kill"
# the sale went to the promoted replica, not to a restarted old master
[ "$(redis-cli -p $((base + 65)) role | head -1)" = master ] || fail "replica not promoted"

# --- down never hangs on a paused process
st pause inventory-1 >/dev/null || fail "pause before down"
st pause redis-replica >/dev/null || fail "pause replica before down"
t0=$SECONDS
st down >/dev/null || fail "down failed (or took more than 120 s)"
[ -n "$(ls "$tmp/stack/pids")" ] && fail "down left: $(ls "$tmp/stack/pids")"
echo "down with two paused processes took $((SECONDS - t0)) s"
echo "$name: pass"
