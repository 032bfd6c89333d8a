"""One load cell: seed its SKU, run loadgen, wait for write-behind queues,
audit, and the /metrics deltas. Fills the cell dict in place; raises
RuntimeError (or OSError, ValueError) when the stack misbehaves."""

import json
import math
import os
import re
import signal
import subprocess
import time

from .evidence import append_ops, check_file, history_path, ledger_ids
from .history import seed_op
from .net import http_json, label_of, scrape

DRAIN_WAIT_S = 30   # longest wait for a write-behind cell's queue before its audit


def run_prefix(run_id, c):
    """SKU and order_id prefix of one run of one cell: unique per run, so
    runs never see each other's sales."""
    r = c.get("run", 1)
    return f"{run_id}-{c['cell']}" + (f"r{r}" if r > 1 else "")


def nines_curve(dist, count):
    """Latency (ms) at percentiles 1-10^-x, x = 0..log10(count) step 0.1,
    from loadgen's latency_dist [[ms, cumulative fraction, count], ...]."""
    if not dist or not count:
        return []
    xmax = min(6.0, math.log10(max(count, 1)))
    pts, i = [], 0
    steps = int(round(xmax / 0.1))
    for s in range(steps + 1):
        x = s * 0.1
        p = 1.0 - 10 ** (-x)
        while i < len(dist) - 1 and dist[i][1] < p - 1e-12:
            i += 1
        pts.append([round(100 * p, 4), dist[i][0]])
    pts.append([100.0, dist[-1][0]])
    return pts


