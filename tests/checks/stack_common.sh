# Sourced by the checks that bring up a stack of their own (not run alone):
# ROOT, BUILD (absolute) and free_base. Their ports are 26000-31999, apart
# from tests/run's 20000-25900, so they never meet the suite's own stack.
# shellcheck shell=bash
ROOT=${LAB_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
BUILD=${LAB_BUILD:-build}
case "$BUILD" in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac

free_base() { # a port base with base..base+70 free on loopback
    local base p busy _
    for _ in $(seq 1 40); do
        base=$(( 26000 + (RANDOM % 60) * 100 ))
        busy=0
        for p in $(seq "$base" $((base + 70))); do
            if ss -ltnH "sport = :$p" 2>/dev/null | grep -q .; then busy=1; break; fi
        done
        [ "$busy" = 0 ] && { echo "$base"; return 0; }
    done
    return 1
}

# tests/run exports the suite's own stack (its ports, URLs, folder); a check
# that starts a stack of its own must not inherit them: LAB_*_PORT beat
# LAB_PORT_BASE in deploy/local/stack, and LAB_INVENTORY_URLS tells compare
# to use an external stack. Every port variable, present or future, goes.
for _v in $(compgen -v | grep -E '^LAB_[A-Z_]*_PORTS?$'); do unset "$_v"; done
unset _v LAB_INVENTORY_URLS LAB_ORDER_URL LAB_STACK_DIR LAB_REPORTS_DIR LAB_ETCD_URL LAB_ETCD_ENDPOINTS

# private_stack LABEL SECONDS [VAR=value ...]: the private stack of one
# check. Sets tmp (a new /tmp/lab-LABEL.XXXXXX, removed with its stack on
# exit, however the check ends), base (a free port base) and STACK, and
# defines st VERB...: deploy/local/stack VERB ... --dir "$tmp/stack" on that
# base, durable-enough MariaDB (flush 2), 60 s waits, the extra variables,
# bounded by SECONDS. Calls the check's fail when there is no folder or no
# free base.
private_stack() {
    local label=$1
    ST_LIMIT=$2
    shift 2
    ST_ENV=("$@")
    STACK=$ROOT/deploy/local/stack
    tmp=$(mktemp -d "/tmp/lab-$label.XXXXXX") || fail mktemp
    trap private_stack_down EXIT
    trap 'exit 130' INT TERM
    base=$(free_base) || fail "no free port base in 26000-31900"
}
private_stack_down() {
    timeout 120 "$STACK" down --dir "$tmp/stack" >/dev/null 2>&1 || true
    rm -rf "$tmp"
}
st() {
    env LAB_PORT_BASE="$base" LAB_BIN_DIR="$BUILD/bin" LAB_MYSQL_FLUSH=2 LAB_WAIT_S=60 \
        "${ST_ENV[@]}" timeout "$ST_LIMIT" "$STACK" "$@" --dir "$tmp/stack"
}

# galera_check NAME: for the checks that run a Galera cluster. Defines
# fail (the message, then the tail of every node's and instance's log under
# $tmp/stack) and skip (exit 77), and skips where Galera cannot start here:
# no galera-4, rsync or mariadbd, no 'mysql' user, not root.
galera_check() {
    name=$1
    # shellcheck disable=SC2317  # called by the check that sourced this
    fail() {
        echo "$name: FAIL: $*"
        local f
        for f in "${tmp:-/nonexistent}"/stack/logs/galera-*.err "${tmp:-/nonexistent}"/stack/logs/inventory-*.log; do
            [ -f "$f" ] && { echo "--- $f"; tail -n 5 "$f"; }
        done
        exit 1
    }
    # shellcheck disable=SC2317
    skip() { echo "$name: skip: $*"; exit 77; }
    [ -f /usr/lib/galera/libgalera_smm.so ] || skip "Galera not installed (apt-get install galera-4)"
    command -v rsync >/dev/null || skip "rsync not installed (the nodes' state transfer uses it)"
    command -v mariadbd >/dev/null || skip "mariadbd not installed"
    id mysql >/dev/null 2>&1 || skip "no 'mysql' user to run the nodes as"
    [ "$(id -u)" = 0 ] || skip "the nodes' folders must be given to 'mysql': run as root"
}
