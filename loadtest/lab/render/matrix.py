"""The decision matrix ("which guard, and what breaks it") and the guard
sections, for report.html and report.md. Reads results.json's "matrix"
and "guards" (the runner fills both; older files get the matrix computed
from their cells)."""

from ..verdicts import MATRIX_COLS, matrix_of
from .common import E, md_escape

COL_TITLES = {"1 instance": "1 instance", "N instances": "N instances", "pause": "pause",
              "crash": "crash", "failover": "failover", "restart": "restart",
              "reseed": "reseed", "sigterm": "SIGTERM"}
MARK = {"held": "held", "broke": "BROKE", "not run": "not run", "error": "error"}


def matrix(res):
    return res.get("matrix") or matrix_of(res["cells"])


def guard_of(row):
    return row.split("/", 1)[0]


def rows_in_order(res):
    """Matrix rows: guards in the order the cells first name them, each
    guard's variants (redis-lock/fencing) right after it."""
    m = matrix(res)
    order = []
    for c in res["cells"]:
        row = c["label"].split("/", 1)[1] if c.get("fault") and "/" in c["label"] else c["label"]
        if row in m and row not in order:
            order.append(row)
    for row in m:
        if row not in order:
            order.append(row)
    guards = []
    for r in order:
        if guard_of(r) not in guards:
            guards.append(guard_of(r))
    return [r for g in guards for r in order if guard_of(r) == g]


def entry_title(e):
    t = e.get("text") or e["verdict"]
    if e.get("cell"):
        t += f" (cell {e['cell']})"
    return t


def html_matrix(res):
    m = matrix(res)
    guides = res.get("guards") or {}
    rows = rows_in_order(res)
    if not rows:
        return []
    n = res.get("repeat", 1)
    o = ['<section id="matrix"><h2>Which guard? The decision matrix</h2>',
         '<p class="meta">One row per guard (and per guard option a fault scenario tried). '
         "held = the audit was exact (0 oversold, 0 lost updates; for crash also: buyers sold "
         "again); BROKE = it was not; held (invalid) = the audit was exact but the fault cell's "
         "history checker found operations no order explains, or an answer the ledger contradicts "
         "(the cell shows them)"
         + (f"; every verdict over {n} runs (k/{n} = runs that agree)" if n > 1 else "")
         + "; not run = no cell measured it in this report. Sales/s and p99 come from the load cell "
         "with the most instances (median run). Click a guard for how it works and what breaks it, "
         "a verdict for its cell.</p>",
         '<div class="wide"><table class="matrix"><thead><tr><th class="l">guard</th><th class="l">needs</th>'
         + "".join(f"<th>{E(COL_TITLES[c])}</th>" for c in MATRIX_COLS)
         + '<th>sales/s</th><th>p99 ms</th><th class="l">use it when</th></tr></thead><tbody>']
    for r in rows:
        g = guard_of(r)
        gd = guides.get(g, {})
        e = m[r]
        tds = [f'<td class="l"><a href="#guard-{E(g)}"><code>{E(r)}</code></a></td>',
               f'<td class="l">{E(gd.get("needs", ""))}</td>']
        for col in MATRIX_COLS:
            v = e[col]
            cls = {"held": "good", "broke": "bad"}.get(v["verdict"], "skip")
            txt = MARK.get(v["verdict"], v["verdict"])
            if v.get("runs"):
                txt += f" {v['runs']}"
            if v.get("valid") is False and v["verdict"] == "held":
                cls, txt = "warn", txt + " (invalid)"
            inner = E(txt)
            if v.get("cell"):
                inner = f'<a href="#cell-{v["cell"]}">{inner}</a>'
            tds.append(f'<td class="v {cls}" title="{E(entry_title(v))}">{inner}</td>')
        tds.append(f"<td>{E(fmt(e.get('ok_per_s')))}</td><td>{E(fmt(e.get('p99_ms')))}</td>")
        tds.append(f'<td class="l use">{E(gd.get("use_when", "")) if "/" not in r else "with this option"}</td>')
        o.append("<tr>" + "".join(tds) + "</tr>")
    o.append("</tbody></table></div></section>")
    return o


def fmt(v):
    if v is None:
        return "-"
    return f"{v:.0f}" if v >= 100 else f"{v:.1f}"


