#!/usr/bin/env bash
# loadgen --history on a real run against the test stack (tests/run's, both
# inventory instances): one line per request with the fields the history
# checker reads, each ok's `remaining`, and the checker's verdict joined
# with the ledger: conditional-update linearizable, `none` (oversells) not,
# with a window. Then requests still in flight when a run ends (a server
# that never answers): counted as "in_flight" in --json and written as
# indeterminate operations, not lost from the count (a fault cell once read
# such sales as phantoms: sold, never answered).
# Exit 0 pass, 77 skip (no stack, no python3/jq), 1 fail.
set -u
name=test_loadgen_history
fail() { echo "$name: FAIL: $*"; exit 1; }
[ -n "${LAB_INVENTORY_URLS:-}" ] || { echo "$name: skip: LAB_INVENTORY_URLS not set (run via tests/run)"; exit 77; }
command -v jq >/dev/null || { echo "$name: skip: jq not installed"; exit 77; }
command -v python3 >/dev/null || { echo "$name: skip: python3 not installed"; exit 77; }
ROOT=${LAB_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
BUILD=${LAB_BUILD:-build}
case "$BUILD" in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
LOADGEN=$BUILD/bin/loadgen
[ -x "$LOADGEN" ] || fail "$LOADGEN missing"

tmp=$(mktemp -d) || fail mktemp
sink_pid=
cleanup() { [ -n "$sink_pid" ] && kill "$sink_pid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
IFS=, read -r -a urls <<< "$LAB_INVENTORY_URLS"
first=${urls[0]}
targets=()
for u in "${urls[@]}"; do targets+=(-u "$u/inventory/deduct"); done

# The history checker's verdict on one history file (the model only; the
# ledger join is the comparison runner's, tests/checks/test_compare_tiny.sh).
verdict() { # history-file sku stock -> "valid ops window-size" on stdout
    PYTHONPATH="$ROOT/loadtest" python3 - "$1" "$2" "$3" <<'PY'
import sys
from lab.history import check, load
ops = load(sys.argv[1])
r = check(ops, initial={sys.argv[2]: int(sys.argv[3])})
print(r["valid"], r["ops"], len(r["window"]))
PY
}

for guard in conditional-update none; do
    sku="CHK-LH-$guard-$$"
    stock=40
    curl -fsS -m 10 -X PUT -H "Content-Type: application/json" "$first/inventory/$sku" -d "{\"stock\":$stock}" >/dev/null \
        || fail "seeding $sku"
    body="{\"sku\":\"$sku\",\"qty\":1,\"order_id\":\"chk-lh-$$-$guard-{seq}\",\"guard\":\"$guard\",\"hold_ms\":2}"
    "$LOADGEN" -t 2 -c 16 -n 120 --timeout 20s --progress off --json "$tmp/$guard.json" \
        --history "$tmp/$guard.jsonl" -b "$body" "${targets[@]}" >/dev/null \
        || fail "loadgen ($guard) exited $?"
    lines=$(wc -l < "$tmp/$guard.jsonl")
    [ "$lines" = 120 ] || fail "$guard: $lines history lines, expected 120"
    first_line=$(head -1 "$tmp/$guard.jsonl")
    for k in process invoke_ns complete_ns sku qty order_id outcome remaining error; do
        jq -e "has(\"$k\")" <<< "$first_line" >/dev/null || fail "$guard: no \"$k\" in $first_line"
    done
    ok=$(jq -s '[.[] | select(.outcome == "ok")] | length' "$tmp/$guard.jsonl")
    want=$(jq '.by_status["200"] // 0' "$tmp/$guard.json")
    [ "$ok" = "$want" ] || fail "$guard: $ok ok operations in the history, loadgen counted $want"
    noremain=$(jq -s '[.[] | select(.outcome == "ok" and .remaining == null)] | length' "$tmp/$guard.jsonl")
    [ "$noremain" = 0 ] || fail "$guard: $noremain ok operations without remaining"
    bad_t=$(jq -s '[.[] | select(.complete_ns < .invoke_ns)] | length' "$tmp/$guard.jsonl")
    [ "$bad_t" = 0 ] || fail "$guard: $bad_t operations complete before their invoke"
    read -r valid nops wsize <<< "$(verdict "$tmp/$guard.jsonl" "$sku" "$stock")"
    echo "$guard: $ok ok of 120, checker valid=$valid ops=$nops window=$wsize"
    if [ "$guard" = conditional-update ]; then
        [ "$valid" = True ] || fail "conditional-update: checker says $valid"
    else
        [ "$valid" = False ] || fail "none (hold_ms 2, 16 connections, stock 40): checker says $valid"
        [ "$wsize" -gt 1 ] || fail "none: window of $wsize operations"
    fi
done

# In flight at the end: a listener that accepts and never answers.
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
python3 -c '
import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(64); keep = []
while True:
    keep.append(s.accept()[0])
' "$port" &
sink_pid=$!
for _ in $(seq 50); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.1; done
"$LOADGEN" -t 1 -c 3 -d 500ms --timeout 30s --progress off --json "$tmp/sink.json" \
    --history "$tmp/sink.jsonl" -b '{"sku":"S","qty":1,"order_id":"sink-{seq}"}' \
    "http://127.0.0.1:$port/" >/dev/null || fail "loadgen (sink) exited $?"
inflight=$(jq '.in_flight' "$tmp/sink.json")
[ "$inflight" = 3 ] || fail "in_flight $inflight in --json, expected 3 (3 connections, no answer)"
n=$(jq -s '[.[] | select(.outcome == "indeterminate" and .error == "in_flight" and .complete_ns == null)] | length' "$tmp/sink.jsonl")
[ "$n" = 3 ] || fail "$n in-flight operations in the history, expected 3: $(cat "$tmp/sink.jsonl")"
echo "$name: pass"
