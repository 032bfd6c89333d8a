#!/usr/bin/env bash
# `promtool check metrics` passes on both services' /metrics: every family
# has # HELP, gauges are typed gauge, histograms are histograms. First
# every metric name used in lib/ and services/ must be in the catalogue
# (lib/base/metrics_catalog.c), so families that appear only after rare
# events are described too; then one deduction per guard (and one order)
# makes the labelled series appear and every instance's /metrics is
# checked. Uses tests/run's stack (LAB_INVENTORY_URLS, LAB_ORDER_URL), or
# a stack of its own on a free port base when run alone.
# Exit 0 pass, 77 skip (no promtool/curl/jq), 1 fail.
set -u
name=test_promtool_metrics
fail() { echo "$name: FAIL: $*"; exit 1; }
command -v promtool >/dev/null || { echo "$name: skip: promtool not installed (apt-get install prometheus)"; exit 77; }
command -v curl >/dev/null || { echo "$name: skip: curl not installed"; exit 77; }
command -v jq >/dev/null || { echo "$name: skip: jq not installed"; exit 77; }
inv_urls=${LAB_INVENTORY_URLS:-}
order_url=${LAB_ORDER_URL:-}
# shellcheck source=tests/checks/stack_common.sh
. "$(dirname "$0")/stack_common.sh"

# 1. the catalogue covers every name in the code: the service's own rows
# (lib/base/metrics_catalog.c) and the guards' rows in their own files
# (struct guard_metric, registered at start; the shared Redis lock
# client's in lib/guards/core/redis_shared.c)
catalog=$ROOT/lib/base/metrics_catalog.c
rows=$(mktemp /tmp/lab-promtool-rows.XXXXXX) || fail mktemp
{ grep -hoE '^ *\{"lab_[a-z_]+", "(counter|gauge|histogram)"' "$catalog"
  grep -rhoE '^ *\{"lab_[a-z_]+", "(counter|gauge|histogram)"' "$ROOT/lib/guards" --include='*.c'
} | grep -oE 'lab_[a-z_]+' | sort -u > "$rows"
missing=""
for m in $(grep -rhoE '"lab_[a-z_]+"' "$ROOT/lib" "$ROOT/services" --include='*.c' | tr -d '"' | sort -u); do
    base=${m%_bucket}; base=${base%_sum}; base=${base%_count}
    grep -qxF "$m" "$rows" || grep -qxF "$base" "$rows" || missing="$missing $m"
done
rm -f "$rows"
[ -z "$missing" ] || fail "metric names without a row in lib/base/metrics_catalog.c or a guard's metric rows:$missing"

# 2. live /metrics of every instance and the order service
tmp=$(mktemp -d /tmp/lab-promtool.XXXXXX) || fail mktemp
cleanup() {
    [ -d "$tmp/stack" ] && "$ROOT/deploy/local/stack" down --dir "$tmp/stack" >/dev/null 2>&1
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
if [ -z "$inv_urls" ] || [ -z "$order_url" ]; then
    base=$(free_base) || fail "no free port base in 26000-31900"
    LAB_PORT_BASE=$base LAB_BIN_DIR="$BUILD/bin" LAB_WAIT_S=60 \
        "$ROOT/deploy/local/stack" up --inventory 2 --orders 1 --dir "$tmp/stack" > "$tmp/up.log" 2>&1 \
        || fail "stack up: $(tail -n 5 "$tmp/up.log")"
    inv_urls="http://127.0.0.1:$((base + 1)),http://127.0.0.1:$((base + 2))"
    order_url="http://127.0.0.1:$base"
fi
auth=()
[ -n "${LAB_ADMIN_TOKEN:-}" ] && auth=(-H "Authorization: Bearer $LAB_ADMIN_TOKEN")
inv1=${inv_urls%%,*}
sku="PROM-$$-$RANDOM"
curl -fsS -m 10 -X PUT "${auth[@]}" -H 'Content-Type: application/json' -d '{"stock":100}' \
    "$inv1/inventory/$sku" > /dev/null || fail "seeding $sku on $inv1"
guards=$(curl -fsS -m 10 "$inv1/guards" | jq -r '.guards[].name') || fail "GET /guards"
n=0
for g in $guards; do
    n=$((n + 1))
    curl -sS -m 20 -o /dev/null -H 'Content-Type: application/json' \
        -d "{\"sku\":\"$sku\",\"qty\":1,\"order_id\":\"$sku-$n\",\"guard\":\"$g\"}" \
        "$inv1/inventory/deduct" || true
done
curl -sS -m 20 -o /dev/null -H 'Content-Type: application/json' \
    -d "{\"sku\":\"$sku\",\"qty\":1,\"user_id\":\"u-prom\"}" "$order_url/orders" || true
for u in ${inv_urls//,/ } "$order_url"; do
    curl -fsS -m 10 "$u/metrics" > "$tmp/metrics" || fail "GET $u/metrics"
    grep -q '^lab_http_requests_total' "$tmp/metrics" || fail "$u/metrics has no lab_http_requests_total"
    out=$(promtool check metrics < "$tmp/metrics" 2>&1) \
        || fail "promtool check metrics on $u/metrics: $(echo "$out" | head -n 20)"
    [ -z "$out" ] || fail "promtool check metrics on $u/metrics: $(echo "$out" | head -n 20)"
    echo "ok  $u/metrics: $(grep -c '^# TYPE' "$tmp/metrics") families, promtool clean"
done
# 3. one deduction latency series per guard that deducted (the recording
# rule guard:lab_deduct_duration_seconds:p99_rate30s needs the guard label)
curl -fsS -m 10 "$inv1/metrics" > "$tmp/metrics" || fail "GET $inv1/metrics"
for g in $guards; do
    c=$(sed -n "s/^lab_deduct_duration_seconds_count{guard=\"$g\"} //p" "$tmp/metrics")
    if [ -z "$c" ] || [ "${c%%.*}" -lt 1 ]; then
        fail "$inv1/metrics: no lab_deduct_duration_seconds_count{guard=\"$g\"} >= 1 after its deduction"
    fi
done
echo "ok  $inv1/metrics: lab_deduct_duration_seconds for $(wc -w <<<"$guards") guards"
echo "$name: pass"