def md_matrix(res):
    m = matrix(res)
    guides = res.get("guards") or {}
    rows = rows_in_order(res)
    if not rows:
        return []
    o = ["## Which guard? The decision matrix", "",
         "| guard | needs | " + " | ".join(COL_TITLES[c] for c in MATRIX_COLS) + " | sales/s | p99 ms | use it when |",
         "|---|---|" + "---|" * len(MATRIX_COLS) + "---|---|---|"]
    for r in rows:
        g = guard_of(r)
        gd = guides.get(g, {})
        e = m[r]
        vals = []
        for col in MATRIX_COLS:
            v = e[col]
            t = MARK.get(v["verdict"], v["verdict"]) + (f" {v['runs']}" if v.get("runs") else "")
            if v.get("valid") is False and v["verdict"] == "held":
                t += " (invalid)"
            vals.append(f"**{t}**" if v["verdict"] == "broke" else t)
        use = gd.get("use_when", "") if "/" not in r else "with this option"
        o.append(f"| `{md_escape(r)}` | {md_escape(gd.get('needs', ''))} | " + " | ".join(vals)
                 + f" | {fmt(e.get('ok_per_s'))} | {fmt(e.get('p99_ms'))} | {md_escape(use)} |")
    o.append("")
    return o


def html_guard_sections(res):
    """One <section id="guard-NAME"> per guard: how, statements, seed,
    what breaks it (fault cells as evidence), figures, code file."""
    guides = res.get("guards") or {}
    m = matrix(res)
    rows = rows_in_order(res)
    guards = []
    for r in rows:
        if guard_of(r) not in guards:
            guards.append(guard_of(r))
    if not guards:
        return []
    o = ["<h2>The guards</h2>"]
    for g in guards:
        gd = guides.get(g, {})
        o.append(f'<section class="guard" id="guard-{E(g)}"><h3><code>{E(g)}</code>'
                 f'{" &mdash; " + E(gd["how_short"]) if gd.get("how_short") else ""}</h3>')
        o.append(f'<p class="meta">needs: {E(gd.get("needs", "?"))} &middot; use it when: '
                 f'{E(gd.get("use_when", "?"))} &middot; code: <code>{E(gd.get("code", ""))}</code>'
                 + (f" &middot; from: {E(gd['seed'])}" if gd.get("seed") else "") + "</p>")
        if gd.get("how"):
            o.append("<ul>" + "".join(f"<li>{E(x)}</li>" for x in gd["how"]) + "</ul>")
        if gd.get("statements"):
            o.append(f"<pre>{E(gd['statements'])}</pre>")
        o.append(f"<p><b>What breaks it:</b> {E(gd.get('breaks', ''))}</p>")
        ev = []
        for r in rows:
            if guard_of(r) != g:
                continue
            for col in MATRIX_COLS:
                v = m[r][col]
                if v.get("cell"):
                    ev.append(f'<li><code>{E(r)}</code> {E(col)}: <a href="#cell-{v["cell"]}">'
                              f'{E(v.get("text") or v["verdict"])}</a></li>')
        if ev:
            o.append("<p><b>Evidence in this report:</b></p><ul>" + "".join(ev) + "</ul>")
        e = m.get(g) or {}
        if e.get("ok_per_s") is not None:
            o.append(f'<p class="meta">figures ({e.get("instances")} instances, median run): '
                     f'{fmt(e["ok_per_s"])} sales/s, p99 {fmt(e.get("p99_ms"))} ms</p>')
        o.append('<p class="meta"><a href="#matrix">back to the matrix</a></p></section>')
    return o


def md_guard_sections(res):
    guides = res.get("guards") or {}
    guards = []
    for r in rows_in_order(res):
        if guard_of(r) not in guards:
            guards.append(guard_of(r))
    if not guards:
        return []
    o = ["## The guards", ""]
    for g in guards:
        gd = guides.get(g, {})
        o += [f"### `{md_escape(g)}`", "",
              f"needs: {md_escape(gd.get('needs', '?'))}; use it when: {md_escape(gd.get('use_when', '?'))}; "
              f"code: `{md_escape(gd.get('code', ''))}`" + (f"; from: {md_escape(gd['seed'])}" if gd.get("seed") else ""),
              ""]
        o += [f"- {md_escape(x)}" for x in gd.get("how", [])]
        o += ["", f"What breaks it: {md_escape(gd.get('breaks', ''))}", ""]
    return o
