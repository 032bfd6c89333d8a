"""report.html: one self-contained page (inline CSS and SVG, no network,
no JavaScript)."""

import json

from ..verdicts import recover_text, verdict, verdict_class
from .common import E, HOLDS_COLS, HOLDS_NOTE, SHOP_TABLES, holds_rows, shop_rows, table_rows, verdict_grid
from .charts import charts_html
from .cluster import cluster_html
from .history import checker_html, load_checker_sections, valid_class, valid_text
from .matrix import html_guard_sections, html_matrix
from .prom import prometheus_links
from .svg import svg_timeline
from .text import fault_rows, FAULT_COLS


CSS = """
:root{color-scheme:light dark;--fg:#1d1d1f;--bg:#fff;--mute:#555;--line:#ccc;--head:#f0f0f0;
 --good:#dff3dc;--goodfg:#14532d;--bad:#fbdcda;--badfg:#8a1c12;--skip:#efefef;--skipfg:#666;--code:#f3f3f3}
@media (prefers-color-scheme:dark){:root{--fg:#e6e6e6;--bg:#161618;--mute:#aaa;--line:#444;--head:#26262a;
 --good:#183d20;--goodfg:#b9f0c4;--bad:#4a1714;--badfg:#ffc9c2;--skip:#2a2a2d;--skipfg:#aaa;--code:#26262a}}
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:24px;color:var(--fg);
 background:var(--bg);max-width:1400px}
a{color:inherit}
h1{font-size:22px}h2{font-size:18px;margin-top:28px;border-bottom:1px solid var(--line)}h3{font-size:15px}
table{border-collapse:collapse;font-size:12px;margin:8px 0}
td,th{border:1px solid var(--line);padding:3px 6px;text-align:right;white-space:nowrap}
th{background:var(--head)}td.l,th.l{text-align:left}
td.good,.badge.good{background:var(--good);color:var(--goodfg)}
td.bad,.badge.bad{background:var(--bad);color:var(--badfg);font-weight:bold}
td.skip{background:var(--skip);color:var(--skipfg)}
td.warn{background:#fdebc8;color:#6b4500;font-weight:bold}
.badge{padding:1px 6px;border-radius:3px}
table.matrix{font-size:13px}table.cluster td.l{white-space:normal}table.matrix td.l{white-space:normal;max-width:14em}table.matrix td.v{text-align:center}table.matrix td.use{white-space:normal;min-width:18em}
td.ids{white-space:normal;font-family:ui-monospace,monospace;max-width:40em}
.meta{font-size:13px;color:var(--mute)}.meta code,code{background:var(--code);padding:0 3px}
pre{background:var(--code);padding:6px 8px;overflow-x:auto;font-size:12px}
figure{margin:12px 0}figure.chart{background:#fff;color:#1d1d1f;padding:6px;border-radius:4px;max-width:980px}
svg{display:block;margin:12px 0;max-width:100%;height:auto;font-family:inherit;background:#fff;color:#1d1d1f}
details{margin:6px 0}summary{cursor:pointer;font-size:13px}
.wide{overflow-x:auto}section.guard,section.fault-cell{border-top:1px dashed var(--line);margin-top:14px}
@media print{body{margin:0;max-width:none;color:#000;background:#fff}.wide{overflow:visible}
 section.guard,section.fault-cell,figure{break-inside:avoid}a{text-decoration:none}
 details{display:block}td.bad{border:2px solid #000}}
"""


def load_cells(cells):
    return [c for c in cells if not c.get("fault")]


def render_html(res):
    cells = res["cells"]
    m = res["machine"]
    sc = res["scenario"]
    o = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
         '<meta name="viewport" content="width=device-width, initial-scale=1">',
         f"<title>{E('Comparison report: ' + sc['name'])}</title>", f"<style>{CSS}</style></head><body>",
         f"<h1>Comparison report: {E(sc['name'])}</h1>"]
    if sc.get("description"):
        o.append(f"<p>{E(sc['description'])}</p>")
    o.append('<p class="meta">')
    rep = res.get("repeat", 1)
    o.append(f"run {E(res['started'])} ({res['elapsed_s']:.0f} s"
             + (f", every cell {rep} times" if rep > 1 else "") + f") &middot; commit <code>{E(res['git'])}</code>"
             f" &middot; scenario file <code>{E(sc['file'])}</code><br>")
    o.append(f"machine: {m['cores']} cores, kernel {E(m['kernel'])}, {E(m['mariadb'])}, {E(m['redis'])}"
             f" &middot; loadgen <code>{E(res.get('loadgen', ''))}</code></p>")

    o += html_matrix(res)
    if res.get("cluster"):
        o += cluster_html(res)
    o += render_faults_html(cells, E)
    o += render_holds_html(cells)
    o += render_shop_html(cells)
    lc = load_cells(cells)
    if lc:
        o += load_sections(lc, res)
        o += load_checker_sections(lc)
    o += html_guard_sections(res)
    o += all_cells(cells)
    o += prometheus_links(res)
    o.append("</body></html>\n")
    return "\n".join(o)


