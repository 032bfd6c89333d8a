"""Plain-text tables for the terminal (load cells and fault cells)."""

import re

from ..verdicts import measured_text, recover_text, runs_text
from .common import SUMMARY_COLS, table_rows


def text_table(cells):
    heads, rows = table_rows(cells, SUMMARY_COLS)
    w = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(heads)]
    num = [all(re.fullmatch(r"-?[0-9.]+|-", r[i]) for r in rows) for i in range(len(heads))]

    def line(vals):
        return "  ".join(v.rjust(w[i]) if num[i] else v.ljust(w[i]) for i, v in enumerate(vals)).rstrip()
    out = [line(heads), line(["-" * x for x in w])]
    out += [line(r) for r in rows]
    return "\n".join(out)



FAULT_COLS = ["scenario", "guard", "expected", "measured", "held/broke", "time to recover", "valid?"]


def fault_rows(cells):
    """[(cell, [scenario, guard, expected, measured, verdict, recover])]."""
    out = []
    for c in cells:
        if not c.get("fault"):
            continue
        label = c["label"].split("/", 1)[1] if "/" in c["label"] else c["label"]
        if c.get("status") != "ok":
            why = c.get("reason", "")
            out.append((c, [c["fault"], label, c.get("expected", "-"),
                            f"{c.get('status')}: {why}", "-", "-", "-"]))
            continue
        mark = "as expected" if c["measured"] == c["expected"] else "NOT as expected"
        runs = f" in {runs_text(c)} runs" if runs_text(c) else ""
        valid = {None: "-", True: "yes", False: "no"}.get(c.get("valid"), "unknown")
        out.append((c, [c["fault"], label, c["expected"], measured_text(c),
                        f"{c['measured']}{runs} ({mark})", recover_text(c), valid]))
    return out


def fault_text_table(cells):
    rows = fault_rows(cells)
    if not rows:
        return ""
    w = [max(len(h), *(len(r[i]) for _, r in rows)) for i, h in enumerate(FAULT_COLS)]
    line = lambda vals: "  ".join(v.ljust(w[i]) for i, v in enumerate(vals)).rstrip()  # noqa: E731
    return "\n".join([line(FAULT_COLS), line(["-" * x for x in w])] + [line(r) for _, r in rows])


