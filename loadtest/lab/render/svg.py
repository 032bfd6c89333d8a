"""SVG charts written by hand (no network, no JavaScript): grouped bars,
latency percentile curves, a fault cell's per-second timeline."""

import math

from .common import E

PALETTE = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948",
           "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"]


def nice_max(v):
    if v <= 0:
        return 1.0
    e = 10 ** math.floor(math.log10(v))
    for m in (1, 2, 2.5, 5, 10):
        if v <= m * e:
            return m * e
    return 10 * e


def svg_bars(title, cats, series, values, unit, cls):
    """Grouped bars: one group per category, one bar per series.
    values[(cat, series)] = number or None (no data: no bar, 'n/a')."""
    W, left, right, top, bottom = 860, 70, 20, 40, 110
    H = 380
    pw, ph = W - left - right, H - top - bottom
    vmax = nice_max(max([v for v in values.values() if v is not None] + [0]))
    g = max(len(cats), 1)
    gw = pw / g
    bw = max(4.0, min(40.0, (gw * 0.8) / max(len(series), 1)))
    o = [f'<svg class="{cls}" xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H + 22 * ((len(series) + 3) // 4)}" '
         f'viewBox="0 0 {W} {H + 22 * ((len(series) + 3) // 4)}" role="img" aria-label="{E(title)}">',
         f'<title>{E(title)}</title>',
         f'<text x="{W / 2}" y="22" text-anchor="middle" font-size="15" font-weight="bold">{E(title)}</text>']
    for i in range(5):
        v = vmax * i / 4
        y = top + ph - ph * i / 4
        o.append(f'<line x1="{left}" y1="{y:.1f}" x2="{W - right}" y2="{y:.1f}" stroke="#ddd"/>')
        o.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end" font-size="11">{E(fmt_axis(v))}</text>')
    o.append(f'<text x="16" y="{top + ph / 2}" font-size="11" transform="rotate(-90 16 {top + ph / 2})" '
             f'text-anchor="middle">{E(unit)}</text>')
    for ci, cat in enumerate(cats):
        x0 = left + ci * gw + (gw - bw * len(series)) / 2
        for si, s in enumerate(series):
            v = values.get((cat, s))
            x = x0 + si * bw
            if v is None:
                o.append(f'<text x="{x + bw / 2:.1f}" y="{top + ph - 4}" font-size="9" text-anchor="middle" '
                         f'fill="#999">n/a</text>')
                continue
            h = ph * v / vmax
            o.append(f'<rect x="{x:.1f}" y="{top + ph - h:.1f}" width="{bw - 1:.1f}" height="{h:.1f}" '
                     f'fill="{PALETTE[si % len(PALETTE)]}"><title>{E(cat)} / {E(s)}: {E(fmt_axis(v))}</title></rect>')
            o.append(f'<text x="{x + bw / 2:.1f}" y="{top + ph - h - 3:.1f}" font-size="9" '
                     f'text-anchor="middle">{E(fmt_axis(v))}</text>')
        cx = left + ci * gw + gw / 2
        o.append(f'<text x="{cx:.1f}" y="{top + ph + 14}" font-size="11" text-anchor="end" '
                 f'transform="rotate(-30 {cx:.1f} {top + ph + 14})">{E(cat)}</text>')
    o.append(f'<line x1="{left}" y1="{top + ph}" x2="{W - right}" y2="{top + ph}" stroke="#333"/>')
    o += legend(series, H - 10, W)
    o.append("</svg>")
    return "\n".join(o)


