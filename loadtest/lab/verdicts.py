"""Verdicts: one cell's words ("oversold 12 units", "consistent in 3/3
runs"), a fault cell's measured line and time to recover, the repeats'
aggregate and the decision matrix. Pure functions of cell dicts as
results.json holds them."""

import statistics

# The decision matrix's verdict columns, in order.
MATRIX_COLS = ("1 instance", "N instances", "pause", "crash", "failover", "restart", "reseed",
               "sigterm")


def verdict(c):
    """The cell's verdict in words; over repeats, "oversold in 3/3 runs"."""
    if c.get("status") == "skipped":
        return f"skipped: {c.get('reason', '')}"
    if c.get("status") != "ok":
        return f"error: {c.get('reason', '')}"
    rp = c.get("repeat") or {}
    if c.get("holds") and rp.get("n", 1) <= 1:
        return holds_text(c)
    if c.get("shop") and rp.get("n", 1) <= 1:
        return c["shop"]["why"]    # lab.shop says what it measured
    if rp.get("n", 1) > 1:
        return repeat_verdict(c, rp)
    parts = []
    if c["oversold"] > 0:
        parts.append(f"oversold {c['oversold']} units")
    if c["lost_updates"] != 0:
        parts.append(f"lost {c['lost_updates']} updates")
    if c.get("valid") is False:
        parts.append("history not linearizable" if "not_linearizable" in
                     ((c.get("checker") or {}).get("violations") or {}) else "history invalid")
    if parts:
        return ", ".join(parts)
    if c["consistent"]:
        return "consistent"
    return f"inconsistent (stock {c['stock_left']})"


def holds_text(c):
    """A holds cell's verdict in words (lab.holds fills c["holds"])."""
    n = c["holds"]
    parts = []
    if c["oversold"]:
        parts.append(f"oversold {c['oversold']} units")
    if n["late_confirms"]:
        parts.append(f"{len(n['late_confirms'])} late confirm(s) on units given back")
    if n["live_after"] or n["expired_unswept"]:
        parts.append(f"stranded: {n['live_after']} held, {n['expired_unswept']} expired unswept "
                     "after the sweep")
    if not n["exact"]:
        parts.append("initial != stock + sold + held")
    if not n["answers_match"]:
        parts.append(f"{n['answered_sales']} confirms answered 200, ledger {c['sold']}")
    return ", ".join(parts) if parts else "held"


def verdict_class(c):
    if c.get("status") != "ok":
        return "skip"
    return "good" if c["consistent"] and c.get("valid") is not False else "bad"


def measured_text(c):
    if c.get("status") != "ok":
        return "-"
    if c.get("holds"):
        n = c["holds"]
        return (f"{holds_text(c)}; held {n['held']}, paid {n['paid']}, expired {n['expired']}, "
                f"late refused {n['late_refused']}, late fresh {n['late_fresh']}, resold {n['resold']}")
    parts = [f"oversold {c['oversold']}", f"lost {c['lost_updates']}", f"fenced {c.get('fenced', 0)}",
             f"503 {c.get('n503', 0)}"]
    h = c.get("holder") or {}
    if h.get("status") is not None:
        parts.append(f"holder {h['status']}{' ' + h['error'] if h.get('error') else ''}")
    return ", ".join(parts)


def recover_text(c):
    rs = c.get("recovery") or []
    if not rs:
        return "-"
    out = []
    for r in rs:
        v = "no sale after it" if r["recover_s"] is None else f"{r['recover_s']:.1f} s"
        out.append(v if len(rs) == 1 else f"{r['fault']}: {v}")
    return "; ".join(out)




def repeat_verdict(c, rp):
    n = rp["ok"]
    parts = []
    if rp["oversold"]:
        parts.append(f"oversold in {rp['oversold']}/{n} runs (median {rp['spread']['oversold']['median']:g} units)")
    if rp["lost"]:
        parts.append(f"lost updates in {rp['lost']}/{n} runs")
    if not parts and rp["inconsistent"]:
        parts.append(f"inconsistent in {rp['inconsistent']}/{n} runs")
    if not parts:
        parts.append(f"consistent in {n}/{n} runs")
    failed = rp["n"] - rp["ok"]
    if failed:
        parts.append(f"{failed} run(s) failed")
    return ", ".join(parts)


def held(c):
    """A fault run's measured verdict is 'held'."""
    return c.get("measured") == "held"


SPREAD_KEYS = {
    # name: function of an ok run
    "sold": lambda r: r["sold"],
    "oversold": lambda r: r["oversold"],
    "lost_updates": lambda r: r["lost_updates"],
    "ok_per_s": lambda r: r["ok_per_s"],
    "rps": lambda r: r["rps"],
    "p50_ms": lambda r: r["latency_ms"].get("p50"),
    "p99_ms": lambda r: r["latency_ms"].get("p99"),
}


def spread(values):
    vs = [v for v in values if v is not None]
    if not vs:
        return None
    return {"median": statistics.median(vs), "min": min(vs), "max": max(vs)}


def run_summary(r):
    """One run as results.json lists it under its cell's "runs"."""
    out = {"run": r.get("run", 1), "status": r.get("status"), "verdict": verdict(r)}
    if r.get("status") != "ok":
        out["reason"] = r.get("reason", "")
        return out
    for k in ("sku", "seed", "sold", "oversold", "lost_updates", "consistent", "ok_per_s", "rps",
              "measured", "outcomes", "valid", "loadgen_cmd"):
        if k in r:
            out[k] = r[k]
    out["p99_ms"] = r["latency_ms"].get("p99")
    return out


