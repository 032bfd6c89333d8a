"""lab.scenario: table-driven good and bad scenario files (labels name each
case); the FILE:LINE: reason of every refusal."""

import os
import tempfile
import unittest

from lab.scenario import ScenarioError, expand_cells, parse_scenario, resolve_scenario
from lab import SCEN_DIR

BAD = [
    # (label, body, line, text)
    ("no-equals", "guards = none\nstock 100\n", 2, "expected 'key = value'"),
    ("unknown-key", "# c\nguards = none\nstok = 5\n", 3, "unknown key 'stok'"),
    ("not-a-number", "guards = none\nrequests = lots\n", 2, "whole number"),
    ("out-of-range", "guards = none\ninstances = 1 17\n", 2, "instances must be 1..16"),
    ("duplicate", "guards = none\nstock = 1\nstock = 2\n", 3, "already set on line 2"),
    ("all-plus", "guards = all none\n", 1, "'all' cannot be combined"),
    ("variant-guard", "guards = none\nvariant = v1 : watchdog=false\n", 2, "guard=NAME is required"),
    ("reserved", "guards = none\nfield = order_id=x\n", 2, "set by the runner"),
    ("bad-fault", "fault = flood\nguards = none\n", 1, "fault must be one of"),
    ("faults-with-guards", "fault = pause crash\nguards = none\n", 1, "own files"),
    ("nothing", "# only\nstock = 5\n", 2, "nothing to run"),
    ("bad-mysql", "guards = none\nmysql = galera5\n", 2, "mysql must be one of single, galera3"),
    ("bad-kind", "guards = none\nkind = hold\n", 2, "kind must be one of load, holds"),
    ("ttl-without-holds", "guards = none\nttl_ms = 1000\n", 2, "'ttl_ms' belongs to kind = holds"),
    ("holds-with-fault", "kind = holds\nfault = crash\nguards = none\n", 2, "not a holds scenario's key"),
    ("holds-with-path", "kind = holds\nguards = none\npath = order\n", 3, "not a holds scenario's key"),
    ("holds-pct", "kind = holds\nguards = none\npay_pct = 95\nlate_pct = 10\n", 4,
     "pay_pct + late_pct must be at most 100"),
    ("retries-without-retry", "guards = none\nretries = 2\n", 2, "'retries' belongs to kind = retry"),
    ("users-in-cart", "kind = cart\nguards = none\nusers = 3\n", 3, "'users' belongs to kind = limits"),
    ("cart-with-fault", "kind = cart\nguards = none\nfault = crash\n", 3, "not a cart scenario's key"),
    ("limit-range", "kind = limits\nguards = none\nlimit_per_user = 0\n", 3, "limit_per_user must be 1..1000"),
    ("holds-ttl-range", "kind = holds\nguards = none\nttl_ms = 50\n", 3, "ttl_ms must be 100..60000"),
]


class ScenarioTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.tmp.cleanup()

    def write(self, label, body):
        p = os.path.join(self.tmp.name, label + ".conf")
        with open(p, "w", encoding="utf-8") as f:
            f.write(body)
        return p

    def test_bad_files(self):
        for label, body, line, text in BAD:
            with self.subTest(label):
                p = self.write(label, body)
                with self.assertRaises(ScenarioError) as cm:
                    parse_scenario(p)
                self.assertIn(f"{p}:{line}: ", str(cm.exception))
                self.assertIn(text, str(cm.exception))

    def test_good_file_expands(self):
        p = self.write("good", "name = t  # trailing\nguards = none, mutex\ninstances = 1 2\n"
                               "field = lock_wait_ms=100\n"
                               "variant = rl/no-wd : guard=redis-lock watchdog=false hold_ms=250\n")
        sc = parse_scenario(p)
        cells = expand_cells(sc, None)
        self.assertEqual(len(cells), 6)
        self.assertEqual([c["cell"] for c in cells], list(range(1, 7)))
        v = [c for c in cells if c["label"] == "rl/no-wd"]
        self.assertEqual(len(v), 2)
        self.assertEqual(v[0]["hold_ms"], 250)
        self.assertEqual(v[0]["fields"], {"lock_wait_ms": 100, "watchdog": False})

    def test_holds_cells_carry_their_expectation(self):
        p = self.write("h", "kind = holds\nguards = all\nttl_ms = 900\n"
                       "variant = cn : guard=for-update confirm_check=none\n")
        cells = expand_cells(parse_scenario(p), ["for-update", "redis-lock"])
        self.assertEqual([(c["label"], c["kind"], c["ttl_ms"], c["pay_pct"], c["late_pct"], c["expected"])
                          for c in cells],
                         [("for-update", "holds", 900, 70, 10, "held"),
                          ("redis-lock", "holds", 900, 70, 10, "held"),
                          ("cn", "holds", 900, 70, 10, "broke")])
        self.assertEqual(cells[2]["fields"], {"confirm_check": "none"})

    def test_shop_cells_carry_their_expectation(self):
        cases = [("cart", "variant = pl : guard=for-update line_check=per-line\n"
                          "variant = ag : guard=for-update lock_order=as-given\n",
                  [("for-update", "held"), ("pl", "broke"), ("ag", "held")]),
                 ("limits", "variant = sep : guard=for-update limit_check=separate\n",
                  [("for-update", "held"), ("sep", "broke")]),
                 ("retry", "variant = nk : guard=for-update retry=plain\n"
                           "variant = ni : guard=for-update retry=new-ids\n"
                           "variant = k : guard=for-update retry=key\n",
                  [("for-update", "broke"), ("nk", "broke"), ("ni", "broke"), ("k", "held")])]
        for kind, variants, want in cases:
            with self.subTest(kind):
                p = self.write(kind, f"kind = {kind}\nguards = for-update\n" + variants)
                cells = expand_cells(parse_scenario(p), ["for-update"])
                self.assertEqual([(c["label"], c["expected"]) for c in cells], want)
                self.assertTrue(all(c["kind"] == kind for c in cells))

    def test_shipped_shop_files_parse(self):
        for name in ("cart", "limits", "retry"):
            with self.subTest(name):
                sc = parse_scenario(resolve_scenario(name))
                self.assertEqual(sc["kind"], name)

    def test_holds_faults_file_expands_the_hold_faults(self):
        cells = expand_cells(parse_scenario(resolve_scenario("holds-faults")), None)
        self.assertEqual([c["label"] for c in cells],
                         [f"{f}/{g}" for f in ("hold-crash", "hold-sigterm", "hold-reseed")
                          for g in ("conditional-update", "redis-lock")])
        self.assertEqual({c["expected"] for c in cells}, {"held"})

    def test_all_uses_the_build(self):
        sc = parse_scenario(self.write("all", "guards = all\ninstances = 2\n"))
        self.assertEqual([c["guard"] for c in expand_cells(sc, ["none", "mutex"])], ["none", "mutex"])

    def test_shipped_scenarios_parse(self):
        for n in sorted(os.listdir(SCEN_DIR)):
            if n.endswith(".conf"):
                with self.subTest(n):
                    parse_scenario(os.path.join(SCEN_DIR, n))

    def test_faults_file_takes_cells_from_each_fault(self):
        sc = parse_scenario(resolve_scenario("faults"))
        cells = expand_cells(sc, None)
        self.assertEqual({c["fault"] for c in cells}, {"pause", "crash", "failover", "restart"})
        for c in cells:
            self.assertIn(c["expected"], ("held", "broke"))
            self.assertTrue(c["label"].startswith(c["fault"] + "/"))

    def test_faults_all_covers_every_guard_and_fault(self):
        """faults-all: every guard has a cell of pause, crash, restart,
        reseed and sigterm; every Redis-backed guard one of failover, with
        and without replicas_ack where it has it; every expected verdict
        has its why, and every "broke" but the no-guard ones names the
        option that makes it hold (or says there is none yet)."""
        guards = ["none", "mutex", "optimistic", "for-update", "conditional-update",
                  "batched-update", "redis-lock", "segmented", "redis-decr", "redlock",
                  "lock-table", "redis-stream", "zookeeper", "etcd"]
        cells = expand_cells(parse_scenario(resolve_scenario("faults-all")), None)
        have = {(c["fault"], c["guard"]) for c in cells}
        for f in ("pause", "crash", "restart", "reseed", "sigterm"):
            for g in guards:
                self.assertIn((f, g), have)
        labels = {c["label"] for c in cells if c["fault"] == "failover"}
        for g in ("redis-lock", "segmented", "redis-decr", "redis-stream"):
            self.assertIn(f"failover/{g}", labels)
            self.assertIn(f"failover/{g}/replicas_ack", labels)
        for c in cells:
            self.assertTrue(c["expected_why"], c["label"])
            if c["fault"] == "failover" and c["expected"] == "broke":
                self.assertIn("replicas_ack", c["expected_why"], c["label"])
            if c["fault"] == "failover" and c["fields"].get("replicas_ack"):
                self.assertEqual(c["expected"], "held", c["label"])

    def test_listed_scenario_must_have_one_fault(self):
        two = self.write("two", "fault = pause crash\n")
        sc = parse_scenario(self.write("outer", f"fault = crash {two}\n"))
        with self.assertRaises(ScenarioError):
            expand_cells(sc, None)


if __name__ == "__main__":
    unittest.main()
