#!/usr/bin/env bash
# `deploy/local/stack start redis` returns only once Redis answers commands,
# not when its port is open: a Redis with a large append-only file listens
# while it loads and answers "LOADING" meanwhile, and a test (or a sale) sent
# then failed (test_rlock after test_replicas_ack's restart, in CI). On a
# private stack (1 inventory, no order, no redlock masters) on a free port
# base in 26000-31900, always torn down.
# Exit 0 pass, 1 fail.
set -u
name=test_stack_redis_ready
fail() { echo "$name: FAIL: $*"; exit 1; }
# shellcheck source=tests/checks/stack_common.sh
. "$(dirname "$0")/stack_common.sh"
private_stack ready 120 LAB_REDIS_FSYNC=always
rport=$((base + 60))
st up --inventory 1 --orders 0 --redis-masters 0 > "$tmp/up.log" 2>&1 || fail "stack up: $(tail -n 5 "$tmp/up.log")"

# About a million keys in the append-only file: a second or so of loading.
awk 'BEGIN { for (i = 0; i < 1000000; i++)
                 printf "*3\r\n$3\r\nSET\r\n$%d\r\nready:%d\r\n$32\r\nxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\r\n",
                        length("ready:" i), i }' \
    | redis-cli -h 127.0.0.1 -p "$rport" --pipe > "$tmp/pipe.log" 2>&1 || fail "fill: $(tail -n 3 "$tmp/pipe.log")"

for round in 1 2; do
    st stop redis >/dev/null || fail "stop redis"
    st start redis >/dev/null || fail "start redis"
    got=$(redis-cli -h 127.0.0.1 -p "$rport" ping 2>&1)
    [ "$got" = PONG ] || fail "round $round: right after 'stack start redis' Redis answered '$got', not PONG"
done
echo "$name: pass"