def load_sections(cells, res):
    o = []
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
    o.append("<h2>Charts</h2>")
    o += charts_html(cells, rows)
    return o


def all_cells(cells):
    heads, trs = table_rows(cells, None)
    o = ['<h2>All cells</h2><div class="wide"><table class="cells"><tr>'
         + "".join(f'<th class="{"l" if h in ("guard", "path", "status", "errors", "verdict") else ""}">{E(h)}</th>'
                   for h in heads) + "</tr>"]
    for c, r in zip(cells, trs):
        tds = []
        for h, v in zip(heads, r):
            cl = "l" if h in ("guard", "path", "status", "errors") else ""
            if h == "verdict":
                cl = "l " + verdict_class(c)
            tds.append(f'<td class="{cl}">{E(v)}</td>')
        rid = "" if c.get("fault") else f' id="cell-{c["cell"]}"'
        o.append(f"<tr{rid}>" + "".join(tds) + "</tr>")
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
    return o


def render_holds_html(cells):
    rows = holds_rows(cells)
    if not rows:
        return []
    o = ['<h2>Holds</h2><div class="wide"><table class="holds"><tr>'
         + "".join(f'<th class="{"l" if h == "guard" else ""}">{E(h)}</th>' for h, _ in HOLDS_COLS) + "</tr>"]
    for c, r in rows:
        tds = [f'<td class="l"><code>{E(r[0])}</code></td>'] + [f"<td>{E(x)}</td>" for x in r[1:-1]]
        cl = "good" if r[-1] == r[-2] else "bad"
        o.append(f'<tr id="holds-{c["cell"]}">' + "".join(tds) + f'<td class="{cl}">{E(r[-1])}</td></tr>')
    o.append(f'</table></div><p class="meta">{E(HOLDS_NOTE)}</p><ul>')
    for c, _ in rows:
        o.append(f"<li><code>{E(c['label'])}</code>: expected {E(c.get('expected', ''))}: "
                 f"{E(c.get('expected_why', ''))}"
                 + (f"; the audit: {E(c['audit_why'])}" if c.get("audit_why") else "") + "</li>")
    o.append("</ul>")
    return o


def render_shop_html(cells):
    """One table per shop kind (cart, limits, retry) that ran."""
    o = []
    for kind, (title, cols, note) in SHOP_TABLES.items():
        rows = shop_rows(cells, kind)
        if not rows:
            continue
        o.append(f'<h2>{E(title)}</h2><div class="wide"><table class="shop-{kind}"><tr>'
                 + "".join(f'<th class="{"l" if i == 0 else ""}">{E(h)}</th>' for i, (h, _) in enumerate(cols))
                 + "</tr>")
        for c, r in rows:
            tds = [f'<td class="l"><code>{E(r[0])}</code></td>'] + [f"<td>{E(x)}</td>" for x in r[1:-1]]
            cl = "good" if r[-1].startswith(r[-2]) else "bad"
            o.append(f'<tr id="{kind}-{c["cell"]}">' + "".join(tds) + f'<td class="{cl}">{E(r[-1])}</td></tr>')
        o.append(f'</table></div><p class="meta">{E(note)}</p><ul>')
        for c, _ in rows:
            o.append(f"<li><code>{E(c['label'])}</code>: expected {E(c.get('expected', ''))}: "
                     f"{E(c.get('expected_why', ''))}; measured: {E(c['shop']['why'])}</li>")
        o.append("</ul>")
    return o


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
                 + f'<td class="l {cl}"><a href="#cell-{c["cell"]}">{esc(r[4])}</a></td><td class="l">{esc(r[5])}</td>'
                 + f'<td class="l {"good" if r[6] == "yes" else "bad" if r[6] == "no" else "warn" if r[6] == "unknown" else "skip"}">{esc(r[6])}</td></tr>')
    o.append("</table><ul>")
    for c, _ in rows:
        if c.get("expected_why"):
            o.append(f"<li><code>{esc(c['label'])}</code>: {esc(c['expected_why'])}</li>")
    o.append("</ul>")
    for c, _ in rows:
        o += fault_cell_html(c, esc)
    return o


