#!/usr/bin/env bash
# The image's entrypoint (POSIX sh: it runs under debian-slim's dash), the
# compose check scripts, deploy/docker/offline-images with the stand-ins'
# entrypoints, the compose test (tests/compose/run), deploy/swarm/nodes and
# the swarm test (tests/swarm/run) are shellcheck-clean.
# Exit 0 pass, 77 skip (no shellcheck), 1 fail.
set -u
cd "$(dirname "$0")/../.." || exit 1
name=test_compose_shellcheck

command -v shellcheck >/dev/null 2>&1 || { echo "$name: skip: shellcheck not installed"; exit 77; }
entrypoint=deploy/docker/entrypoint.sh
[ -f "$entrypoint" ] || { echo "$name: FAIL: $entrypoint missing"; exit 1; }
head -1 "$entrypoint" | grep -qx '#!/bin/sh' \
    || { echo "$name: FAIL: $entrypoint must start with #!/bin/sh"; exit 1; }
[ -x "$entrypoint" ] || { echo "$name: FAIL: $entrypoint is not executable"; exit 1; }

files=("$entrypoint")
for f in tests/checks/test_compose_*.sh deploy/docker/offline-images \
         deploy/docker/*/entrypoint.sh tests/compose/run \
         deploy/swarm/nodes tests/swarm/run; do
    [ -f "$f" ] && files+=("$f")
done
if ! out=$(shellcheck -x -f gcc "${files[@]}" 2>&1); then
    echo "$name: FAIL: $(printf '%s\n' "$out" | head -3 | tr '\n' ' ')"
    exit 1
fi
exit 0
