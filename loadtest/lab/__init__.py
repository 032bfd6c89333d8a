"""The oversell lab's comparison runner as a package (see loadtest/README.md,
"Comparison reports"). Entry points: loadtest/compare (lab.cli.main).

  scenario    scenario files: parse, expand into cells
  net         HTTP to the services, /metrics scrapes
  drivers     stack drivers: the embedded stack (deploy/local/stack) and
              services run elsewhere; fault verbs (pause/kill/stop/start)
  cell        one load cell: seed, loadgen, audit
  guardinfo   the guards' descriptions and capabilities (GET /guards)
  faultplan   the fault choreographies' timings and expected verdicts
              (a fault x capability table)
  faults      one fault cell: buyers + holder + fault verbs, outcomes
  verdicts    verdicts, repeats, the decision matrix
  runner      measuring: cells -> results.json
  render/     reading results.json only: md, html, csv, text, svg

Python 3 standard library only (matplotlib optional, for charts); talks
to 127.0.0.1 only."""

import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCEN_DIR = os.path.join(ROOT, "loadtest", "scenarios")
