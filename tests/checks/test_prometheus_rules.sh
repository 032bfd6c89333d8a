#!/usr/bin/env bash
# The compose profile `observe`'s Prometheus files: the configuration and
# the recording rules are valid, and the rules compute sales/s, errors/s,
# the error ratio, the deduction p99 and the lock-wait p99 per guard on
# synthetic series
# (deploy/prometheus/rules_test.yml, promtool test rules). The profile
# itself runs under make compose-test.
# Exit 0 pass, 77 skip (no promtool), 1 fail.
set -u
name=test_prometheus_rules
fail() { echo "$name: FAIL: $*"; exit 1; }
command -v promtool >/dev/null || { echo "$name: skip: promtool not installed (apt-get install prometheus)"; exit 77; }
ROOT=${LAB_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
cd "$ROOT/deploy/prometheus" || fail "no deploy/prometheus"
out=$(promtool check config prometheus.yml 2>&1) || fail "check config: $out"
out=$(promtool check rules rules.yml 2>&1) || fail "check rules: $out"
out=$(promtool test rules rules_test.yml 2>&1) || fail "test rules: $out"
echo "$out" | tail -n 2
# The comparison report links to these series (loadtest/lab/render/prom.py):
# every name it links is a recording rule here.
records=$(sed -n 's/^ *- record: *//p' rules.yml)
links=$(grep -oE '"[a-z_]+:[a-z0-9_]+:[a-z0-9_]+"' "$ROOT/loadtest/lab/render/prom.py" | tr -d '"')
[ -n "$links" ] || fail "no query names found in loadtest/lab/render/prom.py"
for q in $links; do
    grep -qxF "$q" <<<"$records" || fail "loadtest/lab/render/prom.py links $q, which rules.yml does not record"
done
echo "ok  the report's $(wc -w <<<"$links") links name recording rules"
echo "$name: pass"
