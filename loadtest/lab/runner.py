"""Measuring: run a scenario's cells (each --repeat times) through a stack
driver and write results.json. Nothing here renders; lab.render reads the
file this writes."""

import copy
import datetime
import json
import os
import signal
import subprocess
import sys
import time

from . import ROOT
from .cell import run_cell
from .holds import run_holds_cell
from .shop import run_shop_cell
from .drivers import CellSkip, LocalStack
from .faults import FaultRunner
from . import guardinfo
from .machine import git_rev, machine_info
from .net import http_json
from .faultplan import FAULTS, HOLD_FAULTS
from .scenario import ScenarioError, expand_cells, parse_scenario, resolve_scenario
from .verdicts import aggregate_runs, matrix_of, measured_text, recover_text, verdict

SCENARIO_KEYS = ("name", "description", "guards", "instances", "path", "stock", "requests",
                 "concurrency", "threads", "hold_ms", "rate", "timeout", "fields", "variants", "fault",
                 "kind", "ttl_ms", "pay_pct", "late_pct", "limit_per_user", "users", "retries",
                 "client_timeout_ms")
SHOP_KINDS = ("cart", "limits", "retry")
# the GET /guards flag a shop kind needs (none: every guard runs it)
SHOP_FLAG = {"cart": "carts", "limits": "limits"}


class StackDown(Exception):
    """The stack did not start; str() is what it said."""


def cell_tag(c, n):
    if c.get("fault"):
        return f"[{c['cell']}/{n}] {c['label']}"
    if c.get("kind") == "holds":
        return (f"[{c['cell']}/{n}] holds {c['label']} x{c['instances']} stock {c['stock']} "
                f"buyers {c['requests']} ttl {c['ttl_ms']} ms")
    if c.get("kind") in SHOP_KINDS:
        return (f"[{c['cell']}/{n}] {c['kind']} {c['label']} x{c['instances']} stock {c['stock']} "
                f"req {c['requests']} hold {c['hold_ms']}")
    return (f"[{c['cell']}/{n}] {c['label']} x{c['instances']} {c['path']} "
            f"stock {c['stock']} req {c['requests']} conn {c['concurrency']} hold {c['hold_ms']}"
            f"{' rate ' + str(c['rate']) if c['rate'] else ''}")


def run_one(c, sc, stack, faults, run_id, loadgen, out, log, api=None):
    """One run of one cell, in place: status ok | skipped | error."""
    try:
        if c.get("fault") in HOLD_FAULTS:
            stack.up(2)
            run_holds_cell(c, sc, stack, run_id, out, log)
            return
        if c.get("fault"):
            if faults is None:
                raise CellSkip("fault scenarios need a stack driver with fault verbs "
                               "(the embedded stack, deploy/local/stack)")
            faults.run(c)
            return
        stack.up(c["instances"])
        if c.get("kind") == "holds":
            run_holds_cell(c, sc, stack, run_id, out, log)
            return
        if c.get("kind") in SHOP_KINDS:
            flag = SHOP_FLAG.get(c["kind"])
            run_shop_cell(c, sc, stack, run_id, bool((api or {}).get(c["guard"], {}).get(flag, True)))
            return
        if c["path"] == "order":
            stack.ensure_order()
        run_cell(c, sc, stack, run_id, loadgen, out, log)
    except CellSkip as e:
        c.update({"status": "skipped", "reason": str(e)})
    except (RuntimeError, OSError, ValueError, KeyError, subprocess.SubprocessError) as e:
        c.update({"status": "error", "reason": str(e).splitlines()[0][:200] if str(e) else type(e).__name__})
        log.write(f"cell {c['cell']} error: {e}\n")


def run_line(c):
    if c.get("status") == "skipped":
        return f"skipped: {c['reason']}"
    if c.get("status") != "ok":
        return f"error: {c['reason']}"
    if c.get("fault"):
        return (f"expected {c['expected']}, measured {c['measured']} ({measured_text(c)}); "
                f"recover {recover_text(c)}")
    if c.get("shop"):
        return f"expected {c['expected']}, measured {c['measured']} ({c['shop']['why']})"
    if c.get("holds"):
        n = c["holds"]
        return (f"expected {c['expected']}, measured {n['verdict']} ({verdict(c)}); held {n['held']}, "
                f"paid {n['paid']}, expired {n['expired']}, late refused {n['late_refused']}, "
                f"late fresh {n['late_fresh']}, late stale {n['late_stale']}, resold {n['resold']}")
    return f"{verdict(c)}, {c['ok_per_s']} ok/s, p99 {c['latency_ms']['p99']} ms"


def needs_failover(sc):
    """A failover cell among the scenario's faults (named or in a listed file)."""
    if "failover" in sc["fault"]:
        return True
    for name in sc["fault"]:
        if name not in FAULTS:
            try:
                if "failover" in parse_scenario(resolve_scenario(name))["fault"]:
                    return True
            except ScenarioError:
                pass
    return False


