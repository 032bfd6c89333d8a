"""Links to the Prometheus queries of the `observe` compose profile
(deploy/prometheus/rules.yml records them per guard)."""

import urllib.parse

from .common import E

PROM_URL = "http://127.0.0.1:9090"
QUERIES = [
    ("sales/s per guard", "lab:sales_per_second:rate30s"),
    ("errors/s per guard", "lab:errors_per_second:rate30s"),
    ("p99 deduction latency per guard", "guard:lab_deduct_duration_seconds:p99_rate30s"),
    ("p99 lock wait per guard", "lab:lock_wait_p99_seconds:rate30s"),
    ("p99 HTTP latency per route", "lab:http_p99_seconds:rate30s"),
]


def prometheus_links(res):
    o = ['<h2>Prometheus</h2><p class="meta">With <code>docker compose --profile observe up</code> '
         f"(deploy/docker-compose.yml) Prometheus scrapes every instance on {PROM_URL} and records "
         "these series (deploy/prometheus/rules.yml):</p><ul>"]
    for what, q in QUERIES:
        url = f"{PROM_URL}/graph?g0.expr={urllib.parse.quote(q)}&g0.tab=0&g0.range_input=15m"
        o.append(f'<li>{E(what)}: <a href="{E(url)}"><code>{E(q)}</code></a></li>')
    o.append("</ul>")
    return o