def aggregate_runs(runs):
    """The cell over its runs: the median run's figures (by successful
    deductions/s) at the top level, "runs" (each run's summary and
    verdict) and "repeat" (counts and the spread of the figures)."""
    ok = [r for r in runs if r.get("status") == "ok"]
    if not ok:
        c = dict(runs[0])
    else:
        order = sorted(ok, key=lambda r: r["ok_per_s"])
        c = dict(order[(len(order) - 1) // 2])
    c.pop("run", None)
    c["runs"] = [run_summary(r) for r in runs]
    if not ok:
        return c
    rp = {"n": len(runs), "ok": len(ok),
          "oversold": sum(1 for r in ok if r["oversold"] > 0),
          "lost": sum(1 for r in ok if r["lost_updates"] != 0),
          "inconsistent": sum(1 for r in ok if not r["consistent"]),
          "spread": {k: spread(f(r) for r in ok) for k, f in SPREAD_KEYS.items()}}
    rp["consistent"] = len(ok) - rp["inconsistent"]
    c["consistent"] = rp["inconsistent"] == 0
    if c.get("fault"):
        rp["held"] = sum(1 for r in ok if held(r))
        rp["broke"] = len(ok) - rp["held"]
        c["measured"] = "held" if rp["broke"] == 0 else "broke"
        bad = next((r for r in ok if r.get("invariant") and not r["invariant"]["valid"]), None)
        if bad is not None:
            # show the violations of the first invalid run
            c["invariant"] = bad["invariant"]
            c["invariant_run"] = bad.get("run", 1)
    if "valid" in c:
        c["valid"] = runs_valid([r.get("valid") for r in ok])
        bad = next((r for r in ok if (r.get("checker") or {}).get("valid") is False), None)
        if bad is not None and len(runs) > 1:
            c["checker"] = bad["checker"]       # the evidence of the first invalid run
            c["checker_run"] = bad.get("run", 1)
    c["repeat"] = rp
    return c


def runs_valid(vs):
    """The history checker's verdict over runs: False when any run is
    invalid, "unknown" when any could not be decided, else True."""
    if any(v is False for v in vs):
        return False
    if any(v is not True for v in vs):
        return "unknown"
    return True


def runs_text(c):
    """'3/3' style count of the runs behind a verdict ('' for one run)."""
    rp = c.get("repeat") or {}
    if rp.get("n", 1) <= 1:
        return ""
    if c.get("fault"):
        k = rp["held"] if c.get("measured") == "held" else rp["broke"]
    else:
        k = rp["consistent"] if c.get("consistent") else rp["ok"] - rp["consistent"]
    return f"{k}/{rp['ok']}"


def matrix_key(c):
    """(row, column) of a cell in the decision matrix: the row is the guard
    (or its variant label, e.g. redis-lock/fencing), the column the
    instance count or the fault."""
    label = c["label"]
    if c.get("fault"):
        row = label.split("/", 1)[1] if "/" in label else label
        return row, c["fault"]
    return label, "1 instance" if c.get("instances") == 1 else "N instances"


def matrix_entry(c):
    if c.get("status") == "skipped":
        return {"verdict": "not run", "text": verdict(c), "cell": c["cell"]}
    if c.get("status") != "ok":
        return {"verdict": "error", "text": verdict(c), "cell": c["cell"]}
    if c.get("fault"):
        v = c["measured"]
        text = f"{v} in {runs_text(c)} runs" if runs_text(c) else v
        if c.get("expected") and c["measured"] != c["expected"]:
            text += f" (expected {c['expected']})"
        if c.get("valid") is False:
            text += "; the checker found the history invalid (valid? no)"
        return {"verdict": v, "text": text, "cell": c["cell"], "runs": runs_text(c),
                "valid": c.get("valid")}
    else:
        v = "held" if c["consistent"] and c.get("valid") is not False else "broke"
        text = verdict(c)
    return {"verdict": v, "text": text, "cell": c["cell"], "runs": runs_text(c)}


def matrix_of(cells):
    """{row: {column: {"verdict": held|broke|not run|error, "text", "cell",
    "runs"}, "ok_per_s", "p99_ms", "instances"}}: every MATRIX_COLS column
    present ("not run" when no cell measured it). Where one row has several
    cells in a column (several N), the largest N counts; figures come from
    the load cell with the most instances."""
    m = {}
    best = {}
    for c in cells:
        row, col = matrix_key(c)
        r = m.setdefault(row, {k: {"verdict": "not run", "text": "not run"} for k in MATRIX_COLS})
        prev = best.get((row, col))
        if prev is not None and prev.get("instances", 0) > c.get("instances", 0):
            continue
        best[(row, col)] = c
        r[col] = matrix_entry(c)
        if not c.get("fault") and c.get("status") == "ok":
            fig = best.get((row, "_fig"))
            if fig is None or fig["instances"] <= c["instances"]:
                best[(row, "_fig")] = c
                r["ok_per_s"] = c["ok_per_s"]
                r["p99_ms"] = c["latency_ms"].get("p99")
                r["instances"] = c["instances"]
    return m