def cell_seed(seed, run):
    """One run's seed: the run's own for the first run of every cell, so a
    cell's reproduce command (a one-cell scenario with --seed) repeats it;
    a later run's derived from it (never 0: loadgen's "from the clock")."""
    return seed if run == 1 else (seed * 1000003 + run) % (2 ** 62) or 1


def measure(sc, stack, loadgen, out, repeat, log, fault_repeat=None, seed=1):
    """Runs every cell `repeat` times; returns (cells, machine, interrupted,
    {guard: GET /guards entry}). Raises StackDown when the stack does not
    start."""
    run_id = time.strftime("%H%M%S", time.gmtime()) + f"{os.getpid() % 10000:04d}"
    cells, interrupted, faults, api = [], False, None, {}
    if sc.get("mysql") == "galera3":
        from .cluster import measure_cluster
        try:
            try:
                cells, sc["cluster"], api = measure_cluster(sc, stack, loadgen, out, log, run_id)
            except (RuntimeError, CellSkip) as e:
                raise StackDown(str(e)) from None
            machine = machine_info(stack)
        except KeyboardInterrupt:
            interrupted = True
            print("compare: interrupted; writing what was measured", file=sys.stderr)
            machine = machine_info(None)
        return [c for c in cells if "status" in c], machine, interrupted, api
    try:
        try:
            if sc["fault"] and stack.supports_faults:
                faults = FaultRunner(stack, loadgen, out, log, run_id, sc["sku_prefix"])
                faults.ensure(needs_failover(sc))
            else:
                stack.up(min(sc["instances"]) if not stack.supports_faults else sc["instances"][0])
        except (RuntimeError, CellSkip) as e:
            raise StackDown(str(e)) from None
        st, gj = http_json("GET", stack.inventory[0] + "/guards")
        available = [g["name"] for g in gj.get("guards", [])] if st == 200 else []
        api = {g["name"]: g for g in gj.get("guards", [])} if st == 200 else {}
        if api:
            guardinfo.load(list(api.values()))   # the plan's capabilities: this build's
        reserving = [g["name"] for g in gj.get("guards", []) if g.get("holds")] if st == 200 else []
        cells = expand_cells(sc, reserving if sc.get("kind") == "holds" else available)
        print(f"compare: guards in this build: {' '.join(available)}; {len(cells)} cells"
              f"{f', {repeat} runs each' if repeat > 1 else ''}", flush=True)
        for c in cells:
            tag = cell_tag(c, len(cells))
            if c["guard"] not in available:
                c.update({"status": "skipped", "reason": "guard not in this build"})
                print(f"{tag}: skipped: guard '{c['guard']}' not in this build", flush=True)
                continue
            if (c.get("kind") == "holds" or c.get("fault") in HOLD_FAULTS) and c["guard"] not in reserving:
                c.update({"status": "skipped", "reason": "guard does not reserve (GET /guards: holds false)"})
                print(f"{tag}: skipped: {c['reason']}", flush=True)
                continue
            flag = SHOP_FLAG.get(c.get("kind"))
            if flag == "carts" and not api.get(c["guard"], {}).get("carts"):
                c.update({"status": "skipped", "reason": "guard takes no carts (GET /guards: carts false)"})
                print(f"{tag}: skipped: {c['reason']}", flush=True)
                continue
            unsafe = (c["instances"] > 1
                      and api.get(c["guard"], {}).get("safe_across_instances") is False)
            if c.get("kind") == "limits" and unsafe:
                # Its stock races whatever the limit does, and with few sales
                # past the limit the race may or may not show: no verdict the
                # lab can expect. The limit is measured under the safe guards.
                c.update({"status": "skipped", "reason": "not safe across instances (GET /guards): "
                          "its stock races anyway; see the default scenario"})
                print(f"{tag}: skipped: {c['reason']}", flush=True)
                continue
            if c.get("kind") == "cart" and unsafe:
                c["expected"], c["expected_why"] = "broke", ("GET /guards: safe_across_instances false: "
                                                             "its sales race on the stock over 2+ instances")
            if flag == "limits" and not api.get(c["guard"], {}).get("limits"):
                c["expected"], c["expected_why"] = "refused", ("GET /guards: limits false: a limited SKU's "
                                                               "sale is a 400 under this guard (not offered)")
            runs = []
            n = (fault_repeat or repeat) if c.get("fault") else repeat
            for r in range(1, n + 1):
                one = copy.deepcopy(c)
                one["run"] = r
                one["seed"] = cell_seed(seed, r)
                run_one(one, sc, stack, faults, run_id, loadgen, out, log, api)
                runs.append(one)
                rtag = f"{tag} run {r}/{n}" if n > 1 else tag
                print(f"{rtag}: {run_line(one)}", flush=True)
                if one["status"] == "skipped":
                    break   # the same reason holds for every run
            c.clear()
            c.update(aggregate_runs(runs))
        machine = machine_info(stack)
    except KeyboardInterrupt:
        interrupted = True
        print("compare: interrupted; writing what was measured", file=sys.stderr)
        machine = machine_info(None)
    return [c for c in cells if "status" in c], machine, interrupted, api


