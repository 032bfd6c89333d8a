#!/usr/bin/env bash
# deploy/docker-compose.yml is valid for docker-compose 1.29 on its own, with
# each profile and with all of them; GUARD comes from deploy/.env only and a
# GUARD set in the shell wins.
# Exit 0 pass, 77 skip (no docker-compose / python3-yaml), 1 fail.
# No engine, no network: `config` only reads files.
set -u
name=test_compose_config
# shellcheck source=tests/checks/compose_common.sh
. "$(dirname "$0")/compose_common.sh"

# An empty environment: only deploy/.env feeds the substitutions, as for a
# user with a clean shell; DC_GUARD=name sets GUARD as a user's shell would.
dc() {
    local set_guard=()
    [ -n "${DC_GUARD:-}" ] && set_guard=("GUARD=$DC_GUARD")
    env -i PATH="$PATH" HOME="${HOME:-/tmp}" "${set_guard[@]}" \
        docker-compose -f "$compose_file" "$@"
}
oneline() { tr '\n' ' ' | cut -c1-300; }

cfg=$(dc config 2>&1) \
    || fail "base file: $(oneline <<<"$cfg")"

# Profiles the file declares; the three the deployment promises must be there
# (redlock's masters moved to the base: no profile of that name any more).
declared=$("$py" -c '
import sys, yaml
doc = yaml.safe_load(sys.stdin)
print("\n".join(sorted({p for s in doc["services"].values() for p in s.get("profiles", [])})))
' <<<"$cfg") || fail "cannot parse docker-compose config output"
for want in replica lb bench; do
    grep -qx "$want" <<<"$declared" || fail "profile $want is not declared by any service"
done
all_args=()
for p in $declared; do
    out=$(dc --profile "$p" config -q 2>&1) \
        || fail "profile $p: $(oneline <<<"$out")"
    all_args+=(--profile "$p")
done
out=$(dc "${all_args[@]}" config -q 2>&1) \
    || fail "all profiles together: $(oneline <<<"$out")"

# GUARD: deploy/.env is the one place (no second default in the compose
# file) and the shell overrides it.
grep -Eq '^GUARD=[a-z-]+$' deploy/.env || fail "deploy/.env does not set GUARD=<name>"
no_env=$(mktemp) || fail "mktemp"
trap 'rm -f "$no_env"' EXIT
if out=$(dc --env-file "$no_env" config -q 2>&1); then
    fail "the compose file resolves without deploy/.env: GUARD has a second default"
fi
grep -q GUARD <<<"$out" || fail "without deploy/.env: expected an error naming GUARD, got: $(oneline <<<"$out")"
resolved=$(DC_GUARD=for-update dc config 2>&1) \
    || fail "GUARD=for-update: $(oneline <<<"$resolved")"
got=$("$py" -c '
import sys, yaml
doc = yaml.safe_load(sys.stdin)
print(" ".join(sorted(n for n, s in doc["services"].items()
                      if (s.get("environment") or {}).get("GUARD") == "for-update")))
' <<<"$resolved")
[ "$got" = "inventory inventory-1 inventory-2" ] \
    || fail "GUARD=for-update reached [$got], expected inventory inventory-1 inventory-2"
exit 0