def legend(series, y0, W):
    o = []
    for si, s in enumerate(series):
        x = 20 + (si % 4) * (W - 40) / 4
        y = y0 + (si // 4) * 22
        o.append(f'<rect x="{x:.1f}" y="{y - 10}" width="12" height="12" fill="{PALETTE[si % len(PALETTE)]}"/>')
        o.append(f'<text x="{x + 16:.1f}" y="{y}" font-size="11">{E(s)}</text>')
    return o


def fmt_axis(v):
    if v >= 100 or v == int(v):
        return f"{v:.0f}"
    if v >= 1:
        return f"{v:.1f}"
    return f"{v:.3g}"


def svg_latency(title, curves):
    """curves: [(label, [[percentile, ms], ...])]; x is 'nines' (log scale of
    1/(1-p)), y is log milliseconds."""
    W, H, left, right, top, bottom = 860, 400, 70, 20, 40, 60
    pw, ph = W - left - right, H - top - bottom
    pts = [p for _, cv in curves for p in cv]
    if not pts:
        return ""

    def nx(p):
        return 5.0 if p >= 99.9999 else -math.log10(1 - p / 100.0)
    xmax = max(1.0, math.ceil(max(nx(p) for p, _ in pts if p < 100) + 0.5 if any(p < 100 for p, _ in pts) else 1))
    xmax = min(xmax, 6.0)
    ys = [max(v, 0.001) for _, v in pts]
    ylo = 10 ** math.floor(math.log10(min(ys)))
    yhi = 10 ** math.ceil(math.log10(max(ys)))
    if yhi <= ylo:
        yhi = ylo * 10
    span = math.log10(yhi) - math.log10(ylo)

    def X(p):
        return left + pw * min(nx(p), xmax) / xmax

    def Y(v):
        return top + ph - ph * (math.log10(max(v, 0.001)) - math.log10(ylo)) / span
    nser = len(curves)
    extra = 22 * ((nser + 3) // 4)
    o = [f'<svg class="latency" xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H + extra}" '
         f'viewBox="0 0 {W} {H + extra}" role="img" aria-label="{E(title)}">',
         f'<title>{E(title)}</title>',
         f'<text x="{W / 2}" y="22" text-anchor="middle" font-size="15" font-weight="bold">{E(title)}</text>']
    d = 0
    while d <= span + 1e-9:
        v = ylo * 10 ** d
        y = Y(v)
        o.append(f'<line x1="{left}" y1="{y:.1f}" x2="{W - right}" y2="{y:.1f}" stroke="#ddd"/>')
        o.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end" font-size="11">{E(fmt_axis(v))}</text>')
        d += 1
    labels = {0: "0%", 1: "90%", 2: "99%", 3: "99.9%", 4: "99.99%", 5: "99.999%", 6: "99.9999%"}
    for i in range(int(xmax) + 1):
        x = left + pw * i / xmax
        o.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{top + ph}" stroke="#eee"/>')
        o.append(f'<text x="{x:.1f}" y="{top + ph + 16}" text-anchor="middle" font-size="11">{labels.get(i, "")}</text>')
    o.append(f'<text x="{left + pw / 2}" y="{top + ph + 36}" text-anchor="middle" font-size="11">percentile</text>')
    o.append(f'<text x="16" y="{top + ph / 2}" font-size="11" transform="rotate(-90 16 {top + ph / 2})" '
             f'text-anchor="middle">latency, ms (log)</text>')
    for si, (label, cv) in enumerate(curves):
        body = [(p, v) for p, v in cv if p < 100]
        if not body:
            continue
        path = " ".join(f"{'M' if i == 0 else 'L'}{X(p):.1f},{Y(v):.1f}" for i, (p, v) in enumerate(body))
        o.append(f'<path d="{path}" fill="none" stroke="{PALETTE[si % len(PALETTE)]}" stroke-width="2">'
                 f'<title>{E(label)}</title></path>')
    o.append(f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#333"/>')
    o += legend([lbl for lbl, _ in curves], H - 10, W)
    o.append("</svg>")
    return "\n".join(o)



def svg_timeline(c, esc=E):
    """Per-second sales/s (green), errors/s (red) and p99 ms (grey, right
    axis); every fault event a vertical line with its label."""
    secs = (c.get("timeline") or {}).get("seconds") or []
    if not secs:
        return ""
    W, H, left, right, top, bottom = 860, 260, 60, 60, 30, 40
    pw, ph = W - left - right, H - top - bottom
    n = max(len(secs), 1)
    ymax = max([s["ok"] for s in secs] + [s["errors"] for s in secs] + [1])
    ymax = _nice(ymax)
    pmax = _nice(max([s["p99_ms"] for s in secs] + [1]))
    open_loop = any("offered" in s for s in secs)

    def X(t):
        return left + pw * t / n

    def Y(v, m):
        return top + ph - ph * v / m

    o = [f'<svg class="chart timeline" viewBox="0 0 {W} {H}" width="{W}" height="{H}" '
         f'xmlns="http://www.w3.org/2000/svg" role="img">',
         f'<text x="{left}" y="18" font-size="13" font-weight="bold">{esc(c["label"])}: per second</text>',
         f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#ccc"/>']
    for k in range(5):
        v = ymax * k / 4
        y = Y(v, ymax)
        o.append(f'<line x1="{left}" x2="{left + pw}" y1="{y:.1f}" y2="{y:.1f}" stroke="#eee"/>')
        o.append(f'<text x="{left - 4}" y="{y + 4:.1f}" font-size="10" text-anchor="end">{v:g}</text>')
        o.append(f'<text x="{left + pw + 4}" y="{y + 4:.1f}" font-size="10" fill="#777">'
                 f'{pmax * k / 4:g}</text>')
    for t in range(0, n + 1, max(1, n // 12)):
        o.append(f'<text x="{X(t):.1f}" y="{top + ph + 14}" font-size="10" text-anchor="middle">{t}s</text>')

    def line(key, m, color, dash=""):
        pts = " ".join(f"{X(i + 0.5):.1f},{Y(s.get(key, 0), m):.1f}" for i, s in enumerate(secs))
        return (f'<polyline fill="none" stroke="{color}" stroke-width="2" {dash} points="{pts}">'
                f'<title>{key}</title></polyline>')
    if open_loop:
        o.append(line("offered", ymax, "#bbb", 'stroke-dasharray="2,3"'))
    o.append(line("ok", ymax, "#59a14f"))
    o.append(line("errors", ymax, "#e15759"))
    o.append(line("p99_ms", pmax, "#888", 'stroke-dasharray="5,3"'))
    # the fault windows, shaded: from a fault to the next "end" event (or
    # to the end of the run: a killed process comes back only after it)
    evs = c.get("events") or []
    for i, e in enumerate(evs):
        if e["kind"] != "fault":
            continue
        end = next((x["t"] for x in evs[i + 1:] if x["kind"] == "end"), n)
        x0, x1 = X(min(e["t"], n)), X(min(end, n))
        o.append(f'<rect class="fault-window" x="{x0:.1f}" y="{top}" width="{max(x1 - x0, 1):.1f}" '
                 f'height="{ph}" fill="#e15759" fill-opacity="0.12"><title>fault window: '
                 f'{esc(e["what"])}</title></rect>')
    for i, e in enumerate(evs):
        x = X(e["t"])
        col = "#e15759" if e["kind"] == "fault" else ("#4e79a7" if e["kind"] == "end" else "#999")
        o.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top}" y2="{top + ph}" stroke="{col}" '
                 f'stroke-dasharray="4,2"><title>{esc(e["what"])}</title></line>')
        o.append(f'<text x="{x + 3:.1f}" y="{top + 12 + 11 * (i % 4)}" font-size="10" fill="{col}">'
                 f'{esc(e["what"])}</text>')
    lg = [("sales/s", "#59a14f"), ("errors/s", "#e15759"), ("p99 ms (right axis)", "#888"),
          ("fault window", "#f6d5d5")]
    if open_loop:
        lg.append(("offered/s", "#bbb"))
    x = left
    for name, col in lg:
        o.append(f'<rect x="{x}" y="{H - 14}" width="10" height="10" fill="{col}"/>'
                 f'<text x="{x + 14}" y="{H - 5}" font-size="11">{esc(name)}</text>')
        x += 24 + 7 * len(name)
    o.append("</svg>")
    return "\n".join(o)


def _nice(v):
    for m in (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000):
        if v <= m:
            return m
    return v