INV_ROWS = [
    # (key, what it means)
    ("oversold", "units sold that never existed (ledger rows past the initial stock)"),
    ("lost_updates", "sales the stock row never saw (a stale write overwrote them)"),
    ("undersold", "units taken from stock but never sold (leaked)"),
    ("duplicates", "order_ids sold more than once"),
    ("unacknowledged", "ok answers with no sale in the ledger"),
    ("phantom", "sales beyond the ok and indeterminate answers (a refusal that sold)"),
]


def fault_cell_html(c, esc):
    """One fault cell in Jepsen's terms: outcomes, the invariant with the
    violating order_ids, valid?, latency, the timeline, the command."""
    o = [f'<section class="fault-cell" id="cell-{c["cell"]}"><h3>{esc(c["label"])}</h3>']
    if c.get("status") != "ok":
        o.append(f'<p class="meta">{esc(c.get("status", ""))}: {esc(c.get("reason", ""))}</p></section>')
        return o
    rp = c.get("repeat") or {}
    n = rp.get("n", 1)
    valid = c.get("valid")
    vcls = valid_class(valid)
    runs = f" in {rp['held'] if c['measured'] == 'held' else rp['broke']}/{rp['ok']} runs" if n > 1 else ""
    o.append(f'<p><span class="badge {"good" if c["measured"] == "held" else "bad"}">{esc(c["measured"])}{esc(runs)}</span> '
             f'expected {esc(c.get("expected", "-"))}'
             + (f' &middot; <span class="badge {vcls}">valid? {valid_text(valid)}</span>' if valid is not None else "")
             + "</p>")
    outc = c.get("outcomes")
    if outc:
        total = sum(outc.values()) or 1
        o.append('<table class="outcomes"><tr><th class="l">outcome</th><th>operations</th><th>share</th>'
                 '<th class="l">meaning</th></tr>')
        for k, what in (("ok", "answered 2xx: sold"),
                        ("refused", "4xx, or 503 other than backend_unavailable: nothing sold (the API's promise)"),
                        ("indeterminate", "no answer, another 5xx, or 503 backend_unavailable (may be a lost "
                                          "COMMIT reply): maybe sold")):
            o.append(f'<tr><td class="l">{k}</td><td>{outc[k]}</td><td>{100 * outc[k] / total:.0f}%</td>'
                     f'<td class="l">{esc(what)}</td></tr>')
        o.append("</table>")
    inv = c.get("invariant")
    if inv:
        hdr = "Invariant: every unit sold existed, was counted once, and was answered"
        if c.get("invariant_run") and (c.get("repeat") or {}).get("n", 1) > 1:
            hdr += f" (run {c['invariant_run']}, the first invalid one)"
        o.append(f'<p><b>{esc(hdr)}</b></p><table class="invariant"><tr><th class="l">check</th><th>count</th>'
                 '<th class="l">violating order_ids (up to 10)</th><th class="l">meaning</th></tr>')
        for k, what in INV_ROWS:
            v = inv.get(k, 0)
            ids = (inv.get("violations") or {}).get(k) or []
            o.append(f'<tr><td class="l">{k.replace("_", " ")}</td><td class="{"bad" if v else "good"}">{v}</td>'
                     f'<td class="l ids">{esc(" ".join(ids)) or ("-" if not v else "(no order_id: counted from the audit)")}</td>'
                     f'<td class="l">{esc(what)}</td></tr>')
        o.append("</table>")
    o += checker_html(c)
    lat = c.get("latency_ms") or {}
    if lat:
        o.append('<p class="meta">latency (buyers, from the intended send time): '
                 + " &middot; ".join(f"{k} {lat[k]:.1f} ms" for k in ("p50", "p90", "p99", "p999", "max") if lat.get(k) is not None)
                 + f" &middot; time to recover: {esc(recover_text(c))}</p>")
    if c.get("expected_why"):
        o.append(f'<p class="meta">why {esc(c.get("expected", ""))} is expected: {esc(c["expected_why"])}</p>')
    svg = svg_timeline(c)
    if svg:
        o.append(svg)
        tl = c.get("timeline") or {}
        if "never_sent" in tl:
            o.append(f'<p class="meta">offered {tl.get("offered")}, never sent {tl["never_sent"]}</p>')
    if n > 1:
        o.append('<p class="meta">runs: ' + "; ".join(
            f"run {r['run']}: {r.get('measured', r.get('status'))}, valid {valid_text(r.get('valid')).lower()}"
            for r in c.get("runs", [])) + "</p>")
    if c.get("reproduce"):
        o.append(f'<p class="meta">reproduce this cell:</p><pre class="cmd">{esc(c["reproduce"])}</pre>')
    o.append("</section>")
    return o
