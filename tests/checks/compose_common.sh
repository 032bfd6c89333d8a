# shellcheck shell=bash
# The shared start of the test_compose_*.sh checks (sourced, not run: the
# runner only runs test_*.sh). The caller sets `name` first. Provides:
# fail(), compose_file, py (a python3 with yaml), build (absolute LAB_BUILD),
# tmp (removed on exit) and compose_config (the rendered base file, written
# to $tmp/config.yml with an empty environment). Skips (exit 77) when
# docker-compose or python3-yaml is missing.
: "${name:?set name before sourcing compose_common.sh}"
cd "$(dirname "$0")/../.." || exit 1
compose_file=deploy/docker-compose.yml

fail() { echo "$name: FAIL: $*"; exit 1; }

command -v docker-compose >/dev/null 2>&1 || { echo "$name: skip: docker-compose not installed"; exit 77; }
py=
for c in python3 /usr/bin/python3; do
    if "$c" -c 'import yaml' >/dev/null 2>&1; then py=$c; break; fi
done
[ -n "$py" ] || { echo "$name: skip: no python3 with yaml (Debian: python3-yaml)"; exit 77; }
[ -f "$compose_file" ] || fail "$compose_file missing"

build=${LAB_BUILD:-build}
case "$build" in /*) ;; *) build=$PWD/$build ;; esac

tmp=$(mktemp -d) || fail "mktemp"
trap 'rm -rf "$tmp"' EXIT

# An empty environment: only deploy/.env feeds the substitutions, as for a
# user with a clean shell (tests/run exports LAB_MYSQL_PORT and friends).
compose_config() {
    env -i PATH="$PATH" HOME="${HOME:-/tmp}" \
        docker-compose -f "$compose_file" config >"$tmp/config.yml" 2>"$tmp/err" \
        || fail "docker-compose config: $(tr '\n' ' ' <"$tmp/err" | cut -c1-300)"
}
