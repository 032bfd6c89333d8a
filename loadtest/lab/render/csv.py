"""results.csv: one row per cell (the median run when repeated)."""

import csv
import json

from ..verdicts import verdict
from .common import kv


CSV_COLS = ["cell", "label", "guard", "instances", "path", "stock", "requests", "concurrency",
            "threads", "hold_ms", "rate", "fields", "sku", "status", "reason", "sold", "oversold",
            "lost_updates", "consistent", "stock_left", "orders_written", "successes", "answered",
            "duration_s", "ok_per_s", "rps", "p50_ms", "p90_ms", "p99_ms", "p999_ms", "max_ms",
            "mean_ms", "by_status", "by_error", "socket_errors", "retries", "lock_waits",
            "lock_wait_s", "lock_wait_mean_ms", "lock_timeouts", "verdict"]


def write_csv(cells, path):
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(CSV_COLS)
        for c in cells:
            lat = c.get("latency_ms", {})
            row = dict(c)
            row.update({"p50_ms": lat.get("p50"), "p90_ms": lat.get("p90"), "p99_ms": lat.get("p99"),
                        "p999_ms": lat.get("p999"), "max_ms": lat.get("max"), "mean_ms": lat.get("mean"),
                        "fields": json.dumps(c.get("fields", {}), separators=(",", ":")),
                        "by_status": kv(c.get("by_status", {})), "by_error": kv(c.get("by_error", {})),
                        "socket_errors": kv({k: v for k, v in c.get("socket_errors", {}).items() if v}),
                        "verdict": verdict(c)})
            if "consistent" in c:
                row["consistent"] = "yes" if c["consistent"] else "no"
            w.writerow(["" if row.get(k) is None else row.get(k) for k in CSV_COLS])

