#!/usr/bin/env bash
# Every SQL statement on db_shopping lives in one module, split by table:
# lib/stock/store*.c (store.c the inventory rows, the fences and the lock
# table, store_ledger.c the ledger reads, store_audit.c the cluster
# status; store.h their declarations). The order database's statements
# live in services/order/order_store.c. lib/base/db.c, the connection
# layer under every statement, keeps its own session and transaction
# statements (START TRANSACTION, the transaction marker, the ping).
# Fails on a string literal that starts a statement (SELECT, INSERT,
# UPDATE, DELETE, REPLACE or SET SESSION followed by a clause, not by
# "...") in any other .c file of lib/ or services/; a guard's `.statements`
# (the text of its struct guard_doc: what the report shows it runs) is
# prose, not SQL that is run.
#   tests/checks/test_sql_home.sh [ROOT]   (default: this checkout)
# Exit 0 pass, 1 fail.
set -u
root=${1:-$(dirname "$0")/../..}
cd "$root" || exit 1

allowed() {
    case "$1" in
        lib/stock/store.c | lib/stock/store_*.c | lib/base/db.c | services/order/order_store.c) return 0 ;;
    esac
    return 1
}

# "N:line" of f, without a guard's description of the statements it runs
# (struct guard_doc's .statements: text for GET /guards and the report,
# never handed to MySQL), from ".statements =" to the end of its value.
code_lines() {
    awk '/^[[:space:]]*\.statements[[:space:]]*=/ { doc = 1 }
         !doc { print NR ":" $0 }
         doc && /,[[:space:]]*$/ { doc = 0 }' "$1"
}

found=()
nfiles=0
while read -r f; do
    nfiles=$((nfiles + 1))
    allowed "$f" && continue
    # comment lines are prose, not statements
    while IFS= read -r hit; do
        found+=("$f:$hit")
    done < <(code_lines "$f" |
             grep -E '^[0-9]+:.*"[[:space:]]*(SELECT|INSERT|UPDATE|DELETE|REPLACE|SET[[:space:]]+SESSION)[[:space:]]+[^.[:space:]]' |
             grep -vE '^[0-9]+:[[:space:]]*(\*|/\*|//)')
done < <(find lib services -name '*.c' | sort)

[ "$nfiles" -gt 0 ] || { echo "test_sql_home: FAIL: no .c file under lib/ or services/"; exit 1; }
if [ "${#found[@]}" -gt 0 ]; then
    echo "test_sql_home: FAIL: SQL outside lib/stock/store*.c (move it there as a named function):"
    printf '  %s\n' "${found[@]}"
    exit 1
fi
echo "test_sql_home: ok ($nfiles files, SQL only in lib/stock/store*.c, services/order/order_store.c, lib/base/db.c)"
