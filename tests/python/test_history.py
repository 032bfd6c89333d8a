"""lab.history: the history checker on hand-made histories, each with the
verdict it must give (and, where it matters, what the count checker in
lab.checker says of the same run, to show what only a history can see)."""

import unittest

from lab.checker import invariant_block
from lab.history import check, ledger_join, linearize, lost_update_ids


def op(p, inv, done, oid, outcome, remaining=None, error=None, qty=1, sku="A"):
    return {"process": p, "invoke_ns": inv, "complete_ns": done, "sku": sku, "qty": qty,
            "order_id": oid, "outcome": outcome, "remaining": remaining, "error": error}


def seed(inv, done, stock, sku="A", kind="seed"):
    return {"op": kind, "process": "runner", "invoke_ns": inv, "complete_ns": done, "sku": sku,
            "stock": stock, "outcome": "ok"}


class HistoryCheckerTest(unittest.TestCase):
    def test_linearizable_with_overlaps_and_refusals(self):
        # three buyers overlapping, answers in an order different from the
        # invokes; then a sold-out refusal and a lock timeout (no constraint)
        h = [seed(0, 1, 3),
             op(0, 10, 50, "a", "ok", 1), op(1, 11, 20, "b", "ok", 2), op(2, 12, 60, "c", "ok", 0),
             op(0, 61, 70, "d", "refused", error="out_of_stock"),
             op(1, 21, 90, "e", "refused", error="lock_timeout")]
        r = check(h, ledger_ids=["a", "b", "c"])
        self.assertIs(r["valid"], True, r["reason"])
        self.assertEqual(r["ops"], 6)
        self.assertEqual(r["window"], [])

    def test_lost_update_whose_totals_balance(self):
        # a and b both answered "9 left" (one read-modify-write lost the
        # other's), c then left 7: 3 ledger rows, stock 10 -> 7, so the
        # totals balance and the count checker calls it valid
        h = [seed(0, 1, 10),
             op(0, 10, 30, "a", "ok", 9), op(1, 12, 32, "b", "ok", 9), op(0, 40, 50, "c", "ok", 7)]
        counted = invariant_block({"initial": 10, "stock": 7, "sold": 3},
                                  [(1.0, "i", "a"), (1.1, "i", "b"), (1.2, "i", "c")],
                                  {"ok": 3, "refused": 0, "indeterminate": 0})
        self.assertTrue(counted["valid"])
        r = check(h, ledger_ids=["a", "b", "c"])
        self.assertIs(r["valid"], False)
        self.assertIn("not linearizable", r["reason"])
        self.assertEqual(r["violations"]["lost_updates"], ["a", "b"])
        ids = [w["order_id"] for w in r["window"]]
        self.assertIn("a", ids)
        self.assertIn("b", ids)
        self.assertNotIn("c", ids)     # c is after the point that cannot be ordered
        self.assertEqual(sum(1 for w in r["window"] if w["blocked"]), 1)

    def test_window_is_the_two_answers_among_many_buyers(self):
        # 16 overlapping buyers answered 99..84, except that two both say
        # 90: the window is those two, whatever the others did
        h = [seed(0, 1, 100)]
        rems = list(range(99, 83, -1))
        rems[12] = 90          # 87 -> 90: the 9th and the 13th both "90 left"
        for k, r in enumerate(rems):
            h.append(op(k, 10 + k, 500 + k, f"o{k}", "ok", r))
        r = check(h)
        self.assertIs(r["valid"], False)
        self.assertEqual(sorted(w["order_id"] for w in r["window"]), ["o12", "o9"])
        self.assertIn("whatever the stock before them", r["reason"])

    def test_refusal_that_sold(self):
        h = [seed(0, 1, 5), op(0, 10, 20, "a", "ok", 4),
             op(1, 11, 25, "b", "refused", error="lease_expired")]
        r = check(h, ledger_ids=["a", "b"])
        self.assertIs(r["valid"], False)
        self.assertEqual(r["violations"]["refused_but_sold"], ["b"])

    def test_ok_never_in_the_ledger(self):
        h = [seed(0, 1, 5), op(0, 10, 20, "a", "ok", 4), op(1, 30, 40, "b", "ok", 3)]
        r = check(h, ledger_ids=["a"])
        self.assertIs(r["valid"], False)
        self.assertEqual(r["violations"]["ok_not_in_ledger"], ["b"])

    def test_in_flight_at_the_end_may_have_sold(self):
        # c was sent and never answered before the run ended; it sold
        # afterwards: the ledger has it, the stock moved 3. The count
        # checker without it sees a phantom sale; the history does not.
        h = [seed(0, 1, 5), op(0, 10, 20, "a", "ok", 4), op(1, 30, 40, "b", "ok", 2),
             op(2, 25, None, "c", "indeterminate", error="in_flight")]
        counted = invariant_block({"initial": 5, "stock": 2, "sold": 3},
                                  [(1.0, "i", "a"), (1.1, "i", "c"), (1.2, "i", "b")],
                                  {"ok": 2, "refused": 0, "indeterminate": 0})
        self.assertEqual(counted["phantom"], 1)
        r = check(h, ledger_ids=["a", "c", "b"])
        self.assertIs(r["valid"], True, r["reason"])
        # the same operation could also not have sold
        r = check(h[:2] + [op(1, 30, 40, "b", "ok", 3), h[3]], ledger_ids=["a", "b"])
        self.assertIs(r["valid"], True, r["reason"])
        # but it cannot have sold before it was sent
        r = check([seed(0, 1, 5), op(0, 10, 20, "a", "ok", 3),
                   op(2, 25, None, "c", "indeterminate", error="timeout")], ledger_ids=["a", "c"])
        self.assertIs(r["valid"], False)

    def test_too_large_for_the_budget_is_unknown(self):
        # 20 overlapping timeouts of qty 1..20 and then an answer no subset
        # of them explains: the search would try 2^20 subsets
        h = [seed(0, 1, 1000)]
        h += [op(k, 10 + k, 1000 + k, f"t{k}", "indeterminate", error="timeout", qty=k)
              for k in range(1, 21)]
        h.append(op(0, 2000, 2010, "z", "ok", 1000 - 1 - 211))
        r = check(h, budget=20000)
        self.assertEqual(r["valid"], "unknown")
        self.assertIn("budget", r["reason"])

    def test_a_proven_lost_update_needs_no_search(self):
        # the history of the budget test, plus two answers "900 left": the
        # search would run out, the two answers alone prove it invalid
        h = [seed(0, 1, 1000)]
        h += [op(k, 10 + k, 1000 + k, f"t{k}", "indeterminate", error="timeout", qty=k)
              for k in range(1, 21)]
        h += [op(30, 2000, 2010, "x", "ok", 900), op(31, 2001, 2011, "y", "ok", 900)]
        r = check(h, budget=20000)
        self.assertIs(r["valid"], False)
        self.assertEqual([w["order_id"] for w in r["window"]], ["x", "y"])
        self.assertEqual(r["steps"], 0)
        # answered "899 left" before "900 left" was asked: as impossible
        h[-1] = op(31, 2020, 2030, "y", "ok", 901)
        self.assertIs(check(h, budget=20000)["valid"], False)

    def test_out_of_stock_while_stock_remains(self):
        h = [seed(0, 1, 2), op(0, 10, 20, "a", "ok", 1),
             op(1, 30, 40, "b", "refused", error="out_of_stock")]
        r = check(h, ledger_ids=["a"])
        self.assertIs(r["valid"], False)
        self.assertEqual([w["order_id"] for w in r["window"] if w["blocked"]], ["b"])

    def test_reseed_sets_the_stock_and_clears_the_ledger(self):
        h = [seed(0, 1, 3), op(0, 10, 20, "a", "ok", 2), seed(30, 40, 3, kind="reseed"),
             op(1, 35, 45, "b", "ok", 2), op(0, 50, 60, "c", "ok", 1)]
        r = check(h, ledger_ids=["b", "c"])
        self.assertIs(r["valid"], True, r["reason"])

    def test_sale_answered_during_a_reseed_may_be_cleared(self):
        # the holder's sale committed while the reseed waited for the row,
        # and was answered after the reseed was sent: the reseed cleared it
        h = [seed(0, 1, 3), op(0, 10, 60, "holder", "ok", 2), seed(30, 70, 3, kind="reseed"),
             op(1, 80, 90, "b", "ok", 2)]
        r = check(h, ledger_ids=["b"])
        self.assertIs(r["valid"], True, r["reason"])
        # a sale sent after the reseed answered must be in the ledger
        r = check(h, ledger_ids=[])
        self.assertEqual(r["violations"]["ok_not_in_ledger"], ["b"])

    def test_ledger_row_nobody_was_answered_and_duplicates(self):
        h = [seed(0, 1, 5), op(0, 10, 20, "a", "ok", 4)]
        j = ledger_join(h, ["a", "a", "x"])
        self.assertEqual(j, {"duplicates": ["a"], "ledger_row_unanswered": ["x"]})

    def test_initial_stock_from_the_caller(self):
        h = [op(0, 10, 20, "a", "ok", 4)]
        self.assertIs(check(h, initial={"A": 5})["valid"], True)
        self.assertIs(check(h, initial={"A": 6})["valid"], False)
        self.assertEqual(check(h)["valid"], "unknown")

    def test_skus_are_checked_apart(self):
        h = [seed(0, 1, 1, sku="A"), seed(0, 1, 1, sku="B"),
             op(0, 10, 20, "a", "ok", 0, sku="A"), op(1, 10, 20, "b", "ok", 0, sku="B")]
        self.assertIs(check(h)["valid"], True)

    def test_lost_update_ids_restart_at_a_seed(self):
        h = [seed(0, 1, 2), op(0, 10, 20, "a", "ok", 1), seed(30, 31, 2, kind="reseed"),
             op(0, 40, 50, "b", "ok", 1)]
        self.assertEqual(lost_update_ids(h), [])

    def test_search_cost_is_linear_on_a_valid_history(self):
        # 2000 sales by 16 overlapping buyers: about one step per operation
        h, n = [seed(0, 1, 2000)], 2000
        for k in range(n):
            h.append(op(k % 16, 100 + k * 10, 100 + k * 10 + 150, f"o{k}", "ok", n - 1 - k))
        r = linearize(h, 0)
        self.assertIs(r["valid"], True)
        self.assertLess(r["steps"], 3 * n)




class HistoryRenderTest(unittest.TestCase):
    def test_invalid_cell_draws_its_window(self):
        from lab.render.history import checker_html, load_checker_sections
        h = [seed(0, 1, 10),
             op(0, 10, 30, "a", "ok", 9), op(1, 12, 32, "b", "ok", 9), op(2, 14, None, "t", "indeterminate",
                                                                          error="in_flight")]
        c = {"cell": 3, "label": "none", "instances": 2, "checker": check(h, ledger_ids=["a", "b"])}
        html = "\n".join(checker_html(c))
        self.assertIn('class="history"', html)
        self.assertIn("valid? NO", html)
        self.assertEqual(html.count("<rect"), 2 + 5)          # two bars, five legend keys
        self.assertIn('stroke="#e15759" stroke-width="3"', html)  # the operation no order places
        self.assertIn("lost updates", html)
        self.assertEqual(load_checker_sections([dict(c, checker=check(h[:2], ledger_ids=["a"]))]), [])
        self.assertTrue(load_checker_sections([c]))


if __name__ == "__main__":
    unittest.main()
