"""loadtest/compare's command line: parse, measure (results.json), render."""

import argparse
import datetime
import os
import sys

from . import ROOT, SCEN_DIR
from .driver_choice import DRIVERS, make_driver
from .render import render_dir
from .render.text import fault_text_table, text_table
from .runner import StackDown, run_scenarios
from .scenario import ScenarioError, expand_cells, parse_scenario, resolve_scenario

USAGE = """Matrix runner: runs a scenario (loadtest/scenarios/NAME.conf) cell by cell
against the embedded stack and writes results.json, then renders
results.csv, report.md and report.html from it (see loadtest/README.md,
"Comparison reports").

  loadtest/compare [--scenario NAME|FILE|all] [--repeat N] [--fault-repeat M] [--out DIR]
                   [--dir STACKDIR] [--driver local|external] [--keep] [--seed N]
  loadtest/compare --check FILE...        parse scenario files only
  loadtest/compare --render DIR           re-render the reports from DIR/results.json only

--scenario all runs `default` and `faults` into one report. Python 3
standard library (matplotlib, when present, draws the charts); talks to
127.0.0.1 only."""

# --scenario all: these scenarios, one report.
ALL = ("default", "faults")


def scenario_names(arg):
    if arg == "all" and not os.path.exists(os.path.join(SCEN_DIR, "all.conf")):
        return list(ALL)
    return [arg]


def print_tables(cells):
    print(text_table(cells))
    ft = fault_text_table(cells)
    if ft:
        print()
        print(ft)


def check(files):
    rc = 0
    for f in files:
        try:
            sc = parse_scenario(resolve_scenario(f))
            n = len(expand_cells(sc, None))
            g = "all guards of the running build" if sc["guards"] == ["all"] else f"{n} cells"
            more = (f", plus {len(sc['variants'])} variants"
                    if sc["variants"] and sc["guards"] == ["all"] else "")
            print(f"{f}: ok ({g}{more})")
        except (ScenarioError, RuntimeError) as e:   # RuntimeError: no guard descriptions
            print(f"compare: {e}", file=sys.stderr)
            rc = 2
    return rc


def loadgen_path():
    build = os.environ.get("LAB_BUILD", "build")
    return os.path.join(build if os.path.isabs(build) else os.path.join(ROOT, build), "bin", "loadgen")


def out_folder(arg):
    """(folder, default?) for the reports; the default is reports/<UTC time>/."""
    now = datetime.datetime.now(datetime.timezone.utc)
    reports = os.environ.get("LAB_REPORTS_DIR") or os.path.join(ROOT, "reports")
    out = arg or os.path.join(reports, now.strftime("%Y%m%dT%H%M%SZ"))
    if arg is None and os.path.exists(out):
        out += f"-{os.getpid()}"
    os.makedirs(out, exist_ok=True)
    return os.path.abspath(out), arg is None, reports


def main(argv=None):
    ap = argparse.ArgumentParser(prog="loadtest/compare", description=USAGE,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scenario", default="default",
                    help="NAME (loadtest/scenarios/NAME.conf), FILE, or all (default + faults)")
    ap.add_argument("--repeat", type=int, default=1, metavar="N",
                    help="run every cell N times (1..100); verdicts say 'in k/N runs', figures are medians")
    ap.add_argument("--fault-repeat", type=int, metavar="M",
                    help="run every fault cell M times (default: --repeat)")
    ap.add_argument("--out", help="report folder (default reports/<UTC time>/, reports/latest points at it)")
    ap.add_argument("--dir", help="stack folder (default ./run); without --dir, LAB_INVENTORY_URLS "
                    "(comma list) and LAB_ORDER_URL select services run elsewhere (docker compose)")
    ap.add_argument("--driver", choices=DRIVERS,
                    help="stack driver (default: local, or external when LAB_INVENTORY_URLS is set "
                    "and no --dir)")
    ap.add_argument("--keep", action="store_true", help="leave the stack running at the end")
    ap.add_argument("--seed", type=int, metavar="N",
                    help="random seed of the run (printed and kept in results.json as \"seed\"; "
                    "default: a new one): every cell's load draws from it, so --seed N repeats "
                    "the same schedule")
    ap.add_argument("--check", nargs="+", metavar="FILE", help="parse scenario files, print their cells, exit")
    ap.add_argument("--render", "--render-only", dest="render", metavar="DIR",
                    help="rewrite the reports from DIR/results.json (no stack, no measuring)")
    a = ap.parse_args(argv)

    if a.check:
        return check(a.check)
    if a.render:
        try:
            res = render_dir(a.render)
        except (OSError, ValueError) as e:
            print(f"compare: cannot render {a.render}: {e}", file=sys.stderr)
            return 2
        print_tables(res["cells"])
        return 0
    if a.seed is not None and not 1 <= a.seed < 2 ** 62:
        print("compare: --seed must be 1..2^62-1", file=sys.stderr)
        return 2
    if not 1 <= a.repeat <= 100 or (a.fault_repeat is not None and not 1 <= a.fault_repeat <= 100):
        print("compare: --repeat and --fault-repeat must be 1..100", file=sys.stderr)
        return 2

    try:
        scs = [parse_scenario(resolve_scenario(n)) for n in scenario_names(a.scenario)]
    except ScenarioError as e:
        print(f"compare: {e}", file=sys.stderr)
        return 2
    loadgen = loadgen_path()
    if not os.access(loadgen, os.X_OK):
        print(f"compare: {loadgen} missing: run 'make' first", file=sys.stderr)
        return 2

    out, default_out, reports = out_folder(a.out)
    with open(os.path.join(out, "compare.log"), "w", encoding="utf-8") as log:
        try:
            stack = make_driver(a.driver, a.dir, log)
        except ValueError as e:
            print(f"compare: {e}", file=sys.stderr)
            return 2
        stack.keep = a.keep
        try:
            res = run_scenarios(scs, stack, loadgen, out, a.repeat, log, a.fault_repeat, a.seed)
        except StackDown as e:
            msg = str(e)
            print(f"compare: the stack did not start:\n{msg}", file=sys.stderr)
            if "is taken" in msg:
                print("compare: another process holds a port; pick free ones, e.g. "
                      "LAB_PORT_BASE=31000 (order 31000, inventory 31001.., MariaDB 31050, Redis 31060)",
                      file=sys.stderr)
            return 3
    # Rendering reads results.json, as --render does.
    res = render_dir(out)
    if default_out:
        latest = os.path.join(reports, "latest")
        tmp = latest + f".tmp{os.getpid()}"
        os.symlink(os.path.basename(out), tmp)
        os.replace(tmp, latest)
    print()
    print_tables(res["cells"])
    print()
    print(f"compare: {len(res['cells'])} cells in {res['elapsed_s']:.0f} s; report: {out}/report.html"
          f" (also report.md, results.json, results.csv)")
    if res["interrupted"]:
        return 130
    return 1 if any(c.get("status") == "error" for c in res["cells"]) else 0
