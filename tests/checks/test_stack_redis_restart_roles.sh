#!/usr/bin/env bash
# A Redis master stopped and started again while Sentinel fails over to its
# replica (the `restart` fault cell's Redis step, made deterministic), on a
# private stack (1 inventory, no order, no redlock masters, --redis-replica)
# on a free port base in 26000-31900, always torn down. Twice (the master,
# then the promoted replica): `stop` the master, wait until a Sentinel
# reports the failover under way, `start` it at once. The stack must start
# it as a replica of the promoted one: at no moment may both Redis data
# nodes be masters (two masters each grant the same lock: redis-lock then
# has two holders of one SKU, lost updates), and once settled the master
# the Sentinels name takes writes and the other replicates it.
# Exit 0 pass, 77 skip (no redis-sentinel), 1 fail.
set -u
name=test_stack_redis_restart_roles
fail() {
    echo "$name: FAIL: $*"
    for f in "${tmp:-/nonexistent}"/stack/logs/redis*.log "${tmp:-/nonexistent}"/stack/logs/sentinel-1.log; do
        [ -f "$f" ] && { echo "--- $f"; tail -n 12 "$f"; }
    done
    exit 1
}
command -v redis-sentinel >/dev/null || { echo "$name: skip: redis-sentinel not installed (apt-get install redis-sentinel)"; exit 77; }
# shellcheck source=tests/checks/stack_common.sh
. "$(dirname "$0")/stack_common.sh"
private_stack restart-roles 150 LAB_REDIS_FSYNC=always
rport=$((base + 60)) qport=$((base + 65)) sentinel=$((base + 66))
rc() { redis-cli -h 127.0.0.1 -p "$@"; }
master_port() { rc "$sentinel" sentinel get-master-addr-by-name lab 2>/dev/null | sed -n 2p; }
flags() { # every Sentinel's flags for the master (only the failover's leader says failover_in_progress)
    local i
    for i in 0 1 2; do
        rc $((sentinel + i)) sentinel master lab 2>/dev/null | tr -d '\r' | sed -n '/^flags$/{n;p}'
    done | tr '\n' ' '
}
role() { timeout 1 redis-cli -h 127.0.0.1 -p "$1" role 2>/dev/null | head -1; }
name_of() { [ "$1" = "$rport" ] && echo redis || echo redis-replica; }

st up --inventory 1 --orders 0 --redis-masters 0 --redis-replica > "$tmp/up.log" 2>&1 \
    || { cat "$tmp/up.log"; fail "up --redis-replica"; }

linked() { # port of a replica -> 0 when its link to the master is up
    [ "$(rc "$1" info replication | tr -d '\r' | sed -n 's/^master_link_status://p')" = up ]
}

for round in 1 2; do
    m=$(master_port)
    other=$rport; [ "$m" = "$rport" ] && other=$qport
    ok=0
    for _ in $(seq 1 100); do linked "$other" && { ok=1; break; }; sleep 0.2; done
    [ "$ok" = 1 ] || fail "round $round: $(name_of "$other") never linked to the master $(name_of "$m")"
    t0=$(date +%s.%N)
    st stop "$(name_of "$m")" >/dev/null || fail "stop $(name_of "$m")"
    seen=""
    for _ in $(seq 1 200); do
        f=$(flags)
        case "$f" in *failover_in_progress*) seen=$f; break ;; esac
        [ "$(master_port)" = "$other" ] && { seen="switched"; break; }
        sleep 0.02
    done
    [ -n "$seen" ] || fail "round $round: no failover began within 10 s of the stop (flags: $(flags))"
    t1=$(date +%s.%N)
    st start "$(name_of "$m")" >/dev/null || fail "start $(name_of "$m")"
    t2=$(date +%s.%N)
    both=0
    for _ in $(seq 1 40); do   # 8 s: Sentinel looks at a known replica every 10 s at most
        [ "$(role "$rport")" = master ] && [ "$(role "$qport")" = master ] && both=$((both + 1))
        sleep 0.2
    done
    now=$(master_port)
    echo "round $round: stopped $(name_of "$m"); failover seen ($seen) after $(python3 -c "print(round($t1 - $t0, 2))") s; start took $(python3 -c "print(round($t2 - $t1, 2))") s; polls with two masters: $both of 40; Sentinel names $(name_of "$now"); roles: redis $(role "$rport"), redis-replica $(role "$qport")"
    [ "$both" = 0 ] || fail "round $round: both Redis data nodes were masters in $both polls after the start"
    [ "$now" = "$other" ] || fail "round $round: Sentinel names $(name_of "$now"), not the promoted $(name_of "$other")"
    [ "$(rc "$now" set "after-round-$round" 1)" = OK ] || fail "round $round: the master refused a write"
    ok=0
    for _ in $(seq 1 100); do
        [ "$(role "$m")" = slave ] && [ "$(rc "$m" get "after-round-$round")" = 1 ] && { ok=1; break; }
        sleep 0.2
    done
    [ "$ok" = 1 ] || fail "round $round: the restarted $(name_of "$m") does not replicate the master: $(rc "$m" role | tr '\n' ' ')"
done
echo "$name: pass"
