"""lab.render: every view comes from results.json alone (a folder holding
only that file renders), verdicts reach every view, text is escaped, the
HTML loads nothing from the network."""

import csv
import json
import os
import re
import tempfile
import unittest

from fixtures import fault_cell, holds_cell, load_cell, results
from lab.render import render_dir
from lab.render.html import render_html
from lab.render.md import render_md
from lab.render.text import fault_text_table, text_table
from lab.verdicts import matrix_of


def sample():
    cells = [load_cell(1, "none", 1, 2000, 1000, 1825, False, 2000),
             load_cell(2, "conditional-update", 1, 1000, 0, 0, True, 1000),
             load_cell(3, "none", 2, 1999, 999, 1861, False, 1999),
             load_cell(4, "conditional-update", 2, 1000, 0, 0, True, 1000),
             fault_cell(5, "pause", "redis-lock", "broke", "broke", lost=47,
                        outcomes={"ok": 100, "refused": 2, "indeterminate": 1},
                        invariant={"oversold": 0, "lost_updates": 47, "undersold": 0, "duplicates": 0,
                                   "unacknowledged": 0, "phantom": 0, "valid": False,
                                   "violations": {"oversold": [], "lost_updates": ["r-1-7", "r-1-8"],
                                                  "undersold": [], "duplicates": []}},
                        valid=False,
                        reproduce="printf x > /tmp/cell.conf && loadtest/compare --scenario /tmp/cell.conf"),
             {"cell": 6, "label": "redis-lock/no-watchdog", "guard": "redis-lock", "instances": 2,
              "path": "direct", "stock": 1000, "requests": 2000, "concurrency": 32, "threads": 2,
              "hold_ms": 250, "rate": 0, "fields": {"watchdog": False}, "status": "skipped",
              "reason": "guard not in this build"}]
    res = results(cells)
    res["matrix"] = matrix_of(cells)
    return res


class RenderTest(unittest.TestCase):
    def test_render_dir_reads_only_results_json(self):
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "results.json"), "w", encoding="utf-8") as f:
                json.dump(sample(), f)
            render_dir(d)
            self.assertEqual(sorted(os.listdir(d)),
                             ["report.html", "report.md", "results.csv", "results.json"])
            with open(os.path.join(d, "results.csv"), encoding="utf-8") as f:
                rows = list(csv.DictReader(f))
            self.assertEqual(len(rows), 6)
            self.assertEqual(rows[0]["verdict"], "oversold 1000 units, lost 1825 updates")

    def test_matrix_in_markdown_and_results(self):
        res = sample()
        m = res["matrix"]
        self.assertEqual(m["none"]["1 instance"]["verdict"], "broke")
        self.assertEqual(m["conditional-update"]["N instances"]["verdict"], "held")
        self.assertEqual(m["redis-lock"]["pause"]["verdict"], "broke")
        md = render_md(res)
        self.assertIn("## Which guard? The decision matrix", md)
        self.assertIn("| `redis-lock` |", md)
        self.assertIn("lost_updates: r-1-7 r-1-8", md)

    def test_holds_table(self):
        res = results([holds_cell(1, "for-update", "held", "held"),
                       holds_cell(2, "for-update/confirm-none", "broke", "broke", oversold=2,
                                  late_stale=2, late_refused=0)])
        res["matrix"] = matrix_of(res["cells"])
        md = render_md(res)
        self.assertIn("## Holds", md)
        self.assertIn("| for-update | 2 | 20 | 40 | 1000 | 20 | 14 | 6 | 2 | 0 | 0 | 6 | 20 | 0 | 0 | 0 | 0 "
                      "| yes | yes | held | held |", md)
        self.assertIn("| for-update/confirm-none | 2 | 20 | 40 | 1000 | 20 | 14 | 6 | 0 | 0 | 2 | 6 | 22 | 2 "
                      "| 0 | 0 | 2 | no | yes | broke | broke |", md)
        self.assertIn("oversold 2 units, 2 late confirm(s) on units given back", md)
        self.assertEqual(res["matrix"]["for-update/confirm-none"]["N instances"]["verdict"], "broke")
        h = render_html(res)
        self.assertIn('<table class="holds">', h)
        self.assertIn('<tr id="holds-2">', h)

    def test_hold_fault_cell_says_what_is_stranded(self):
        from lab.verdicts import measured_text
        c = holds_cell(1, "hold-crash/for-update", "broke", "held")
        c["holds"].update({"expired_unswept": 6, "live_after": 0})
        c.update({"fault": "hold-crash", "measured": "broke"})
        self.assertTrue(measured_text(c).startswith("stranded: 0 held, 6 expired unswept after the sweep"))

    def test_markdown(self):
        md = render_md(sample())
        self.assertIn("| `conditional-update` | consistent | consistent |", md)
        self.assertIn("**oversold 999 units, lost 1861 updates**", md)
        self.assertIn("## Faults", md)
        self.assertIn("skipped: guard not in this build", md)
        self.assertNotIn("<script>", md)

    def test_html(self):
        h = render_html(sample())
        self.assertIn('<table class="verdicts">', h)
        self.assertIn("oversold 1000 units, lost 1825 updates", h)
        self.assertIn("&lt;script&gt;x&lt;/script&gt; &amp;", h)
        self.assertNotIn("<script", h)
        self.assertIsNone(re.search(r'(src|xlink:href)="https?://|<link[^>]*href="https?://', h))
        # the matrix first, linked to the guard sections and the cells
        self.assertLess(h.index('class="matrix"'), h.index('class="verdicts"'))
        self.assertIn('href="#guard-none"', h)
        self.assertIn('id="guard-none"', h)
        self.assertIn('id="cell-5"', h)
        # the fault cell: outcomes, invariant with order_ids, valid?, command
        self.assertIn('class="outcomes"', h)
        self.assertIn("r-1-7 r-1-8", h)
        self.assertIn("valid? NO", h)
        self.assertIn("fault-window", h)
        self.assertIn("loadtest/compare --scenario /tmp/cell.conf", h)
        self.assertGreaterEqual(h.count("<svg"), 4)
        self.assertIn("pause/redis-lock", h)

    def test_text_tables(self):
        cells = sample()["cells"]
        t = text_table(cells)
        self.assertEqual(len(t.splitlines()), 2 + len(cells))
        ft = fault_text_table(cells)
        self.assertIn("broke (as expected)", ft)


if __name__ == "__main__":
    unittest.main()
