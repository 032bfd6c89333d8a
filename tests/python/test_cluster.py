"""lab.cluster's judging and timing helpers and the cluster table
(lab.render.cluster), on hand-made results: no stack."""

import unittest

from lab.cluster import first_sale_after, judged, longest_stall, refusal_window
from lab.render.cluster import cluster_table


def cell(guard, n, db, **kw):
    c = {"status": "ok", "guard": guard, "label": guard, "instances": n, "db": db,
         "sold": 200, "oversold": 0, "lost_updates": 0, "consistent": True, "converged": True,
         "conflicts": 0, "retries": 0, "n503": 0, "ok_per_s": 100.0}
    c.update(kw)
    return c


class ClusterTest(unittest.TestCase):
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


if __name__ == "__main__":
    unittest.main()
