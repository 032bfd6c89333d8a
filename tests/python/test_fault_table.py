"""lab.faultplan's verdicts are a table of fault x capability (VERDICTS):
every cell the shipped fault scenarios expand to gets the verdict and the
why the old cascade by guard name gave (frozen in fault_expectations.json
before that cascade was deleted), the capabilities being what the built
inventory serves (GET /guards, `inventory --print-guards 1`)."""

import json
import os
import unittest

from lab import guardinfo
from lab.faultplan import FAULTS, VERDICTS, expect
from lab.scenario import expand_fault_cells, parse_scenario

HERE = os.path.dirname(os.path.abspath(__file__))
SCENARIOS = os.path.join(guardinfo.ROOT, "loadtest", "scenarios")


def frozen():
    """The frozen answers as dicts (the file keeps each as a row
    [fault, guard, fields, verdict, index into its list of whys])."""
    with open(os.path.join(HERE, "fault_expectations.json")) as f:
        d = json.load(f)
    def cell(r):
        return {"fault": r[0], "guard": r[1], "fields": r[2], "verdict": r[3],
                "why": d["whys"][r[4]]}
    return {k: [cell(r) for r in d[k]] for k in ("plan", "cross")}


class FaultTableTest(unittest.TestCase):
    def test_every_planned_cell_keeps_its_verdict_and_why(self):
        for c in frozen()["plan"]:
            got = expect(c["fault"], c["guard"], c["fields"])
            self.assertEqual(got[0], c["verdict"], c)
            self.assertEqual(got[1], c["why"], c)

    def test_every_fault_guard_option_mix_keeps_its_verdict(self):
        """Beyond the plan: every fault x guard x option set the plan uses
        (cells no scenario runs) answers as the old cascade did too."""
        for c in frozen()["cross"]:
            self.assertEqual(expect(c["fault"], c["guard"], c["fields"]), (c["verdict"], c["why"]), c)

    def test_the_plan_is_the_frozen_one(self):
        """The shipped scenarios still expand to exactly the frozen cells,
        so the check above covers every (scenario, guard, variant)."""
        names = list(guardinfo.guards())
        seen = set()
        for f in sorted(os.listdir(SCENARIOS)):
            sc = parse_scenario(os.path.join(SCENARIOS, f)) if f.endswith(".conf") else None
            if not sc or not sc.get("fault"):
                continue
            for c in expand_fault_cells(sc, names):
                seen.add(json.dumps([c["fault"], c["guard"], c["fields"]], sort_keys=True))
        want = {json.dumps([c["fault"], c["guard"], c["fields"]], sort_keys=True)
                for c in frozen()["plan"]}
        self.assertEqual(seen, want)

    def test_every_fault_has_a_last_resort_row(self):
        for fault in FAULTS:
            self.assertTrue(any(f == fault and not when for f, when, _, _ in VERDICTS), fault)

    def test_rows_name_only_served_capabilities(self):
        served = set()
        for g in guardinfo.guards().values():
            served |= set(g["capabilities"])
        derived = {"expiring_lock", "fencing_on", "watchdog_on", "replicas_ack_on", "setnx_acquire"}
        for fault, when, verdict, _ in VERDICTS:
            self.assertIn(verdict, ("held", "broke"))
            for k in when:
                self.assertIn(k, served | derived, (fault, when))


if __name__ == "__main__":
    unittest.main()
