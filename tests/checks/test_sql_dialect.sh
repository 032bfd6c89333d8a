#!/usr/bin/env bash
# The statements portable to MySQL 8 (--sql-dialect mysql) run, and only
# they, when forced on this MariaDB. A private stack (2 inventories, 1
# order, 3 redlock masters) comes up with `--sql-dialect mysql`; MariaDB's
# general log records every statement the services send; a representative
# part of the integration suite runs against it (the SQL guards, the group
# commit of batched-update, the Redis guards with redis-decr's group
# commit) and 20 redis-decr sales at once; then:
#   - every instance's /healthz says "sql_dialect":"mysql";
#   - the services sent no MariaDB-only form: no RETURNING, no
#     @@in_transaction, no variable assigned inside an expression;
#   - the portable forms were taken: the transaction marker written, single
#     and JSON_TABLE ledger inserts and the locked stock write guarded by it,
#     and redis-decr's conditional write handing the stock back through
#     LAST_INSERT_ID.
# The whole suite on the portable path: LAB_SQL_DIALECT=mysql tests/run.
# Ports 26000-31900, always torn down. Exit 0 pass, 1 fail.
set -u
name=test_sql_dialect
fail() { echo "$name: FAIL: $*"; exit 1; }
# shellcheck source=tests/checks/stack_common.sh
. "$(dirname "$0")/stack_common.sh"
# The general log from MariaDB's start (and again after each restart a
# test makes): every statement the services send is in mysql.general_log.
private_stack dialect 150 REDIS_RELOAD_WAIT_MS=4000 LAB_STREAM_CLAIM_IDLE_MS=2000 \
    LAB_MYSQL_OPTS="--general-log=1 --log-output=TABLE"
st up --inventory 2 --orders 1 --redis-masters 3 --sql-dialect mysql > "$tmp/up.log" 2>&1 ||
    fail "stack up: $(tail -n 5 "$tmp/up.log")"
eval "$(st env)"
export LAB_ROOT=$ROOT LAB_INVENTORY_URLS LAB_ORDER_URL LAB_MYSQL_PORT LAB_REDIS_PORT \
    LAB_REDLOCK_PORTS LAB_ZK_PORT LAB_ETCD_PORT LAB_ETCD_URL LAB_ETCD_ENDPOINTS LAB_STACK_DIR
# Instances a test starts itself speak the stack's dialect too.
export SQL_DIALECT=mysql REDIS_RELOAD_WAIT_MS=4000 LAB_STREAM_CLAIM_IDLE_MS=2000

sql() { mariadb -h 127.0.0.1 -P "$LAB_MYSQL_PORT" -u root -N -B -e "$1"; }
[ "$(sql "SELECT @@general_log, @@log_output")" = "$(printf '1\tTABLE')" ] ||
    fail "MariaDB's general log is not on (LAB_MYSQL_OPTS)"

for url in ${LAB_INVENTORY_URLS//,/ } "$LAB_ORDER_URL"; do
    h=$(curl -s --max-time 5 "$url/healthz")
    [[ "$h" == *'"sql_dialect":"mysql"'* ]] || fail "$url/healthz does not say sql_dialect mysql: $h"
done

for t in test_guards test_batched_update test_redis_guards; do
    bin=$BUILD/tests/integration/$t
    [ -x "$bin" ] || fail "$bin missing: run 'make' first"
    timeout 100 "$bin" > "$tmp/$t.log" 2>&1 || {
        grep -E '^\[  (FAILED|ERROR)|Failure' "$tmp/$t.log" | head -10
        fail "$t failed on the portable path (--sql-dialect mysql)"
    }
    p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$tmp/$t.log" | tail -1)
    echo "$t: ${p:-0} passed on the portable path"
done
# redis-decr's group commit, by hand: 20 sales at once of 30 units; each
# answer's remaining comes from the stock write's LAST_INSERT_ID on this
# path, so they must be 10..29, each once, and the audit exact.
inv=${LAB_INVENTORY_URLS%%,*}
json='Content-Type: application/json'
curl -s --max-time 10 -H "$json" -X PUT "$inv/inventory/DIALECT-1" -d '{"stock":30}' > /dev/null ||
    fail "seed DIALECT-1"
for i in $(seq 1 20); do
    curl -s --max-time 20 -H "$json" -X POST "$inv/inventory/deduct" \
        -d "{\"sku\":\"DIALECT-1\",\"qty\":1,\"order_id\":\"dialect-$i\",\"guard\":\"redis-decr\"}" \
        > "$tmp/decr-$i.json" &
done
wait
got=$(cat "$tmp"/decr-*.json | grep -o '"remaining":[0-9]*' | cut -d: -f2 | sort -n | tr '\n' ' ')
[ "$got" = "$(seq 10 29 | tr '\n' ' ')" ] ||
    fail "redis-decr on the portable path answered remaining '$got', not 10..29 once each: $(head -c 300 "$tmp/decr-1.json")"
audit=$(curl -s --max-time 20 "$inv/inventory/DIALECT-1/audit")
[[ "$audit" == *'"stock":10,"sold":20,'*'"consistent":true'* ]] ||
    fail "redis-decr audit on the portable path: $audit"
echo "redis-decr: 20 sales, remaining 10..29 once each, audit exact"
[ "$(sql "SELECT @@general_log")" = 1 ] || fail "MariaDB's general log went off"

# What the services (lab_app; the tests' own reads are root's) sent.
sent() { # SQL condition on `argument` -> how many statements matched
    sql "SELECT COUNT(*) FROM mysql.general_log WHERE user_host LIKE 'lab_app[%'
         AND command_type IN ('Query','Prepare','Execute') AND ($1)"
}
total=$(sent "1=1")
[ "${total:-0}" -gt 1000 ] || fail "only ${total:-0} statements of the services were logged"
for form in "%RETURNING%" "%@@in_transaction%" "%:=%"; do
    n=$(sent "argument LIKE '$form'")
    [ "$n" = 0 ] || fail "$n statements with the MariaDB-only form '$form' were sent under --sql-dialect mysql: $(
        sql "SELECT LEFT(argument, 200) FROM mysql.general_log WHERE user_host LIKE 'lab_app[%'
             AND argument LIKE '$form' LIMIT 1")"
done
need() { # label SQL-condition
    local n
    n=$(sent "$2")
    [ "${n:-0}" -gt 0 ] || fail "the portable path was not taken: no statement for '$1'"
    echo "portable: $1: $n"
}
need "transaction marker written" "argument LIKE 'UPDATE lab_txn_mark SET n=%'"
need "single ledger insert inside the marked transaction" \
    "argument LIKE 'INSERT INTO ledger%FROM DUAL WHERE EXISTS (SELECT 1 FROM lab_txn_mark%'"
need "stock write after a locking read, inside the marked transaction" \
    "argument LIKE 'UPDATE inventory SET stock=%WHERE sku=%AND EXISTS (SELECT 1 FROM lab_txn_mark%'"
need "JSON_TABLE ledger insert inside the marked transaction" \
    "argument LIKE 'INSERT INTO ledger%JSON_TABLE%EXISTS (SELECT 1 FROM lab_txn_mark%'"
need "redis-decr group commit's stock write, new stock by LAST_INSERT_ID" \
    "argument LIKE 'UPDATE inventory SET stock=LAST_INSERT_ID(stock-%seeds=%lab_txn_mark%'"
echo "$total statements from the services, none MariaDB-only"
echo "$name: pass"
