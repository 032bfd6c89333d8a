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
echo "$name: pass"
