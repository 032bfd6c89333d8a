"""The history checker's evidence in the report: its verdict and reason,
the order_ids of each violation class, and the window of operations that
cannot be ordered drawn as bars per connection (as Porcupine draws a
history): a bar from invoke to complete, its outcome and `remaining`, the
operation the search could not place outlined."""

from .common import E

OUTCOME_FILL = {"ok": "#59a14f", "refused": "#bab0ac", "indeterminate": "#edc948", "seed": "#4e79a7"}

VIOLATION_TEXT = {
    "not_linearizable": "the window: operations no order explains (the model: a decrement-if-enough counter)",
    "lost_updates": "ok answers that left the same stock as another ok answer (two sales, one unit)",
    "ok_not_in_ledger": "answered ok, no ledger row",
    "refused_but_sold": "answered a refusal (nothing sold), yet in the ledger",
    "ledger_row_unanswered": "ledger rows of no operation in the history",
    "duplicates": "order_ids in the ledger more than once",
}


def valid_text(v):
    return {True: "yes", False: "NO"}.get(v, "unknown")


def valid_class(v):
    return {True: "good", False: "bad"}.get(v, "warn")


def checker_html(c):
    """The checker block of one cell (fault or load), [] when it has none."""
    ch = c.get("checker")
    if not ch:
        return []
    o = [f'<p><b>History checker</b> <span class="badge {valid_class(ch.get("valid"))}">valid? '
         f'{valid_text(ch.get("valid"))}</span> model <code>{E(ch.get("model", ""))}</code>, '
         f'{ch.get("ops", 0)} operations'
         + (f', history <code>{E(ch["file"])}</code>' if ch.get("file") else "")
         + (f' (run {c["checker_run"]}, the first invalid one)' if c.get("checker_run") else "")
         + f'<br><span class="meta">{E(ch.get("reason", ""))}</span></p>']
    viol = ch.get("violations") or {}
    if viol:
        o.append('<table class="violations"><tr><th class="l">violation</th><th class="l">order_ids '
                 '(up to 10)</th><th class="l">meaning</th></tr>')
        for k, ids in viol.items():
            o.append(f'<tr><td class="l">{E(k.replace("_", " "))}</td><td class="l ids">{E(" ".join(ids))}'
                     f'</td><td class="l">{E(VIOLATION_TEXT.get(k, ""))}</td></tr>')
        o.append("</table>")
    svg = svg_window(ch.get("window") or [], c.get("label", ""))
    if svg:
        o.append(svg)
    return o


def bar_text(w):
    if w.get("seed"):
        return f"{w.get('order_id')} {w.get('remaining')}"
    out = w.get("outcome")
    if out == "ok":
        return f"{w.get('order_id') or ''} ok {w.get('remaining') if w.get('remaining') is not None else ''}"
    if out == "refused":
        return f"{w.get('order_id') or ''} {w.get('error') or 'refused'}"
    return f"{w.get('order_id') or ''} ? {w.get('error') or ''}"


