#!/usr/bin/env bash
# The stack's Redis pair after a Sentinel failover, on a private stack (1 inventory, no order, no redlock masters,
# --redis-replica) on a free port base in 26000-31900, always torn down:
#   - both Redis data nodes run with the same append-only durability
#     (LAB_REDIS_FSYNC), so a promoted replica keeps an answered write
#     across a kill -9 and a restart;
#   - 'down' then 'up --redis-replica' in a folder where a failover
#     happened starts the roles the Sentinels remember: the master they name
#     takes writes (no READONLY), nothing written after the failover is lost,
#     and a redis-lock sale goes through.
# Exit 0 pass, 77 skip (no redis-sentinel), 1 fail.
set -u
name=test_stack_redis_roles
fail() {
    echo "$name: FAIL: $*"
    for f in "${tmp:-/nonexistent}"/stack/logs/*.log; do [ -f "$f" ] && { echo "--- $f"; tail -n 5 "$f"; }; done
    exit 1
}
command -v redis-sentinel >/dev/null || { echo "$name: skip: redis-sentinel not installed (apt-get install redis-sentinel)"; exit 77; }
# shellcheck source=tests/checks/stack_common.sh
. "$(dirname "$0")/stack_common.sh"
private_stack roles 120 LAB_REDIS_FSYNC=always
inv=http://127.0.0.1:$((base + 1))
H='Content-Type: application/json'
rport=$((base + 60)) qport=$((base + 65)) sentinel=$((base + 66))
rc() { redis-cli -h 127.0.0.1 -p "$@"; }
master_port() { rc "$sentinel" sentinel get-master-addr-by-name lab 2>/dev/null | sed -n 2p; }
deduct() { curl -sS -m 5 -H "$H" "$inv/inventory/deduct" -d "{\"sku\":\"RR-1\",\"order_id\":\"$1\",\"guard\":\"redis-lock\"}"; }

st up --inventory 1 --orders 0 --redis-masters 0 --redis-replica > "$tmp/up.log" 2>&1 \
    || { cat "$tmp/up.log"; fail "up --redis-replica"; }

# --- item 14: the replica is as durable as the master
for p in "$rport" "$qport"; do
    a=$(rc "$p" config get appendonly | sed -n 2p) f=$(rc "$p" config get appendfsync | sed -n 2p)
    [ "$a/$f" = yes/always ] || fail "Redis on $p runs appendonly=$a appendfsync=$f, want yes/always"
done

# --- a failover: master killed, replica promoted
ok=0
for _ in $(seq 1 50); do
    [ "$(rc "$qport" info replication | tr -d '\r' | sed -n 's/^master_link_status://p')" = up ] && { ok=1; break; }
    sleep 0.2
done
[ "$ok" = 1 ] || fail "replica never linked to the master"
rc "$rport" set before-failover 1 >/dev/null
# Replication is asynchronous: the write must have reached the replica
# before the master dies, or a loaded machine loses it by design.
[ "$(rc "$rport" wait 1 5000)" = 1 ] || fail "the replica did not acknowledge before-failover within 5 s"
st kill redis >/dev/null || fail "kill redis"
ok=0
for _ in $(seq 1 100); do
    [ "$(master_port)" = "$qport" ] && [ "$(rc "$qport" role | head -1)" = master ] && { ok=1; break; }
    sleep 0.3
done
[ "$ok" = 1 ] || fail "no failover to the replica within 30 s (Sentinel names $(master_port))"
[ "$(rc "$qport" set after-failover 1)" = OK ] || fail "the promoted replica refused a write"

# the promoted replica keeps an answered write across kill -9 + start
st kill redis-replica >/dev/null || fail "kill redis-replica"
st start redis-replica >/dev/null || fail "start redis-replica"
[ "$(rc "$qport" get after-failover)" = 1 ] \
    || fail "the promoted replica lost an answered write across kill -9 (no AOF?)"

# --- item 11: down, then up in the same folder
st down >/dev/null || fail down
st up --inventory 1 --orders 0 --redis-masters 0 --redis-replica > "$tmp/up2.log" 2>&1 \
    || { cat "$tmp/up2.log"; fail "second up --redis-replica"; }
m=""
for _ in $(seq 1 50); do m=$(master_port); [ -n "$m" ] && break; sleep 0.2; done
out=$(rc "$m" set after-restart 1 2>&1)
[ "$out" = OK ] || fail "the master Sentinel names ($m) refused a write after down/up: $out"
for k in before-failover after-failover; do
    [ "$(rc "$m" get "$k")" = 1 ] || fail "key $k lost across the failover and down/up (master $m)"
done
other=$rport; [ "$m" = "$rport" ] && other=$qport
ok=0
for _ in $(seq 1 50); do
    [ "$(rc "$other" role | head -1)" = slave ] && [ "$(rc "$other" get after-restart)" = 1 ] && { ok=1; break; }
    sleep 0.2
done
[ "$ok" = 1 ] || fail "the other Redis ($other) is not a replica of $m: $(rc "$other" role | tr '\n' ' ')"
curl -fsS -XPUT -H "$H" "$inv/inventory/RR-1" -d '{"stock":10}' >/dev/null || fail reseed
out=$(deduct r1)
echo "$out" | grep -q '"ok":true' || fail "redis-lock sale after down/up: $out"
echo "$name: pass"
