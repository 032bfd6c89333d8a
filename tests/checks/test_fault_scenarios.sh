#!/usr/bin/env bash
# One run of each fault scenario (failover, pause, crash, restart) through
# loadtest/compare on a private stack with --redis-replica (free port base
# in 26000-31900, always torn down), asserting every cell's verdict. The
# windows are wide (hold_ms, leases, pause lengths in loadtest/lab/faultplan.py),
# so each verdict is the same on every run:
#   pause:    redis-lock loses an update; redlock refuses (lease_expired);
#             with fencing the stale write is fenced
#   crash:    redis-lock sells again after its TTL; setnx-then-expire
#             killed between its two commands never does (buyers give up)
#   failover: redis-lock has two holders (lost update); redlock is exact;
#             replicas_ack=1 is exact
#   restart:  conditional-update: 0 oversold, 0 lost, 503s (the other
#             guards: make demo SCENARIO=faults; kept out for test time)
#   and three cells of faults-all (every guard x every fault): SIGTERM of
#   a redis-stream instance strands nothing; a reseed on the other
#   instance refuses redis-lock's stale holder; kill -9 of a redis-stream
#   instance: its unflushed entries are claimed, drift 0
# Cells whose guard or option is not in this build (zookeeper, fencing,
# replicas_ack) must be reported skipped, and are checked once they run.
# Exit 0 pass, 77 skip (no python3/jq/redis-sentinel), 1 fail.
set -u
name=test_fault_scenarios
fail() { echo "$name: FAIL: $*"; [ -f "${tmp:-/nonexistent}/out-$cur/compare.log" ] && tail -n 30 "$tmp/out-$cur/compare.log"; exit 1; }
command -v python3 >/dev/null || { echo "$name: skip: python3 not installed"; exit 77; }
command -v jq >/dev/null || { echo "$name: skip: jq not installed"; exit 77; }
command -v redis-sentinel >/dev/null || { echo "$name: skip: redis-sentinel not installed"; exit 77; }
# shellcheck source=tests/checks/stack_common.sh
. "$(dirname "$0")/stack_common.sh"
[ -x "$BUILD/bin/loadgen" ] || fail "$BUILD/bin/loadgen missing"

