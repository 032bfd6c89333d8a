#!/usr/bin/env bash
# tests/TRACK_RECORD.md names, for every defect found and fixed, the test
# that reproduces it: each named file must exist and hold each named test
# (a C or Python test function, or the check script's own name), and each
# fix commit must be in the history (when this is a git checkout). A test
# renamed or deleted without its row fails here.
# Exit 0 pass, 77 skip (no python3), 1 fail.
set -u
name=test_track_record
command -v python3 >/dev/null || { echo "$name: skip: python3 not installed"; exit 77; }
ROOT=${LAB_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
python3 - "$ROOT" <<'PY'
import os, re, subprocess, sys

root = sys.argv[1]
path = os.path.join(root, "tests", "TRACK_RECORD.md")
problems, rows, tests = [], 0, 0
git = os.path.isdir(os.path.join(root, ".git")) or os.path.isfile(os.path.join(root, ".git"))
for n, line in enumerate(open(path, encoding="utf-8"), 1):
    cols = [c.strip() for c in line.strip().strip("|").split(" | ")]
    if not line.startswith("| ") or len(cols) != 4 or cols[0] in ("symptom", "---"):
        continue
    rows += 1
    current = None
    for tok in re.findall(r"`([^`]+)`", cols[2]):
        if re.search(r"\.(c|py|sh)$", tok):
            current = tok
            if not os.path.isfile(os.path.join(root, tok)):
                problems.append(f"line {n}: {tok} does not exist")
                current = None
            continue
        if current is None:
            problems.append(f"line {n}: test {tok} names no file before it")
            continue
        tests += 1
        text = open(os.path.join(root, current), encoding="utf-8", errors="replace").read()
        if not re.search(r"\b" + re.escape(tok) + r"\b", text):
            problems.append(f"line {n}: {tok} not found in {current}")
    if git:
        for h in re.findall(r"\b[0-9a-f]{7,40}\b", cols[3]):
            r = subprocess.run(["git", "-C", root, "cat-file", "-e", h + "^{commit}"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            if r.returncode != 0:
                problems.append(f"line {n}: fix commit {h} not in this history")
if rows == 0:
    problems.append("no defect rows found")
for p in problems:
    print(f"test_track_record: {p}")
print(f"{rows} defects, {tests} tests named")
sys.exit(1 if problems else 0)
PY
rc=$?
[ "$rc" = 0 ] || { echo "$name: FAIL"; exit 1; }
echo "$name: pass"
