"""report.md: the verdict grid, every cell, the fault cells."""

import json

from ..verdicts import verdict
from .common import HOLDS_COLS, HOLDS_NOTE, SHOP_TABLES, holds_rows, shop_rows, md_escape, table_rows, verdict_grid
from .matrix import md_guard_sections, md_matrix
from .text import fault_rows, FAULT_COLS


def render_md(res):
    cells = res["cells"]
    m = res["machine"]
    sc = res["scenario"]
    o = [f"# Comparison report: {md_escape(sc['name'])}", ""]
    if sc.get("description"):
        o += [md_escape(sc["description"]), ""]
    o += [f"- run: {md_escape(res['started'])} ({res['elapsed_s']:.0f} s), commit `{md_escape(res['git'])}`"
          + (f", seed {res['seed']} (`--seed {res['seed']}` repeats it)" if res.get("seed") else ""),
          f"- machine: {m['cores']} cores, kernel {md_escape(m['kernel'])}, {md_escape(m['mariadb'])}, "
          f"{md_escape(m['redis'])}",
          f"- scenario file: `{md_escape(sc['file'])}`", ""]
    o += md_matrix(res)
    if res.get("cluster"):
        from .cluster import cluster_table
        o += ["## On a cluster (MariaDB Galera, 3 nodes)", ""] + cluster_table(res) + [""]
    o += render_faults_md(cells, md_escape)
    o += render_holds_md(cells)
    o += render_shop_md(cells)
    rows, cols, grid = verdict_grid([c for c in cells if not c.get("fault")] or cells)
    o += ["## Verdict", "", "| guard | " + " | ".join(md_escape(c) for c in cols) + " |",
          "|---|" + "---|" * len(cols)]
    for r in rows:
        vals = []
        for col in cols:
            c = grid.get((r, col))
            if not c:
                vals.append("")
                continue
            v = verdict(c)
            vals.append(f"**{md_escape(v)}**" if c.get("status") == "ok" and not c["consistent"] else md_escape(v))
        o.append(f"| `{md_escape(r)}` | " + " | ".join(vals) + " |")
    o += checker_md([c for c in cells if not c.get("fault")])
    o.append("")
    o += md_guard_sections(res)
    heads, trs = table_rows(cells, None)
    o += ["", "## All cells", "", "| " + " | ".join(heads) + " |", "|" + "---|" * len(heads)]
    o += ["| " + " | ".join(md_escape(x) for x in r) + " |" for r in trs]
    vs = [c for c in cells if c.get("fields")]
    if vs or sc.get("variants"):
        o += ["", "## Extra request fields", ""]
        for c in cells:
            if c.get("fields"):
                o.append(f"- cell {c['cell']} `{md_escape(c['label'])}`: "
                         f"`{md_escape(json.dumps(c['fields'], separators=(',', ':')))}`")
    o += ["", "Verdict: `sold` counts ledger rows; `oversold` = max(0, sold - initial); "
          "`lost updates` = sold - (initial - stock). Throughput `ok/s` = successful deductions per "
          "second, `req/s` = all answers per second. Latency from loadgen (closed loop: from send; "
          "open loop: from the intended send time).", ""]
    return "\n".join(o)