def run_cell(c, sc, stack, run_id, loadgen, work, log):
    prefix = run_prefix(run_id, c)
    sku = f"{sc['sku_prefix']}-{prefix}"
    c["sku"] = sku
    t_seed = time.monotonic_ns()
    st, seeded = http_json("PUT", f"{stack.inventory[0]}/inventory/{sku}", {"stock": c["stock"]})
    if st != 200:
        raise RuntimeError(f"seeding {sku} answered {st}: {seeded}")
    hpath = history_path(work, prefix)
    seeded_op = seed_op("seed", sku, c["stock"], t_seed, time.monotonic_ns())
    before = [scrape(u) for u in stack.inventory]

    body = {"sku": sku, "qty": 1}
    if c["path"] == "order":
        body["user_id"] = f"u-{prefix}-{{seq}}"
        urls = [stack.order + "/orders"]
    else:
        body["order_id"] = f"{prefix}-{{seq}}"
        urls = [u + "/inventory/deduct" for u in stack.inventory]
    body["guard"] = c["guard"]
    body["hold_ms"] = c["hold_ms"]
    for k, v in c["fields"].items():
        body[k] = v.replace("{", "\\{") if isinstance(v, str) else v
    jpath = os.path.join(work, f"cell-{c['cell']}.loadgen.json")
    cmd = [loadgen, "-t", str(min(c["threads"], c["concurrency"])), "-c", str(c["concurrency"]),
           "-n", str(c["requests"]), "--timeout", f"{sc['timeout']}s", "--progress", "off",
           "--latency-dist", "--json", jpath, "--history", hpath, "-m", "POST",
           "-H", "Content-Type: application/json", "-b", json.dumps(body, separators=(",", ":"))]
    if c["rate"]:
        cmd += ["-R", str(c["rate"])]
    if c.get("seed"):
        cmd += ["--seed", str(c["seed"])]
    for u in urls:
        cmd += ["-u", u]
    c["loadgen_cmd"] = " ".join(shquote(a) for a in cmd)
    log.write(f"$ {c['loadgen_cmd']}\n")
    log.flush()
    # Bound: the expected run time plus a generous margin.
    expect = c["requests"] / c["rate"] if c["rate"] else c["requests"] * (c["hold_ms"] + 5) / 1000.0
    limit = 120 + 3 * expect
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        out, _ = proc.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGINT)   # loadgen prints what it has
        try:
            out, _ = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
        c["note"] = f"loadgen stopped after {limit:.0f} s"
    log.write("\n".join(line for line in out.splitlines() if not line.startswith("   ")) + "\n")
    if proc.returncode not in (0, 130) or not os.path.exists(jpath):
        raise RuntimeError(f"loadgen exited {proc.returncode}: {out.strip()[-400:]}")
    with open(jpath, encoding="utf-8") as f:
        lg = json.load(f)
    os.unlink(jpath)

    if lg["errors"].get("timeout"):
        time.sleep(2)   # requests the server still works on
    # A write-behind guard (redis-stream) answers before MySQL has the sale:
    # the cell counts once its queue drained (audit "pending" 0), waited for
    # DRAIN_WAIT_S at most; past that the unflushed tail is reported.
    drain_end = time.monotonic() + DRAIN_WAIT_S
    while True:
        st, audit = http_json("GET", f"{stack.inventory[0]}/inventory/{sku}/audit")
        if st != 200:
            raise RuntimeError(f"audit of {sku} answered {st}: {audit}")
        if not audit.get("pending") or time.monotonic() >= drain_end:
            break
        time.sleep(0.1)
    if audit.get("pending"):
        tail = f"{audit['pending']} sale(s) not yet in MySQL after {DRAIN_WAIT_S} s"
        c["note"] = f"{c['note']}; {tail}" if c.get("note") else tail
    append_ops(hpath, [seeded_op])
    c["checker"] = check_file(hpath, work, ledger_ids(stack, sku) if c["path"] != "order" else None)
    after = [scrape(u) for u in stack.inventory]
    delta = {}
    for b, a in zip(before, after):
        for k, v in a.items():
            d = v - b.get(k, 0.0)
            if d:
                delta[k] = delta.get(k, 0.0) + d

    def msum(name):
        return sum(v for (n, _), v in delta.items() if n == name)

    orders = None
    if c["path"] == "order":
        st, o = http_json("GET", f"{stack.order}/orders?sku={sku}")
        orders = o.get("orders") if st == 200 else None

    ok = sum(v for k, v in lg["by_status"].items() if k in ("200", "201"))
    dur = lg["duration_s"] or 1e-9
    waits = msum("lab_lock_wait_seconds_count")
    outcomes = {}
    for (n, labels), v in delta.items():
        if n == "lab_deductions_total":
            o = label_of(labels, "outcome")
            outcomes[o] = outcomes.get(o, 0) + int(round(v))
    c.update({
        "status": "ok",
        "sold": audit["sold"], "oversold": audit["oversold"],
        "lost_updates": audit["lost_updates"], "consistent": bool(audit["consistent"]),
        "stock_left": audit["stock"], "initial": audit["initial"],
        "orders_written": orders,
        "successes": ok, "answered": lg["requests"], "duration_s": lg["duration_s"],
        "rps": round(lg["requests"] / dur, 1), "ok_per_s": round(ok / dur, 1),
        "latency_ms": lg["latency_ms"],
        "latency_curve": nines_curve(lg.get("latency_dist"), lg["requests"]),
        "by_status": lg["by_status"], "by_error": lg["by_error"],
        "socket_errors": lg["errors"], "reconnects": lg.get("reconnects", 0),
        "retries": int(round(msum("lab_retries_total"))),
        "conflicts": int(round(msum("lab_db_conflicts_total"))),
        "n503": int(lg["by_status"].get("503", 0)),
        "converged": audit.get("converged"),
        "lock_waits": int(round(waits)),
        "lock_wait_s": round(msum("lab_lock_wait_seconds_sum"), 6),
        "lock_wait_mean_ms": round(1000 * msum("lab_lock_wait_seconds_sum") / waits, 3) if waits else 0.0,
        "lock_timeouts": int(round(msum("lab_lock_timeouts_total"))),
        "deductions_by_outcome": outcomes,
        "in_flight": lg.get("in_flight", 0),
        "valid": c["checker"]["valid"],
    })


def shquote(s):
    return s if re.fullmatch(r"[A-Za-z0-9_@%+=:,./-]+", s) else "'" + s.replace("'", "'\\''") + "'"


