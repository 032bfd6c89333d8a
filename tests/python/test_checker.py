"""lab.checker: operation outcomes and the invariant over a fault cell's
final state, with the violating order_ids (table-driven)."""

import unittest

from lab.checker import invariant_block, outcomes


def sales(n, start=0, prefix="r-1-"):
    return [(100.0 + i, "inventory-2", f"{prefix}{i + 1}") for i in range(start, start + n)]


class CheckerTest(unittest.TestCase):
    def test_outcomes(self):
        cases = [
            ("all ok", {"200": 5}, {}, {"ok": 5, "refused": 0, "indeterminate": 0}),
            ("refusals", {"200": 1, "409": 2, "503": 3}, {}, {"ok": 1, "refused": 5, "indeterminate": 0}),
            ("5xx and no answer", {"500": 1, "0": 2}, {"timeout": 3, "connect": 4, "read": 1},
             {"ok": 0, "refused": 4, "indeterminate": 7}),
        ]
        for label, st, sock, want in cases:
            with self.subTest(label):
                self.assertEqual(outcomes(st, sock), want)
        # a 503 backend_unavailable may be a lost COMMIT reply: maybe sold
        self.assertEqual(outcomes({"200": 1, "503": 5}, {}, {"backend_unavailable": 2, "lock_timeout": 3}),
                         {"ok": 1, "refused": 3, "indeterminate": 2})

    def test_exact_state_is_valid(self):
        b = invariant_block({"initial": 10, "stock": 7, "sold": 3}, sales(3),
                            {"ok": 3, "refused": 5, "indeterminate": 0})
        self.assertTrue(b["valid"])
        self.assertEqual((b["oversold"], b["lost_updates"], b["undersold"], b["duplicates"]), (0, 0, 0, 0))

    def test_oversold_names_the_rows_past_the_stock(self):
        b = invariant_block({"initial": 3, "stock": 0, "sold": 5}, sales(5),
                            {"ok": 5, "refused": 0, "indeterminate": 0})
        self.assertFalse(b["valid"])
        self.assertEqual(b["oversold"], 2)
        self.assertEqual(b["violations"]["oversold"], ["r-1-4", "r-1-5"])

    def test_lost_updates_name_the_overwritten_sales(self):
        rows = sales(4) + [(110.0, "inventory-1", "r-1-holder")]
        # 5 sold, stock says only 2 went: 3 lost; the window covers rows 2..4
        b = invariant_block({"initial": 10, "stock": 8, "sold": 5}, rows,
                            {"ok": 5, "refused": 0, "indeterminate": 0}, (101.0, 110.0))
        self.assertEqual(b["lost_updates"], 3)
        self.assertEqual(b["violations"]["lost_updates"], ["r-1-2", "r-1-3", "r-1-4"])

    def test_undersold_unacknowledged_phantom(self):
        cases = [
            # label, audit, ledger rows, outcomes, field, value
            ("undersold", {"initial": 10, "stock": 5, "sold": 3}, sales(3),
             {"ok": 3, "refused": 0, "indeterminate": 0}, "undersold", 2),
            ("ok not in ledger", {"initial": 10, "stock": 8, "sold": 2}, sales(2),
             {"ok": 3, "refused": 0, "indeterminate": 0}, "unacknowledged", 1),
            ("refused that sold", {"initial": 10, "stock": 7, "sold": 3}, sales(3),
             {"ok": 1, "refused": 2, "indeterminate": 1}, "phantom", 1),
            ("indeterminate that sold is fine", {"initial": 10, "stock": 7, "sold": 3}, sales(3),
             {"ok": 1, "refused": 2, "indeterminate": 2}, "phantom", 0),
        ]
        for label, audit, rows, outc, field, want in cases:
            with self.subTest(label):
                b = invariant_block(audit, rows, outc)
                self.assertEqual(b[field], want)
                self.assertEqual(b["valid"], want == 0)

    def test_duplicates(self):
        rows = sales(2) + [(103.0, "inventory-1", "r-1-1")]
        b = invariant_block({"initial": 10, "stock": 7, "sold": 3}, rows,
                            {"ok": 2, "refused": 0, "indeterminate": 0})
        self.assertEqual(b["duplicates"], 1)
        self.assertEqual(b["violations"]["duplicates"], ["r-1-1"])
        self.assertFalse(b["valid"])


if __name__ == "__main__":
    unittest.main()
