"""What every renderer shares: table columns, series labels, escaping."""

import html

from ..verdicts import verdict

E = html.escape


VARYING_KEYS = ("instances", "path", "stock", "requests", "concurrency", "hold_ms", "rate")
KEY_FMT = {"instances": "{} inst", "path": "{}", "stock": "stock {}", "requests": "{} req",
           "concurrency": "{} conn", "hold_ms": "hold {} ms", "rate": "{}/s"}


def series_of(cells):
    """Label of each cell's non-guard dimensions (only those that vary)."""
    vary = [k for k in VARYING_KEYS if len({c[k] for c in cells}) > 1]
    if not vary:
        vary = ["instances"]
    return {c["cell"]: ", ".join(KEY_FMT[k].format(c[k]) for k in vary) for c in cells}


def ordered_unique(xs):
    seen, out = set(), []
    for x in xs:
        if x not in seen:
            seen.add(x)
            out.append(x)
    return out


def fmt_num(v, nd=1):
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.{nd}f}"
    return str(v)


def kv(d):
    return " ".join(f"{k}:{v}" for k, v in sorted(d.items())) if d else "-"


TABLE_COLS = [
    # (header, function of cell)
    ("guard", lambda c: c["label"]),
    ("inst", lambda c: c["instances"]),
    ("path", lambda c: c["path"]),
    ("stock", lambda c: c["stock"]),
    ("req", lambda c: c["requests"]),
    ("conn", lambda c: c["concurrency"]),
    ("hold ms", lambda c: c["hold_ms"]),
    ("rate", lambda c: c["rate"] or "closed"),
    ("sold", lambda c: c.get("sold", "-")),
    ("oversold", lambda c: c.get("oversold", "-")),
    ("lost upd", lambda c: c.get("lost_updates", "-")),
    ("consistent", lambda c: ("yes" if c["consistent"] else "no") if c.get("status") == "ok" else "-"),
    ("orders", lambda c: fmt_num(c.get("orders_written"))),
    ("ok/s", lambda c: fmt_num(c.get("ok_per_s"))),
    ("req/s", lambda c: fmt_num(c.get("rps"))),
    ("p50 ms", lambda c: fmt_num(c.get("latency_ms", {}).get("p50"), 2)),
    ("p90 ms", lambda c: fmt_num(c.get("latency_ms", {}).get("p90"), 2)),
    ("p99 ms", lambda c: fmt_num(c.get("latency_ms", {}).get("p99"), 2)),
    ("p99.9 ms", lambda c: fmt_num(c.get("latency_ms", {}).get("p999"), 2)),
    ("max ms", lambda c: fmt_num(c.get("latency_ms", {}).get("max"), 2)),
    ("status", lambda c: kv(c.get("by_status", {}))),
    ("errors", lambda c: kv(c.get("by_error", {}))),
    ("retries", lambda c: c.get("retries", "-")),
    ("lock waits", lambda c: c.get("lock_waits", "-")),
    ("wait ms (mean)", lambda c: fmt_num(c.get("lock_wait_mean_ms"), 2)),
    ("lock timeouts", lambda c: c.get("lock_timeouts", "-")),
    ("runs", lambda c: (c.get("repeat") or {}).get("n", 1)),
    ("ok/s range", lambda c: spread_text(c, "ok_per_s")),
    ("p99 range", lambda c: spread_text(c, "p99_ms")),
    ("verdict", verdict),
]
# Shown only when some cell ran more than once.
REPEAT_COLS = ("runs", "ok/s range", "p99 range")


def spread_text(c, key):
    sp = ((c.get("repeat") or {}).get("spread") or {}).get(key)
    return f"{sp['min']:g}..{sp['max']:g}" if sp else "-"

SUMMARY_COLS = ["guard", "inst", "path", "sold", "oversold", "lost upd", "ok/s", "req/s",
                "p50 ms", "p99 ms", "max ms", "verdict"]


def table_rows(cells, cols):
    sel = [(h, f) for h, f in TABLE_COLS if h in cols] if cols else TABLE_COLS
    if not any((c.get("repeat") or {}).get("n", 1) > 1 for c in cells):
        sel = [(h, f) for h, f in sel if h not in REPEAT_COLS]
    return [h for h, _ in sel], [[str(f(c)) for _, f in sel] for c in cells]


def verdict_grid(cells):
    ser = series_of(cells)
    rows = ordered_unique(c["label"] for c in cells)
    cols = ordered_unique(ser[c["cell"]] for c in cells)
    grid = {(c["label"], ser[c["cell"]]): c for c in cells}
    return rows, cols, grid


def md_escape(s):
    return str(s).replace("\\", "\\\\").replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


