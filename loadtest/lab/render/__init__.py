"""Renderers: they read results.json and nothing else (no stack, no
measuring), so `loadtest/compare --render DIR` rewrites every view."""

import json
import os

from .csv import write_csv
from .html import render_html
from .md import render_md


def load(folder):
    """The results dict of folder/results.json; raises OSError/ValueError."""
    with open(os.path.join(folder, "results.json"), encoding="utf-8") as f:
        return json.load(f)


def render_dir(folder):
    """Write results.csv, report.md and report.html from folder/results.json.
    Returns the results dict."""
    res = load(folder)
    write_csv(res["cells"], os.path.join(folder, "results.csv"))
    with open(os.path.join(folder, "report.md"), "w", encoding="utf-8") as f:
        f.write(render_md(res))
    with open(os.path.join(folder, "report.html"), "w", encoding="utf-8") as f:
        f.write(render_html(res))
    return res