def results_doc(sc, cells, machine, interrupted, t0, now, loadgen, repeat, driver):
    """The results.json document: the single source every rendering reads."""
    res = {
        "version": 2, "started": now.strftime("%Y-%m-%d %H:%M:%S UTC"),
        "elapsed_s": round(time.time() - t0, 1), "interrupted": interrupted,
        "git": git_rev(), "machine": machine,
        "run_id": now.strftime("%H%M%S") + f"{os.getpid() % 10000:04d}",
        "loadgen": os.path.relpath(loadgen, ROOT),
        "port_base": os.environ.get("LAB_PORT_BASE", ""),
        "driver": driver, "repeat": repeat,
        "scenario": {k: sc[k] for k in SCENARIO_KEYS},
        "cells": cells,
    }
    sfile = os.path.abspath(sc["file"])
    res["scenario"]["file"] = os.path.relpath(sfile, ROOT) if sfile.startswith(ROOT + os.sep) else sfile
    res["matrix"] = matrix_of(cells)
    return res


def write_results(res, out):
    with open(os.path.join(out, "results.json"), "w", encoding="utf-8") as f:
        json.dump(res, f, indent=1)
        f.write("\n")


def run_scenarios(scs, stack, loadgen, out, repeat, log, fault_repeat=None, seed=None):
    """Measure one or more parsed scenarios on one stack into one
    results.json (several: `make demo SCENARIO=all`). seed: the run's random
    seed (None: a new one), printed and kept as "seed". Returns the document."""
    if seed is None:
        seed = int.from_bytes(os.urandom(4), "big") + 1
    print(f"compare: seed {seed} (repeat this run's schedule with --seed {seed})", flush=True)
    t0 = time.time()
    now = datetime.datetime.now(datetime.timezone.utc)

    def on_term(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, on_term)

    all_cells, machine, interrupted, api = [], None, False, {}
    try:
        for i, sc in enumerate(scs):
            if interrupted:
                break
            print(f"compare: scenario {sc['name']} ({sc['file']}), stack {stack.dir}"
                  f"{' (LAB_PORT_BASE=' + os.environ['LAB_PORT_BASE'] + ')' if os.environ.get('LAB_PORT_BASE') else ''}",
                  flush=True)
            cells, machine, interrupted, more = measure(sc, stack, loadgen, out, repeat, log, fault_repeat,
                                                        seed)
            api.update(more)
            for c in cells:
                if len(scs) > 1:
                    c["scenario"] = sc["name"]
                c["cell"] = len(all_cells) + 1
                all_cells.append(c)
    finally:
        if stack.started_here and not getattr(stack, "keep", False):
            stack.down()
            print(f"compare: stack stopped ({stack.dir})")
        elif stack.instances is not None and isinstance(stack, LocalStack):
            why = "--keep" if getattr(stack, "keep", False) else "it was running before"
            print(f"compare: stack left running in {stack.dir} ({why}); stop it with "
                  f"deploy/local/stack down --dir {stack.dir}")
    sc0 = scs[0] if len(scs) == 1 else merged_scenario(scs)
    res = results_doc(sc0, all_cells, machine or machine_info(None), interrupted, t0, now,
                      loadgen, repeat, stack.name)
    res["guards"] = guard_info(all_cells, api)
    res["fault_repeat"] = fault_repeat or repeat
    res["seed"] = seed
    for s in scs:
        if s.get("cluster"):
            res["cluster"] = s["cluster"]
            from .cluster import write_cluster_md
            write_cluster_md(res, out)
    if len(scs) > 1:
        res["scenarios"] = [{k: s[k] for k in ("name", "description", "file")} for s in scs]
        res["scenario"]["file"] = " + ".join(
            os.path.relpath(os.path.abspath(s["file"]), ROOT) for s in scs)
    write_results(res, out)
    return res


def guard_info(cells, api):
    """{guard: its description as GET /guards served it (lab.guardinfo)}
    for every guard the cells name, kept in results.json so a saved run
    renders without a stack."""
    if api:
        guardinfo.load(list(api.values()))
    return {c["guard"]: guardinfo.report_entry(c["guard"]) for c in cells}


def merged_scenario(scs):
    """The scenario block of a report over several scenarios."""
    m = dict(scs[0])
    m["name"] = " + ".join(s["name"] for s in scs)
    m["description"] = "; ".join(f"{s['name']}: {s['description']}" for s in scs if s.get("description"))
    m["fault"] = [f for s in scs for f in s["fault"]]
    return m
