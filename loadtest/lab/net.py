"""HTTP to the services (urllib) and the /metrics series the runner reads."""

import json
import os
import re
import urllib.error
import urllib.request


def http(method, url, body=None, timeout=10):
    """Returns (status, text). Never raises for HTTP errors; raises OSError
    when nothing answers."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    # Reseeding needs the admin token when the services have one (compose).
    if os.environ.get("LAB_ADMIN_TOKEN"):
        req.add_header("Authorization", "Bearer " + os.environ["LAB_ADMIN_TOKEN"])
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode("utf-8", "replace")


def http_json(method, url, body=None, timeout=10):
    """(status, parsed JSON); a non-JSON answer becomes {"raw": first 200 chars}."""
    st, text = http(method, url, body, timeout)
    try:
        return st, json.loads(text)
    except ValueError:
        return st, {"raw": text[:200]}


METRIC_RE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+([-+0-9.eEinfaINFA]+)')
WANT_METRICS = ("lab_retries_total", "lab_lock_wait_seconds_sum", "lab_lock_wait_seconds_count",
                "lab_lock_timeouts_total", "lab_deductions_total", "lab_db_conflicts_total")


def scrape(url):
    """{(name, labels): value} for the metrics the runner reads; {} when the
    service does not answer."""
    out = {}
    try:
        st, text = http("GET", url + "/metrics", timeout=5)
    except OSError:
        return out
    if st != 200:
        return out
    for line in text.splitlines():
        m = METRIC_RE.match(line)
        if not m or m.group(1) not in WANT_METRICS:
            continue
        try:
            out[(m.group(1), m.group(2) or "")] = float(m.group(3))
        except ValueError:
            pass
    return out


def label_of(labels, name):
    m = re.search(name + r'="([^"]*)"', labels)
    return m.group(1) if m else ""
