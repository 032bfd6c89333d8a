#!/usr/bin/env bash
# report.html renders in headless Chromium (no network, no JavaScript):
# the DOM holds the decision matrix (first), the guard sections, the
# verdicts and the <svg> charts with their data tables, and text from the
# results is escaped. Renders a fixed results.json with compare --render
# (a folder holding nothing else: rendering reads only results.json).
# Exit 0 pass, 77 skip (no chromium or python3), 1 fail.
set -u
name=test_report_html
fail() { echo "$name: FAIL: $*"; exit 1; }
command -v python3 >/dev/null || { echo "$name: skip: python3 not installed"; exit 77; }
chrome=$(command -v chromium || command -v chromium-browser || true)
[ -n "$chrome" ] || { echo "$name: skip: chromium not installed (apt-get install chromium)"; exit 77; }
ROOT=${LAB_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
tmp=$(mktemp -d) || fail mktemp
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/out" "$tmp/profile"

cell() { # n label guard instances sold oversold lost consistent ok
    cat <<JSON
{"cell":$1,"label":"$2","guard":"$3","instances":$4,"path":"direct","stock":1000,"requests":2000,
 "concurrency":32,"threads":2,"hold_ms":2,"rate":0,"fields":{},"sku":"CMP-x-$1","status":"ok",
 "sold":$5,"oversold":$6,"lost_updates":$7,"consistent":$8,"stock_left":0,"initial":1000,
 "orders_written":null,"successes":$9,"answered":2000,"duration_s":2.0,"rps":1000.0,"ok_per_s":$(( $9 / 2 )).0,
 "latency_ms":{"p50":3.1,"p90":9.5,"p99":40.2,"p999":60.0,"max":61.0,"mean":5.0,"min":0.9},
 "latency_curve":[[0.0,0.9],[90.0,9.5],[99.0,40.2],[99.9,60.0],[100.0,61.0]],
 "by_status":{"200":$9,"409":$(( 2000 - $9 ))},"by_error":{"out_of_stock":$(( 2000 - $9 ))},
 "socket_errors":{"connect":0,"read":0,"write":0,"timeout":0,"parse":0},"reconnects":0,
 "retries":0,"lock_waits":0,"lock_wait_s":0,"lock_wait_mean_ms":0,"lock_timeouts":0,
 "deductions_by_outcome":{},"loadgen_cmd":"build/bin/loadgen -t 2 -c 32 -n 2000"}
JSON
}
{
    echo '{"version":1,"started":"2026-01-01 00:00:00 UTC","elapsed_s":10,"interrupted":false,'
    echo '"git":"abc123","run_id":"x","loadgen":"build/bin/loadgen","port_base":"",'
    echo '"machine":{"cores":2,"kernel":"6.1.0","cpu":"","mariadb":"MariaDB 10.11","redis":"Redis 7.0","hostname":"h"},'
    echo '"scenario":{"name":"html-check","description":"escape <script>alert(1)</script> & \"quotes\"",'
    echo '  "file":"tests/checks/x.conf","guards":["none","conditional-update"],"instances":[1,2],"path":["direct"],'
    echo '  "stock":[1000],"requests":[2000],"concurrency":[32],"threads":2,"hold_ms":[2],"rate":[0],'
    echo '  "timeout":10,"fields":{},"variants":[]},"cells":['
    cell 1 none none 1 2000 1000 1825 false 2000; echo ,
    cell 2 conditional-update conditional-update 1 1000 0 0 true 1000; echo ,
    cell 3 none none 2 1999 999 1861 false 1999; echo ,
    cell 4 conditional-update conditional-update 2 1000 0 0 true 1000; echo ,
    echo '{"cell":5,"label":"redis-lock/no-watchdog","guard":"redis-lock","instances":2,"path":"direct","stock":1000,'
    echo ' "requests":2000,"concurrency":32,"threads":2,"hold_ms":250,"rate":0,"fields":{"watchdog":false},'
    echo ' "status":"skipped","reason":"guard not in this build"}'
    echo ']}'
} > "$tmp/out/results.json"
python3 "$ROOT/loadtest/compare" --render "$tmp/out" > "$tmp/render.out" 2>&1 \
    || fail "compare --render: $(tail -n 5 "$tmp/render.out")"

timeout 90 "$chrome" --headless --no-sandbox --disable-gpu --disable-dev-shm-usage --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync \
    --user-data-dir="$tmp/profile" --dump-dom "file://$tmp/out/report.html" \
    > "$tmp/dom.html" 2> "$tmp/chrome.err" || fail "chromium exited $?: $(tail -n 3 "$tmp/chrome.err")"
dom=$tmp/dom.html
[ -s "$dom" ] || fail "empty DOM dump"
need() { grep -q -- "$1" "$dom" || fail "DOM lacks $2"; }
need '<table class="verdicts">' "the verdict table"
need 'oversold 1000 units, lost 1825 updates' "the verdict of none on 1 instance"
need 'oversold 999 units, lost 1861 updates' "the verdict of none on 2 instances"
need 'skipped: guard not in this build' "the skipped verdict"
[ "$(grep -o '>consistent<' "$dom" | wc -l)" -ge 2 ] || fail "DOM lacks two 'consistent' verdicts"
[ "$(grep -o '<svg' "$dom" | wc -l)" -ge 4 ] || fail "DOM has fewer than 4 <svg> charts"
need 'class="chart oversold"' "the oversold chart"
need 'class="chart throughput"' "the throughput chart"
need 'class="chart latency"' "the latency chart"
need '<table class="matrix">' "the decision matrix"
need 'id="guard-none"' "the section of guard none"
need 'id="guard-conditional-update"' "the section of guard conditional-update"
need 'href="#guard-none"' "the matrix link to guard none"
need '<table class="data">' "a chart's data table"
# the matrix comes before everything else
m=$(grep -n 'class="matrix"' "$dom" | head -1 | cut -d: -f1)
v=$(grep -n 'class="verdicts"' "$dom" | head -1 | cut -d: -f1)
[ -n "$m" ] && [ -n "$v" ] && [ "$m" -lt "$v" ] || fail "the matrix is not above the verdict table"
need '<path d="M' "a latency curve"
need 'MariaDB 10.11' "the machine line"
need 'abc123' "the commit"
grep -q '<script' "$dom" && fail "the description's <script> was not escaped"
need '&lt;script&gt;alert(1)&lt;/script&gt; &amp;' "the escaped description"
# links to the Prometheus queries are fine; nothing may be loaded
if grep -oE '(src|xlink:href)="https?://[^"]*"|<link[^>]*href="https?://|url\(https?://' "$tmp/out/report.html" | grep -q .; then
    fail "report.html loads something from the network"
fi
[ "$(ls "$tmp/out" | sort | tr '\n' ' ')" = "report.html report.md results.csv results.json " ] \
    || fail "render wrote other files: $(ls "$tmp/out")"
echo "$name: pass"