def svg_window(win, label):
    """Bars per connection over the window's time span; None without one."""
    if not win:
        return None
    procs = []
    for w in win:
        if w["process"] not in procs:
            procs.append(w["process"])
    t0 = min(w["invoke_ns"] for w in win)
    ends = [w["complete_ns"] for w in win if w.get("complete_ns")]
    t1 = max(ends + [w["invoke_ns"] for w in win])
    span = max(t1 - t0, 1)
    W, left, right, top, row = 980, 90, 30, 40, 26
    H = top + row * len(procs) + 54
    pw = W - left - right

    def x(t):
        return left + pw * (t - t0) / span

    o = [f'<svg class="history" xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
         f'viewBox="0 0 {W} {H}" role="img" aria-label="history window {E(label)}">',
         f'<text x="{W / 2}" y="18" text-anchor="middle" font-size="13" font-weight="bold">'
         f'{E(label)}: the operations that cannot be ordered ({span / 1e6:.1f} ms)</text>']
    for i, p in enumerate(procs):
        y = top + i * row
        o.append(f'<text x="{left - 6}" y="{y + 15}" text-anchor="end" font-size="11">conn {E(str(p))}</text>')
        o.append(f'<line x1="{left}" y1="{y + row - 2}" x2="{W - right}" y2="{y + row - 2}" stroke="#eee"/>')
    for w in win:
        y = top + procs.index(w["process"]) * row + 3
        xa = x(w["invoke_ns"])
        open_end = not w.get("complete_ns")
        xb = W - right + 20 if open_end else x(w["complete_ns"])
        fill = OUTCOME_FILL["seed" if w.get("seed") else w.get("outcome")] if (
            w.get("seed") or w.get("outcome") in OUTCOME_FILL) else "#ccc"
        stroke = ' stroke="#e15759" stroke-width="3"' if w.get("blocked") else ' stroke="#333" stroke-width="0.5"'
        dash = ' stroke-dasharray="4 2"' if open_end else ""
        tip = (f"{bar_text(w)}; invoke +{(w['invoke_ns'] - t0) / 1e6:.3f} ms"
               + ("" if open_end else f", complete +{(w['complete_ns'] - t0) / 1e6:.3f} ms")
               + ("; the search could not place it" if w.get("blocked") else ""))
        o.append(f'<rect x="{xa:.1f}" y="{y}" width="{max(xb - xa, 2):.1f}" height="{row - 8}" rx="3" '
                 f'fill="{fill}" fill-opacity="0.8"{stroke}{dash}><title>{E(tip)}</title></rect>')
        o.append(f'<text x="{xa + 3:.1f}" y="{y + 13}" font-size="10">{E(bar_text(w))}</text>')
    ay = top + row * len(procs) + 2
    for k in range(5):                     # a time axis: ms since the window's first invoke
        tx = left + pw * k / 4
        o.append(f'<line x1="{tx:.1f}" y1="{ay}" x2="{tx:.1f}" y2="{ay + 4}" stroke="#333"/>'
                 f'<text x="{tx:.1f}" y="{ay + 14}" text-anchor="middle" font-size="9">'
                 f'+{span * k / 4 / 1e6:.1f} ms</text>')
    ly = top + row * len(procs) + 34
    lx = left
    for k, col in (("ok (remaining)", "#59a14f"), ("refused", "#bab0ac"),
                   ("indeterminate (dashed: never answered)", "#edc948"), ("seed", "#4e79a7")):
        o.append(f'<rect x="{lx}" y="{ly - 9}" width="12" height="10" fill="{col}"/>'
                 f'<text x="{lx + 16}" y="{ly}" font-size="11">{E(k)}</text>')
        lx += 30 + 7 * len(k)
    o.append(f'<rect x="{lx}" y="{ly - 9}" width="12" height="10" fill="none" stroke="#e15759" stroke-width="3"/>'
             f'<text x="{lx + 16}" y="{ly}" font-size="11">the operation no order places</text>')
    o.append("</svg>")
    return "\n".join(o)


def load_checker_sections(cells):
    """Load cells the checker did not find valid: their evidence."""
    bad = [c for c in cells if not c.get("fault") and (c.get("checker") or {}).get("valid") is not True
           and c.get("checker")]
    if not bad:
        return []
    o = ['<h2>History checker: load cells not found valid</h2><p class="meta">Every operation of the '
         "cell (loadgen --history) checked against the model \"stock n; sell q succeeds iff n &ge; q and "
         "leaves n &minus; q\" with each ok's remaining, then joined with the ledger.</p>"]
    for c in bad:
        o.append(f'<section class="fault-cell" id="history-{c["cell"]}"><h3>cell {c["cell"]}: '
                 f'{E(c["label"])} x{c.get("instances")}</h3>')
        o += checker_html(c)
        o.append("</section>")
    return o
