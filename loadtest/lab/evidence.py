"""A cell's history on disk and its checker verdict: loadgen's --history
file plus the runner's own operations (the seed, a fault cell's holder and
buyers, a reseed) kept as <out>/history/<cell prefix>.jsonl next to
results.json, checked by lab.history against the model and the ledger."""

import json
import os
import resource
import time

from .history import DEFAULT_BUDGET, check, load


def history_path(out, prefix):
    """Where the history of one run of one cell goes (folder made)."""
    d = os.path.join(out, "history")
    os.makedirs(d, exist_ok=True)
    return os.path.join(d, f"{prefix}.jsonl")


def append_ops(path, ops):
    with open(path, "a", encoding="utf-8") as f:
        for op in ops:
            f.write(json.dumps(op, separators=(",", ":")) + "\n")


def ledger_ids(stack, sku):
    """The SKU's ledger order_ids, one per row; None when the ledger cannot
    be read (no MySQL port: an external stack)."""
    rc, out, _ = stack.sql(f"SELECT order_id FROM db_shopping.ledger WHERE sku='{sku}'")
    if rc != 0:
        return None
    return [line.strip() for line in out.splitlines() if line.strip()]


def check_file(path, out_dir, ledger=None, budget=DEFAULT_BUDGET):
    """The checker block for results.json (lab.history.check) with the
    history file's path relative to out_dir and the check's cost."""
    if not os.path.exists(path):
        return {"valid": "unknown", "model": "counter", "ops": 0,
                "reason": "no history was written", "window": []}
    t = time.process_time()
    ops = load(path)
    res = check(ops, ledger_ids=ledger, budget=budget)
    cpu = time.process_time() - t
    res["file"] = os.path.relpath(path, out_dir)
    res["cost"] = {"cpu_s": round(cpu, 3),
                   "ops_per_s": round(len(ops) / cpu) if cpu > 0 else None,
                   "max_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}
    return res
