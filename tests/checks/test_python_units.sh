#!/usr/bin/env bash
# The comparison runner's Python unit tests (tests/python: the scenario
# parser, the verdicts and repeats, the decision matrix, the renderers),
# no stack needed. Exit 0 pass, 77 skip (no python3), 1 fail.
set -u
name=test_python_units
command -v python3 >/dev/null || { echo "$name: skip: python3 not installed"; exit 77; }
ROOT=${LAB_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
PYTHONDONTWRITEBYTECODE=1 PYTHONPATH="$ROOT/loadtest:$ROOT/tests/python" \
    python3 -m unittest discover -s "$ROOT/tests/python" -t "$ROOT/tests/python" -v 2>&1 \
    || { echo "$name: FAIL"; exit 1; }
echo "$name: pass"
