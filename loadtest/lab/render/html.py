"""report.html: one self-contained page (inline CSS and SVG, no network,
no JavaScript)."""

import json

from ..verdicts import verdict, verdict_class
from .common import E, ordered_unique, series_of, table_rows, verdict_grid
from .svg import svg_bars, svg_latency, svg_timeline
from .text import fault_rows, FAULT_COLS


CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:24px;color:#222;max-width:1400px}
h1{font-size:22px}h2{font-size:18px;margin-top:28px;border-bottom:1px solid #ddd}
table{border-collapse:collapse;font-size:12px;margin:8px 0}
td,th{border:1px solid #ccc;padding:3px 6px;text-align:right;white-space:nowrap}
th{background:#f3f3f3}td.l,th.l{text-align:left}
td.good{background:#e3f4e1}td.bad{background:#fbe0df;font-weight:bold}td.skip{background:#f1f1f1;color:#777}
.meta{font-size:13px;color:#444}.meta code{background:#f3f3f3;padding:0 3px}
svg{display:block;margin:12px 0;max-width:100%;height:auto;font-family:inherit}
.wide{overflow-x:auto}
"""


def render_html(res):
    cells = res["cells"]
    m = res["machine"]
    sc = res["scenario"]
    o = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
         f"<title>{E('Comparison report: ' + sc['name'])}</title>", f"<style>{CSS}</style></head><body>",
         f"<h1>Comparison report: {E(sc['name'])}</h1>"]
    if sc.get("description"):
        o.append(f"<p>{E(sc['description'])}</p>")
    o.append('<p class="meta">')
    o.append(f"run {E(res['started'])} ({res['elapsed_s']:.0f} s) &middot; commit <code>{E(res['git'])}</code>"
             f" &middot; scenario file <code>{E(sc['file'])}</code><br>")
    o.append(f"machine: {m['cores']} cores, kernel {E(m['kernel'])}, {E(m['mariadb'])}, {E(m['redis'])}"
             f" &middot; loadgen <code>{E(res.get('loadgen', ''))}</code></p>")

    o += render_faults_html(cells, E)
    rows, cols, grid = verdict_grid(cells)
    o.append('<h2>Verdict per guard</h2><table class="verdicts"><tr><th class="l">guard</th>'
             + "".join(f"<th>{E(c)}</th>" for c in cols) + "</tr>")
    for r in rows:
        o.append(f'<tr><td class="l"><code>{E(r)}</code></td>')
        for col in cols:
            c = grid.get((r, col))
            if not c:
                o.append("<td></td>")
            else:
                o.append(f'<td class="l {verdict_class(c)}">{E(verdict(c))}</td>')
        o.append("</tr>")
    o.append("</table>")

    ser = series_of(cells)
    ok = [c for c in cells if c.get("status") == "ok"]
    series = ordered_unique(ser[c["cell"]] for c in cells)
    over = {(c["label"], ser[c["cell"]]): c["oversold"] for c in ok}
    lost = {(c["label"], ser[c["cell"]]): c["lost_updates"] for c in ok}
    okps = {(c["label"], ser[c["cell"]]): c["ok_per_s"] for c in ok}
    rps = {(c["label"], ser[c["cell"]]): c["rps"] for c in ok}
    o.append("<h2>Charts</h2>")
    o.append(svg_bars("Units oversold per guard", rows, series, over, "units oversold", "chart oversold"))
    o.append(svg_bars("Lost updates per guard", rows, series, lost, "lost updates", "chart lost"))
    o.append(svg_bars("Throughput per guard: successful deductions/s", rows, series, okps,
                      "deductions/s", "chart throughput"))
    o.append(svg_bars("Throughput per guard: answers/s (all statuses)", rows, series, rps,
                      "requests/s", "chart rps"))
    for s in series:
        curves = [(c["label"], c["latency_curve"]) for c in ok if ser[c["cell"]] == s and c.get("latency_curve")]
        if curves:
            o.append(svg_latency(f"Latency percentiles ({s})", curves))

    heads, trs = table_rows(cells, None)
    o.append('<h2>All cells</h2><div class="wide"><table class="cells"><tr>'
             + "".join(f'<th class="{"l" if h in ("guard", "path", "status", "errors", "verdict") else ""}">{E(h)}</th>'
                       for h in heads) + "</tr>")
    for c, r in zip(cells, trs):
        tds = []
        for h, v in zip(heads, r):
            cl = "l" if h in ("guard", "path", "status", "errors") else ""
            if h == "verdict":
                cl = "l " + verdict_class(c)
            tds.append(f'<td class="{cl}">{E(v)}</td>')
        o.append("<tr>" + "".join(tds) + "</tr>")
    o.append("</table></div>")
    fx = [c for c in cells if c.get("fields")]
    if fx:
        o.append("<h2>Extra request fields</h2><ul>")
        for c in fx:
            o.append(f"<li>cell {c['cell']} <code>{E(c['label'])}</code>: "
                     f"<code>{E(json.dumps(c['fields'], separators=(',', ':')))}</code></li>")
        o.append("</ul>")
    o.append("<h2>Commands</h2><ul>")
    for c in cells:
        if c.get("loadgen_cmd"):
            o.append(f"<li>cell {c['cell']}: <code>{E(c['loadgen_cmd'])}</code></li>")
    o.append("</ul>")
    o.append('<p class="meta">sold = ledger rows; oversold = max(0, sold - initial); lost updates = '
             "sold - (initial - stock); ok/s = successful deductions per second; req/s = all answers per "
             "second; latency from loadgen (open loop: from the intended send time).</p>")
    o.append("</body></html>\n")
    return "\n".join(o)




def render_faults_html(cells, esc):
    rows = fault_rows(cells)
    if not rows:
        return []
    o = ['<h2>Faults</h2><p class="meta">Open-loop buyers while the stack\'s verbs inject the fault at '
         "a known moment (vertical lines below). held = audit exact (for crash also: buyers sold "
         "again); time to recover = fault to the first sale after it (restart: after the backend is "
         "back), from the ledger's timestamps.</p>",
         '<table class="faults"><tr>' + "".join(f'<th class="l">{esc(h)}</th>' for h in FAULT_COLS)
         + "</tr>"]
    for c, r in rows:
        cl = "skip"
        if c.get("status") == "ok":
            cl = "good" if c["measured"] == "held" else "bad"
        o.append("<tr>" + "".join(f'<td class="l">{esc(x)}</td>' for x in r[:4])
                 + f'<td class="l {cl}">{esc(r[4])}</td><td class="l">{esc(r[5])}</td></tr>')
    o.append("</table><ul>")
    for c, _ in rows:
        if c.get("expected_why"):
            o.append(f"<li><code>{esc(c['label'])}</code>: {esc(c['expected_why'])}</li>")
    o.append("</ul><h3>Timelines</h3>")
    for c, _ in rows:
        svg = svg_timeline(c)
        if svg:
            o.append(svg)
            tl = c.get("timeline") or {}
            if "never_sent" in tl:
                o.append(f'<p class="meta">offered {tl.get("offered")}, never sent {tl["never_sent"]}</p>')
    return o