tmp=$(mktemp -d /tmp/lab-faultsc.XXXXXX) || fail mktemp
cur=none
cleanup() {
    timeout 120 "$ROOT/deploy/local/stack" down --dir "$tmp/stack" >/dev/null 2>&1 || true
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
base=$(free_base) || fail "no free port base in 26000-31900"

cat > "$tmp/failover.conf" <<'CONF'
fault   = failover
variant = redis-lock              : guard=redis-lock
variant = redis-lock/replicas_ack : guard=redis-lock replicas_ack=1
variant = redlock                 : guard=redlock
field   = lock_ttl_ms=2000
CONF
cat > "$tmp/pause.conf" <<'CONF'
fault   = pause
variant = redis-lock         : guard=redis-lock lock_ttl_ms=1000
variant = redlock            : guard=redlock lock_ttl_ms=1000
variant = redis-lock/fencing : guard=redis-lock lock_ttl_ms=1000 fencing=true
variant = zookeeper/fencing  : guard=zookeeper fencing=true
CONF
cat > "$tmp/crash.conf" <<'CONF'
fault   = crash
variant = redis-lock                   : guard=redis-lock lock_ttl_ms=2000
variant = redis-lock/setnx-then-expire : guard=redis-lock lock_ttl_ms=2000 acquire=setnx-then-expire watchdog=false
variant = zookeeper                    : guard=zookeeper
CONF
cat > "$tmp/restart.conf" <<'CONF'
fault   = restart
guards  = conditional-update
CONF
# a few cells of faults-all (every guard x every fault), one compare run:
# each entry of `fault` is a file of one fault
cat > "$tmp/sigterm1.conf" <<'CONF'
fault   = sigterm
variant = redis-stream : guard=redis-stream
CONF
cat > "$tmp/reseed1.conf" <<'CONF'
fault   = reseed
variant = redis-lock : guard=redis-lock lock_ttl_ms=3000
CONF
cat > "$tmp/crash1.conf" <<'CONF'
fault   = crash
variant = redis-stream : guard=redis-stream
CONF
printf 'fault = %s %s %s\n' "$tmp/sigterm1.conf" "$tmp/reseed1.conf" "$tmp/crash1.conf" > "$tmp/all.conf"

t0=$SECONDS
for cur in failover pause crash restart all; do
    LAB_PORT_BASE="$base" LAB_BUILD="$BUILD" LAB_BIN_DIR="$BUILD/bin" LAB_MYSQL_FLUSH=2 LAB_WAIT_S=60 \
        timeout 400 python3 "$ROOT/loadtest/compare" --scenario "$tmp/$cur.conf" --keep \
        --out "$tmp/out-$cur" --dir "$tmp/stack" > "$tmp/$cur.out" 2>&1
    rc=$?
    sed -n '/^scenario /,$p' "$tmp/$cur.out"
    [ "$rc" = 0 ] || { cat "$tmp/$cur.out"; fail "compare --scenario $cur exited $rc"; }
done
echo "five fault scenarios took $((SECONDS - t0)) s on port base $base"

cell() { # scenario label -> the cell's JSON ("all": the label is FAULT/VARIANT)
    local l="$1/$2"
    [ "$1" = all ] && l=$2
    jq -c --arg l "$l" '.cells[] | select(.label == $l)' "$tmp/out-$1/results.json"
}
# ran: 0 when the cell ran; a cell skipped as "not in this build" is fine
# (returns 1), anything else fails the test.
ran() {
    local c=$1 what=$2 st
    st=$(jq -r .status <<< "$c")
    [ "$st" = ok ] && return 0
    if [ "$st" = skipped ] && jq -r .reason <<< "$c" | grep -q "not in this build"; then
        echo "skip: $what: $(jq -r .reason <<< "$c")"
        return 1
    fi
    fail "$what did not run: $c"
}
check() { # scenario label jq-condition message
    local c
    c=$(cell "$1" "$2")
    [ -n "$c" ] || fail "no cell $1/$2"
    ran "$c" "$1/$2" || return 0
    [ "$(jq "$3" <<< "$c")" = true ] || fail "$1/$2: $4: $(jq -c '{expected, measured, oversold, lost_updates, fenced, n503, holder, recovery, by_error}' <<< "$c")"
    echo "ok: $1/$2: $4"
}

check failover redis-lock '.expected == "broke" and .measured == "broke" and .lost_updates >= 1 and .holder.status == 200' \
    "two holders after the failover: a lost update"
check failover redlock '.expected == "held" and .measured == "held" and .lost_updates == 0 and .oversold == 0' \
    "redlock over three masters stays exact"
check failover redis-lock/replicas_ack '.measured == "held" and .lost_updates == 0 and .oversold == 0' \
    "replicas_ack=1 refuses the unreplicated lock: exact"
check pause redis-lock '.measured == "broke" and .lost_updates >= 1 and .holder.status == 200' \
    "the resumed holder's write loses the buyers' sales"
check pause redlock '.measured == "held" and .lost_updates == 0 and .holder.error == "lease_expired"' \
    "redlock's validity check refuses the resumed holder"
# the history checker: redlock's answers all ordered and in the ledger (a
# request still in flight at the end is indeterminate, not a phantom sale);
# redis-lock's lost update named by the two answers that left one stock
check pause redlock '.valid == true and .checker.valid == true and .invariant.phantom == 0' \
    "the history checker finds every answer ordered and in the ledger"
check pause redis-lock '.valid == false and (.checker.window | length) >= 2 and (.checker.violations.lost_updates | length) >= 2' \
    "the history checker names the lost update's answers, with a window"
check pause redis-lock/fencing '.measured == "held" and .lost_updates == 0 and .fenced >= 1 and .holder.error == "fenced"' \
    "the stale holder is fenced"
check pause zookeeper/fencing '.measured == "held" and .lost_updates == 0 and .oversold == 0' \
    "zookeeper with fencing stays exact"
check crash redis-lock '.measured == "held" and .recover_s != null and .recover_s >= 1.0' \
    "buyers sell again once the TTL ran out"
check crash redis-lock/setnx-then-expire '.measured == "broke" and .recover_s == null and (.by_error.lock_timeout // 0) >= 1' \
    "a lock without TTL: no sale after the crash, buyers give up after lock_wait_ms"
check crash zookeeper '.measured == "held" and .recover_s != null' \
    "buyers sell again after the session timeout"
check restart conditional-update '.measured == "held" and .oversold == 0 and .lost_updates == 0 and .n503 >= 1' \
    "0 oversold, 503 while a backend was away"
check all sigterm/redis-stream '.measured == "held" and .drift == 0 and .pending == 0 and .unacknowledged == 0 and .stop_s != null' \
    "SIGTERM drains: nothing stranded, every answered sale in MySQL, drift 0"
check all reseed/redis-lock '.measured == "held" and .lost_updates == 0 and .reseed.status == 200 and .holder.status == 503' \
    "a reseed on the other instance: the holder that read the old stock sells nothing"
check all crash/redis-stream '.measured == "held" and .drift == 0 and .pending == 0 and .unacknowledged == 0' \
    "kill -9 of a redis-stream instance: the other's flusher claims its entries, drift 0"

# the report: a faults section, one timeline per fault cell that ran
for cur in failover pause crash restart all; do
    grep -q '^## Faults' "$tmp/out-$cur/report.md" || fail "$cur: report.md has no Faults section"
    n=$(jq '[.cells[] | select(.status == "ok")] | length' "$tmp/out-$cur/results.json")
    m=$(grep -c 'class="chart timeline"' "$tmp/out-$cur/report.html")
    [ "$n" = "$m" ] || fail "$cur: $n cells ran but report.html has $m timelines"
    [ "$(jq '[.cells[] | select(.status == "ok") | select((.timeline.seconds | length) >= 5 and (.events | length) >= 1)] | length' "$tmp/out-$cur/results.json")" = "$n" ] \
        || fail "$cur: a cell lacks its timeline or its fault moments"
done
cur=none
timeout 120 "$ROOT/deploy/local/stack" down --dir "$tmp/stack" >/dev/null 2>&1
echo "$name: pass"
