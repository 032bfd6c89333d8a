"""lab.cluster's judging and timing helpers and the cluster table
(lab.render.cluster), on hand-made results: no stack."""

import re
import unittest

from lab.cluster import first_sale_after, judged, longest_stall, refusal_window
from fixtures import load_cell, results
from lab.render.cluster import cluster_table
from lab.render.html import render_html
from lab.render.md import render_md


def cell(guard, n, db, **kw):
    c = {"status": "ok", "guard": guard, "label": guard, "instances": n, "db": db,
         "sold": 200, "oversold": 0, "lost_updates": 0, "consistent": True, "converged": True,
         "conflicts": 0, "retries": 0, "n503": 0, "ok_per_s": 100.0}
    c.update(kw)
    return c


class ClusterTest(unittest.TestCase):
    def has(self, text, doc):
        # not assertIn: a failure would print the whole page
        self.assertTrue(text in doc, f"missing: {text}")

    def matches(self, doc, pattern):
        self.assertTrue(re.search(pattern, doc), f"no match: {pattern}")

    def test_judged(self):
        self.assertEqual(judged(cell("x", 2, "galera3")), "exact")
        self.assertEqual(judged(cell("x", 2, "galera3", consistent=False)), "loses updates")
        self.assertEqual(judged(cell("x", 2, "galera3", converged=False, consistent=False)), "diverged")
        self.assertEqual(judged({"status": "error"}), "-")

    def test_stall_and_windows(self):
        # (start, status, latency): sales until 1.0, nothing until 7.5, sales again
        rows = [(0.5, 200, 0.01), (1.0, 200, 0.01), (1.1, 200, 6.4), (7.6, 503, 0.01),
                (7.7, 200, 0.01)]
        self.assertAlmostEqual(longest_stall(rows, 1.05), 6.45, places=2)
        self.assertEqual(refusal_window(rows, 1.05), (7.6, 7.6))
        self.assertIsNone(refusal_window(rows, 7.65))
        self.assertEqual(first_sale_after(rows, 7.0), 0.71)
        self.assertIsNone(first_sale_after(rows, 8.0))

    def test_table(self):
        res = {"cells": [
            cell("none", 3, "galera3", consistent=False, lost_updates=7, expected="loses updates",
                 measured="loses updates", wsrep={"cert_failures": [1, 2, 3], "bf_aborts": [4, 5, 6]}),
            cell("none", 3, "single", ok_per_s=900.0)],
            "cluster": {"node_kill": {"error": "boom"},
                        "stale_read": {"reads": 10, "stale_without_sync_wait": 2,
                                       "max_units_behind": 1, "sync_reads": 3,
                                       "stale_with_sync_wait": 0}}}
        text = "\n".join(cluster_table(res))
        self.assertIn("| none | 3 | loses updates | **loses updates** | 200 | 0 | 7 |", text)
        self.assertIn("| 1/2/3 | 4/5/6 | 100.0 | 900.0 |", text)
        self.assertIn("node kill: error: boom", text)
        self.assertIn("in 2 reads (at most 1 units behind)", text)
        self.assertIn("0 of 3 reads with wsrep_sync_wait=1", text)

    def test_html_has_the_cluster_tables(self):
        """report.html shows what report.md shows for the cluster scenario:
        every galera3 row with its figures, the fault and stale-read notes,
        escaped; the single-server cells stay out of the cluster table."""
        def full(n, guard, db, **kw):
            # a whole cell as the runner writes it, with the cluster fields
            c = load_cell(n, guard, 3, 200, 0, 0, True, 200)
            c.update(cell(guard, 3, db, cell=n, **kw))
            return c
        cells = [full(1, "none", "galera3", consistent=False, lost_updates=7,
                      expected="loses updates", measured="loses updates",
                      wsrep={"cert_failures": [1, 2, 3], "bf_aborts": [4, 5, 6]}),
                 full(2, "conditional-update", "galera3", expected="exact", measured="loses updates",
                      lost_updates=3),
                 full(3, "for-update", "galera3", status="error", reason="<galera> down"),
                 full(4, "none", "single", ok_per_s=900.0)]
        res = results(cells)
        res["cluster"] = {
            "node_kill": {"marks": {"kill": 5.0}, "survivor_stall_s": 1.25, "recover_s": 0.5,
                          "by_status": {"200": 90}, "rejoin_s": 14.5,
                          "audit": {"sold": 90, "oversold": 0, "lost_updates": 0, "converged": True},
                          "timeline": [[1, 2], [3, 4], [5, 6]]},
            "node_pause": {"error": "pause failed"},
            "stale_read": {"reads": 10, "stale_without_sync_wait": 2, "max_units_behind": 1,
                           "sync_reads": 3, "stale_with_sync_wait": 0}}
        page = render_html(res)
        md = render_md(res)
        self.has("On a cluster (MariaDB Galera, 3 nodes)", page)
        self.has('<table class="cluster">', page)
        # the figures of the none row, in order, as cells
        self.matches(page, r"<td[^>]*>none</td><td[^>]*>3</td><td[^>]*>loses updates</td>"
                           r"<td[^>]*>loses updates</td><td[^>]*>200</td><td[^>]*>0</td>"
                           r"<td[^>]*>7</td>")
        self.has("<td>1/2/3</td><td>4/5/6</td><td>100.0</td><td>900.0</td>", page)
        # measured against expected: the surprise is marked bad, the match good
        self.matches(page, r'<td class="l bad">loses updates</td><td>200</td><td>0</td><td>3</td>')
        self.matches(page, r'<td class="l good">loses updates</td><td>200</td><td>0</td><td>7</td>')
        self.has("error: &lt;galera&gt; down", page)
        self.assertFalse("<galera>" in page)
        self.has("<b>galera-3 killed (SIGKILL) at 5.0 s</b> under conditional-update", page)
        self.has("Synced in 14.5 s", page)
        self.has("sales per 0.5 s (inventory-1 / -2 / -3): 1/3/5 2/4/6", page)
        self.has("node pause: error: pause failed", page)
        self.has("<b>stale read</b>: after each of 10 sales", page)
        # the same findings as the markdown report
        for text in ("Synced in 14.5 s", "1/3/5 2/4/6", "node pause: error: pause failed",
                     "0 of 3 reads with wsrep_sync_wait=1"):
            self.has(text, md)
        start = page.index('<table class="cluster">')
        table = page[start:page.index("</table>", start)]
        self.assertEqual(table.count("<tr><td"), 3)   # the galera3 cells only

    def test_html_without_cluster_has_no_cluster_section(self):
        c = load_cell(1, "none", 3, 200, 0, 0, True, 200)
        c["db"] = "single"
        res = results([c])
        self.assertNotIn("On a cluster", render_html(res))


if __name__ == "__main__":
    unittest.main()
