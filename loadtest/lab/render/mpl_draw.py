"""Draws the report's charts with matplotlib as SVG text. Used in process
when matplotlib imports, else run by Debian's /usr/bin/python3 (which has
python3-matplotlib) as a script: JSON chart specs on stdin, JSON
{id: svg} on stdout. Spec kinds: "hbar" (sorted horizontal bars, one
panel per series, whiskers min..max, log scale when values span more than
30x) and "multiples" (one small panel per curve, the others in grey)."""

import io
import json
import math
import sys

# (Run with python3 -I: this folder holds html.py and csv.py, which would
# shadow the standard library modules of those names.)
# Colour-blind-safe, never repeated within a chart (Okabe-Ito + Tableau).
COLOURS = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442",
           "#000000", "#8c564b", "#7f7f7f", "#bcbd22", "#17becf", "#9467bd", "#e377c2",
           "#aec7e8", "#ffbb78"]


def _setup():
    import matplotlib
    matplotlib.use("svg")
    matplotlib.rcParams.update({"svg.fonttype": "none", "font.size": 9,
                                "axes.spines.top": False, "axes.spines.right": False})
    import matplotlib.pyplot as plt
    return plt


def _svg(fig, plt):
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)
    text = buf.getvalue()
    return text[text.index("<svg"):]


def _fmt(v):
    if v is None:
        return "n/a"
    if v >= 100:
        return f"{v:,.0f}"
    return f"{v:.3g}"


def hbar(spec, plt):
    series = spec["series"]
    n = max(len(s["labels"]) for s in series)
    fig, axes = plt.subplots(1, len(series), figsize=(4.6 * len(series) + 1.2, 0.28 * n + 1.1),
                             squeeze=False)
    for k, (ax, s) in enumerate(zip(axes[0], series)):
        rows = sorted(zip(s["labels"], s["values"], s.get("lo") or s["values"], s.get("hi") or s["values"]),
                      key=lambda r: (r[1] is None, r[1] if r[1] is not None else 0))
        labels = [r[0] for r in rows]
        vals = [r[1] or 0 for r in rows]
        pos = [v for v in vals if v > 0]
        log = bool(spec.get("log_ok", True) and pos and len(pos) == len(vals)
                   and max(pos) / min(pos) > 30)
        colour = COLOURS[k % len(COLOURS)]
        y = range(len(rows))
        ax.barh(y, vals, color=colour, height=0.7)
        lo = [max(v - (r[2] if r[2] is not None else v), 0) for v, r in zip(vals, rows)]
        hi = [max((r[3] if r[3] is not None else v) - v, 0) for v, r in zip(vals, rows)]
        if any(lo) or any(hi):
            ax.errorbar(vals, list(y), xerr=[lo, hi], fmt="none", ecolor="#333", elinewidth=1, capsize=2)
        ax.set_yticks(list(y))
        ax.set_yticklabels(labels)
        if log:
            ax.set_xscale("log")
        top = max(vals + [r[3] for r in rows if r[3] is not None] + [1])
        for yi, (v, r) in enumerate(zip(vals, rows)):
            end = max(v, r[3] if r[3] is not None else v)    # right of the whisker
            ax.text(end * (1.12 if log else 1) + (0 if log else top * 0.015), yi,
                    _fmt(r[1]), va="center", fontsize=8)
        ax.set_xlim(right=top * (4 if log else 1.18))
        ax.set_xlabel(spec["unit"] + (" (log scale)" if log else ""))
        ax.set_title(s["name"], fontsize=9, loc="left", color="#444")
        ax.grid(axis="x", color="#ddd", linewidth=0.6)
        ax.set_axisbelow(True)
    fig.suptitle(spec["title"], fontsize=11, fontweight="bold", x=0.01, y=1.0 + 0.12 / fig.get_figheight(),
                 ha="left")
    return _svg(fig, plt)


def multiples(spec, plt):
    curves = spec["curves"]
    if not curves:
        return ""
    cols = min(4, len(curves))
    rows = math.ceil(len(curves) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(2.6 * cols, 1.9 * rows + 0.5), sharex=True, sharey=True,
                             squeeze=False)

    def nx(p):
        return min(5.0, -math.log10(max(1e-6, 1 - p / 100.0)))
    for i, ax in enumerate(axes.flat):
        if i >= len(curves):
            ax.axis("off")
            continue
        for j, cv in enumerate(curves):
            pts = [(nx(p), max(v, 0.01)) for p, v in cv["points"] if p < 100]
            if not pts:
                continue
            xs, ys = zip(*pts)
            if j == i:
                continue
            ax.plot(xs, ys, color="#cfcfcf", linewidth=0.8)
        pts = [(nx(p), max(v, 0.01)) for p, v in curves[i]["points"] if p < 100]
        if pts:
            xs, ys = zip(*pts)
            ax.plot(xs, ys, color=COLOURS[0], linewidth=2)
        ax.set_yscale("log")
        ax.set_title(curves[i]["label"], fontsize=9)
        ax.set_xticks([0, 1, 2, 3])
        ax.set_xticklabels(["0", "90", "99", "99.9"])
        ax.grid(color="#eee", linewidth=0.5)
    fig.supxlabel("percentile (%)", fontsize=9)
    fig.supylabel("latency, ms (log)", fontsize=9)
    fig.suptitle(spec["title"], fontsize=11, fontweight="bold", x=0.01, y=1.0 + 0.12 / fig.get_figheight(),
                 ha="left")
    return _svg(fig, plt)


def draw(specs):
    """{id: svg text} for the specs; raises ImportError without matplotlib."""
    plt = _setup()
    out = {}
    for s in specs:
        out[s["id"]] = hbar(s, plt) if s["kind"] == "hbar" else multiples(s, plt)
    return out


if __name__ == "__main__":
    sys.stdout.write(json.dumps(draw(json.load(sys.stdin))))