def render_faults_md(cells, esc):
    rows = fault_rows(cells)
    if not rows:
        return []
    o = ["## Faults", "",
         "Each cell: open-loop buyers (loadgen -R) while the stack's verbs inject the fault at a known "
         "moment. held = audit exact (0 oversold, 0 lost updates; for crash also: buyers sold again). "
         "Time to recover = from the fault to the first sale after it (restart: after the backend "
         "is back), from the ledger's timestamps.", "",
         "| " + " | ".join(FAULT_COLS) + " |", "|" + "---|" * len(FAULT_COLS)]
    for c, r in rows:
        v = r[4]
        if c.get("status") == "ok" and c["measured"] != c["expected"]:
            v = f"**{v}**"
        o.append("| " + " | ".join(esc(x) for x in r[:4]) + f" | {esc(v)} | {esc(r[5])} | {esc(r[6])} |")
    o += ["", "Why each verdict is expected:", ""]
    for c, _ in rows:
        if c.get("expected_why"):
            o.append(f"- `{esc(c['label'])}`: {esc(c['expected_why'])}")
    o += ["", "Outcomes and invariant per fault cell (ok / refused / indeterminate; oversold, lost, "
          "undersold, duplicates; valid?):", ""]
    for c, _ in rows:
        if c.get("outcomes") and c.get("invariant"):
            oc, inv = c["outcomes"], c["invariant"]
            ids = [f"{k}: {' '.join(v)}" for k, v in (inv.get("violations") or {}).items() if v]
            o.append(f"- `{esc(c['label'])}`: ok {oc['ok']}, refused {oc['refused']}, indeterminate "
                     f"{oc['indeterminate']}; oversold {inv['oversold']}, lost {inv['lost_updates']}, "
                     f"undersold {inv['undersold']}, duplicates {inv['duplicates']}; valid "
                     f"{'yes' if inv['valid'] else 'no'}" + (f"; order_ids {esc('; '.join(ids))}" if ids else ""))
    o += checker_md([c for c, _ in rows])
    o += ["", "Fault moments (seconds since the load started):", ""]
    for c, _ in rows:
        if c.get("events"):
            o.append(f"- `{esc(c['label'])}`: " + "; ".join(f"{e['t']:.1f} s {esc(e['what'])}"
                                                          for e in c["events"]))
    o.append("")
    return o


def render_holds_md(cells):
    rows = holds_rows(cells)
    if not rows:
        return []
    o = ["## Holds", "", "| " + " | ".join(h for h, _ in HOLDS_COLS) + " |", "|" + "---|" * len(HOLDS_COLS)]
    for c, r in rows:
        if r[-1] != r[-2]:
            r = r[:-1] + [f"**{r[-1]}**"]
        o.append("| " + " | ".join(md_escape(x) for x in r) + " |")
    o += ["", md_escape(HOLDS_NOTE), ""]
    for c, _ in rows:
        why = f"`{md_escape(c['label'])}`: expected {c.get('expected')}: {md_escape(c.get('expected_why', ''))}"
        if c.get("audit_why"):
            why += f"; the audit: {md_escape(c['audit_why'])}"
        o.append(f"- {why}")
    o.append("")
    return o


def render_shop_md(cells):
    """One table per shop kind (cart, limits, retry) that ran."""
    o = []
    for kind, (title, cols, note) in SHOP_TABLES.items():
        rows = shop_rows(cells, kind)
        if not rows:
            continue
        o += [f"## {title}", "", "| " + " | ".join(h for h, _ in cols) + " |", "|" + "---|" * len(cols)]
        for c, r in rows:
            if not r[-1].startswith(r[-2]):
                r = r[:-1] + [f"**{r[-1]}**"]
            o.append("| " + " | ".join(md_escape(x) for x in r) + " |")
        o += ["", md_escape(note), ""]
        for c, _ in rows:
            o.append(f"- `{md_escape(c['label'])}`: expected {c.get('expected')}: "
                     f"{md_escape(c.get('expected_why', ''))}; measured: {md_escape(c['shop']['why'])}")
        o.append("")
    return o


def checker_md(cells):
    """The history checker's verdict per cell: valid?, its reason and the
    order_ids of each violation class."""
    rows = [c for c in cells if c.get("checker")]
    if not rows:
        return []
    o = ["", "History checker per cell (every operation against the counter model, joined with "
         "the ledger; report.html draws each invalid cell's window):", ""]
    for c in rows:
        ch = c["checker"]
        v = {True: "valid", False: "**invalid**"}.get(ch.get("valid"), "unknown")
        ids = [f"{k}: {' '.join(ids)}" for k, ids in (ch.get("violations") or {}).items() if ids]
        o.append(f"- cell {c['cell']} `{md_escape(c['label'])}`: {v}, {ch.get('ops', 0)} operations; "
                 f"{md_escape(ch.get('reason', ''))}" + (f"; order_ids {md_escape('; '.join(ids))}" if ids else ""))
    return o
