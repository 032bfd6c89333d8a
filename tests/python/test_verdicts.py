"""lab.verdicts: words of one run, of repeats ("oversold in 2/3 runs"), the
median run and spread, and the decision matrix."""

import copy
import unittest

from fixtures import fault_cell, load_cell
from lab.verdicts import MATRIX_COLS, aggregate_runs, matrix_of, verdict, verdict_class


def runs_of(cell, variations):
    out = []
    for i, v in enumerate(variations, 1):
        r = copy.deepcopy(cell)
        r.update(v)
        r["run"] = i
        out.append(r)
    return out


class HistoryVerdictTest(unittest.TestCase):
    """The cell's valid? comes from the history checker."""

    def test_consistent_counts_but_invalid_history_is_broke(self):
        c = load_cell(1, "x", 2, 1000, 0, 0, True, 1000, valid=False,
                      checker={"valid": False, "violations": {"not_linearizable": ["a", "b"]}})
        self.assertEqual(verdict(c), "history not linearizable")
        self.assertEqual(verdict_class(c), "bad")
        self.assertEqual(matrix_of([c])["x"]["N instances"]["verdict"], "broke")
        ok = load_cell(2, "y", 2, 1000, 0, 0, True, 1000, valid=True)
        self.assertEqual(matrix_of([ok])["y"]["N instances"]["verdict"], "held")

    def test_valid_over_runs(self):
        base = load_cell(1, "x", 2, 1000, 0, 0, True, 1000, valid=True,
                         checker={"valid": True, "violations": {}})
        bad = {"valid": False, "checker": {"valid": False, "reason": "run 2's", "violations": {}}}
        for label, runs, want in [
                ("all valid", [{}, {}], True),
                ("one invalid", [{}, bad], False),
                ("one unknown", [{}, {"valid": "unknown"}], "unknown"),
                ("invalid beats unknown", [{"valid": "unknown"}, bad], False)]:
            with self.subTest(label):
                c = aggregate_runs(runs_of(base, runs))
                self.assertEqual(c["valid"], want)
                if want is False:
                    self.assertEqual(c["checker"]["reason"], "run 2's")
                    self.assertEqual(c["checker_run"], 2)


class VerdictTest(unittest.TestCase):
    def test_single_run_words(self):
        cases = [
            ("oversold+lost", load_cell(1, "none", 2, 2000, 1000, 1825, False, 2000),
             "oversold 1000 units, lost 1825 updates", "bad"),
            ("consistent", load_cell(2, "mutex", 1, 1000, 0, 0, True, 1000), "consistent", "good"),
            ("lost only", load_cell(3, "x", 2, 900, 0, 12, False, 900), "lost 12 updates", "bad"),
            ("inconsistent", load_cell(4, "x", 2, 900, 0, 0, False, 900, stock_left=7),
             "inconsistent (stock 7)", "bad"),
            ("skipped", {"status": "skipped", "reason": "guard not in this build"},
             "skipped: guard not in this build", "skip"),
            ("error", {"status": "error", "reason": "boom"}, "error: boom", "skip"),
        ]
        for label, c, words, cls in cases:
            with self.subTest(label):
                self.assertEqual(verdict(c), words)
                self.assertEqual(verdict_class(c), cls)

    def test_one_run_keeps_the_old_words(self):
        c = aggregate_runs([load_cell(1, "none", 2, 2000, 1000, 1825, False, 2000, run=1)])
        self.assertEqual(verdict(c), "oversold 1000 units, lost 1825 updates")
        self.assertEqual(len(c["runs"]), 1)
        self.assertEqual(c["runs"][0]["verdict"], verdict(c))

    def test_repeats_count_runs_and_take_the_median(self):
        base = load_cell(1, "none", 2, 0, 0, 0, True, 0)
        runs = runs_of(base, [
            {"oversold": 5, "lost_updates": 5, "consistent": False, "ok_per_s": 300.0},
            {"oversold": 0, "lost_updates": 0, "consistent": True, "ok_per_s": 100.0},
            {"oversold": 9, "lost_updates": 9, "consistent": False, "ok_per_s": 200.0},
        ])
        c = aggregate_runs(runs)
        self.assertEqual(c["repeat"]["n"], 3)
        self.assertEqual(c["repeat"]["oversold"], 2)
        self.assertEqual(c["ok_per_s"], 200.0)           # the median run's figures
        self.assertEqual(c["repeat"]["spread"]["ok_per_s"], {"median": 200.0, "min": 100.0, "max": 300.0})
        self.assertFalse(c["consistent"])
        self.assertEqual(verdict(c), "oversold in 2/3 runs (median 5 units), lost updates in 2/3 runs")
        self.assertEqual([r["verdict"] for r in c["runs"]],
                         ["oversold 5 units, lost 5 updates", "consistent", "oversold 9 units, lost 9 updates"])

    def test_repeats_consistent_and_failed_runs(self):
        base = load_cell(1, "mutex", 1, 1000, 0, 0, True, 1000)
        runs = runs_of(base, [{}, {}, {"status": "error", "reason": "loadgen exited 1"}])
        c = aggregate_runs(runs)
        self.assertEqual(verdict(c), "consistent in 2/2 runs, 1 run(s) failed")
        self.assertEqual(c["runs"][2]["verdict"], "error: loadgen exited 1")

    def test_fault_repeats(self):
        base = fault_cell(1, "pause", "redis-lock", "broke", "broke", lost=3)
        c = aggregate_runs(runs_of(base, [{}, {"measured": "held", "lost_updates": 0, "consistent": True}, {}]))
        self.assertEqual(c["measured"], "broke")
        self.assertEqual((c["repeat"]["held"], c["repeat"]["broke"]), (1, 2))

    def test_matrix(self):
        cells = [load_cell(1, "none", 1, 2000, 1000, 1825, False, 2000),
                 load_cell(2, "none", 2, 2000, 1000, 1825, False, 1800),
                 load_cell(3, "mutex", 1, 1000, 0, 0, True, 1000),
                 fault_cell(4, "pause", "redis-lock", "broke", "broke", lost=3),
                 fault_cell(5, "crash", "redis-lock", "held", "held"),
                 {"cell": 6, "label": "pause/zookeeper", "guard": "zookeeper", "fault": "pause",
                  "status": "skipped", "reason": "guard not in this build"}]
        m = matrix_of(cells)
        self.assertEqual(set(m), {"none", "mutex", "redis-lock", "zookeeper"})
        for row in m.values():
            for col in MATRIX_COLS:
                self.assertIn(col, row)
        self.assertEqual(m["none"]["1 instance"]["verdict"], "broke")
        self.assertEqual(m["none"]["N instances"]["verdict"], "broke")
        self.assertEqual(m["none"]["ok_per_s"], 900.0)    # from the 2-instance cell
        self.assertEqual(m["mutex"]["1 instance"]["verdict"], "held")
        self.assertEqual(m["mutex"]["N instances"]["verdict"], "not run")
        self.assertEqual(m["redis-lock"]["pause"]["verdict"], "broke")
        self.assertEqual(m["redis-lock"]["crash"]["verdict"], "held")
        self.assertEqual(m["zookeeper"]["pause"]["verdict"], "not run")


if __name__ == "__main__":
    unittest.main()
