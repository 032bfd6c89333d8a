"""The guards as the inventory describes them (GET /guards): the texts each
guard's own C file writes (needs, use_when, steps, breaks, origin, ...), its
capabilities (derived in lib/guards/core/guard_doc.c from its fields and
hooks) and its metric rows. The runner loads them from the live stack
(load); without one (scenario parsing, unit tests) they are read from the
built inventory (`inventory --print-guards 1`, no backend opened)."""

import json
import os
import subprocess

from . import ROOT

_guards = None


def load(entries):
    """Use these GET /guards entries (a list of objects) from now on."""
    global _guards
    _guards = {g["name"]: g for g in entries}


def _from_build():
    binary = os.path.join(os.environ.get("LAB_BIN_DIR") or os.path.join(ROOT, "build", "bin"),
                          "inventory")
    try:
        out = subprocess.run([binary, "--print-guards", "1"], capture_output=True, text=True,
                             timeout=20, check=True).stdout
    except (OSError, subprocess.SubprocessError) as e:
        raise RuntimeError(f"cannot read the guards' descriptions from {binary} (make first): {e}") from None
    return json.loads(out)["guards"]


def guards():
    """{name: its GET /guards entry}."""
    if _guards is None:
        load(_from_build())
    return _guards


def caps(name):
    """The guard's capabilities ({} for a guard this build does not have)."""
    return dict((guards().get(name) or {}).get("capabilities") or {})


def report_entry(name):
    """What results.json keeps of a guard for the renderers (a saved run
    renders without a stack): the entry under the names they read."""
    g = guards().get(name) or {}
    return {"needs": g.get("needs", "?"), "use_when": g.get("use_when", "?"),
            "how": list(g.get("steps", [])), "statements": g.get("statements", ""),
            "seed": g.get("origin", ""), "breaks": g.get("breaks", ""), "code": g.get("code", ""),
            "how_short": g.get("how", ""), "expect": g.get("expect", ""),
            "safe_across_instances": g.get("safe_across_instances"),
            "capabilities": g.get("capabilities", {}), "metrics": g.get("metrics", [])}
