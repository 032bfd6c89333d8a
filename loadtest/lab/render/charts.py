"""The report's charts: matplotlib (python3-matplotlib, in process or
through /usr/bin/python3) drawing SVG that is inlined, or the hand-written
SVG of svg.py when no matplotlib is found. Every chart comes with its
data as a table."""

import json
import os
import shutil
import subprocess

from .common import E, ordered_unique, series_of
from .svg import svg_bars, svg_latency

SYSTEM_PYTHON = "/usr/bin/python3"


def draw_mpl(specs):
    """{id: svg} drawn by matplotlib, or None when none is available."""
    try:
        from . import mpl_draw
        return mpl_draw.draw(specs)
    except ImportError:
        pass
    py = os.environ.get("LAB_CHART_PYTHON", SYSTEM_PYTHON)
    if not shutil.which(py) and not os.access(py, os.X_OK):
        return None
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "mpl_draw.py")
    try:
        p = subprocess.run([py, "-I", "-B", script], input=json.dumps(specs), stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, timeout=120)
    except (OSError, subprocess.SubprocessError):
        return None
    if p.returncode != 0:
        return None
    try:
        return json.loads(p.stdout)
    except ValueError:
        return None


def spread_of(c, key):
    sp = ((c.get("repeat") or {}).get("spread") or {}).get(key)
    return (sp["min"], sp["max"]) if sp else (None, None)


def bar_spec(cid, title, unit, rows, series, cells, ser, value, key=None, log_ok=True):
    out = []
    for s in series:
        labels, vals, lo, hi = [], [], [], []
        for r in rows:
            c = next((x for x in cells if x["label"] == r and ser[x["cell"]] == s and x.get("status") == "ok"), None)
            if c is None:
                continue
            labels.append(r)
            vals.append(value(c))
            a, b = spread_of(c, key) if key else (None, None)
            lo.append(a)
            hi.append(b)
        if labels:
            out.append({"name": s, "labels": labels, "values": vals, "lo": lo, "hi": hi})
    return {"id": cid, "kind": "hbar", "title": title, "unit": unit, "series": out, "log_ok": log_ok}


def data_table(spec):
    """The numbers behind a bar chart."""
    series = spec["series"]
    labels = ordered_unique(lbl for s in series for lbl in s["labels"])
    o = ['<details><summary>data</summary><table class="data"><tr><th class="l">guard</th>'
         + "".join(f"<th>{E(s['name'])}</th>" for s in series) + "</tr>"]
    for lbl in labels:
        tds = []
        for s in series:
            if lbl in s["labels"]:
                i = s["labels"].index(lbl)
                v = s["values"][i]
                rng = ""
                if s["lo"][i] is not None and s["hi"][i] is not None and s["lo"][i] != s["hi"][i]:
                    rng = f" ({s['lo'][i]:g}..{s['hi'][i]:g})"
                tds.append(f"<td>{E(f'{v:g}' if v is not None else '-')}{E(rng)}</td>")
            else:
                tds.append("<td>-</td>")
        o.append(f'<tr><td class="l"><code>{E(lbl)}</code></td>' + "".join(tds) + "</tr>")
    o.append("</table></details>")
    return "".join(o)


def charts_html(cells, rows):
    ser = series_of(cells)
    series = ordered_unique(ser[c["cell"]] for c in cells)
    ok = [c for c in cells if c.get("status") == "ok"]
    specs = [
        bar_spec("throughput", "Successful deductions/s per guard (median run; whiskers: min..max)",
                 "deductions/s", rows, series, ok, ser, lambda c: c["ok_per_s"], "ok_per_s"),
        bar_spec("p99", "p99 latency per guard (median run)", "ms", rows, series, ok, ser,
                 lambda c: c["latency_ms"].get("p99"), "p99_ms"),
        bar_spec("oversold", "Units oversold per guard (median run)", "units oversold", rows, series, ok,
                 ser, lambda c: c["oversold"], "oversold", log_ok=False),
        bar_spec("lost", "Lost updates per guard (median run)", "lost updates", rows, series, ok, ser,
                 lambda c: c["lost_updates"], "lost_updates", log_ok=False),
    ]
    curves = []
    for s in series:
        cv = [{"label": c["label"], "points": c["latency_curve"]} for c in ok
              if ser[c["cell"]] == s and c.get("latency_curve")]
        if cv:
            curves.append({"id": f"latency-{len(curves)}", "kind": "multiples", "curves": cv,
                           "title": f"Latency percentiles ({s}): each guard in blue, the others in grey",
                           "series": s})
    drawn = draw_mpl(specs + curves)
    o = []
    if drawn is not None:
        o.append('<p class="meta">Charts drawn with matplotlib (SVG, inlined). Bars are sorted; a log '
                 "scale is used where values span more than 30&times;.</p>")
    for sp in specs:
        if not sp["series"]:
            continue
        if drawn is not None and drawn.get(sp["id"]):
            svg = drawn[sp["id"]]
        else:
            vals = {(lbl, s["name"]): v for s in sp["series"] for lbl, v in zip(s["labels"], s["values"])}
            svg = svg_bars(sp["title"], rows, [s["name"] for s in sp["series"]], vals, sp["unit"],
                           f"chart {sp['id']}")
        o.append(f'<figure class="chart {sp["id"]}">{svg}{data_table(sp)}</figure>')
    for cv in curves:
        if drawn is not None and drawn.get(cv["id"]):
            svg = drawn[cv["id"]]
        else:
            svg = svg_latency(cv["title"], [(x["label"], x["points"]) for x in cv["curves"]])
        tbl = ['<details><summary>data</summary><table class="data"><tr><th class="l">guard</th>'
               "<th>p50</th><th>p90</th><th>p99</th><th>p99.9</th><th>max</th></tr>"]
        for c in ok:
            if ser[c["cell"]] == cv["series"]:
                lat = c["latency_ms"]
                tbl.append(f'<tr><td class="l"><code>{E(c["label"])}</code></td>'
                           + "".join(f"<td>{lat.get(k, 0):.2f}</td>" for k in ("p50", "p90", "p99", "p999", "max"))
                           + "</tr>")
        tbl.append("</table></details>")
        o.append(f'<figure class="chart latency">{svg}{"".join(tbl)}</figure>')
    return o
