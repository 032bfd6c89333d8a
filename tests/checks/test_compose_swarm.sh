#!/usr/bin/env bash
# deploy/swarm/stack.yml without an engine: it parses as a stack file
# (`docker stack config` when the client has it, else yaml), and keeps what
# the swarm needs on a kernel without IPVS and what swarm ignores out:
# every service on dnsrr by default, published ports in host mode by
# default, no build/profiles/depends_on/container_name, configs whose files
# exist, nginx's config the compose lb's, the inventory's healthcheck on
# its PORT. The swarm under load is make compose-test's step 7.
# Exit 0 pass, 77 skip (no python3 with yaml), 1 fail.
set -u
name=test_compose_swarm
cd "$(dirname "$0")/../.." || exit 1
fail() { echo "$name: FAIL: $*"; exit 1; }
stack=deploy/swarm/stack.yml
[ -f "$stack" ] || fail "$stack missing"
py=
for c in python3 /usr/bin/python3; do
    if "$c" -c 'import yaml' >/dev/null 2>&1; then py=$c; break; fi
done
[ -n "$py" ] || { echo "$name: skip: no python3 with yaml (Debian: python3-yaml)"; exit 77; }
tmp=$(mktemp -d) || fail "mktemp"
trap 'rm -rf "$tmp"' EXIT

# The client's own reading, with an empty environment (defaults only).
if docker stack config --help >/dev/null 2>&1; then
    env -i PATH="$PATH" HOME="${HOME:-/tmp}" docker stack config -c "$stack" >"$tmp/rendered.yml" 2>"$tmp/err" \
        || fail "docker stack config: $(tr '\n' ' ' <"$tmp/err" | cut -c1-300)"
else
    cp "$stack" "$tmp/rendered.yml"
fi

"$py" - "$stack" "$tmp/rendered.yml" <<'PY' || exit 1
import os, re, sys, yaml
name = "test_compose_swarm"
raw = yaml.safe_load(open(sys.argv[1]))
doc = yaml.safe_load(open(sys.argv[2]))
problems = []
services = doc.get("services") or {}
for want in ("mysql", "redis", "inventory", "order", "lb"):
    if want not in services:
        problems.append(f"service {want} missing")
for n, s in (raw.get("services") or {}).items():
    for key in ("build", "profiles", "depends_on", "container_name"):
        if key in s:
            problems.append(f"{n}: `{key}` (swarm ignores it)")
for n, s in services.items():
    mode = (s.get("deploy") or {}).get("endpoint_mode")
    if mode != "dnsrr":
        problems.append(f"{n}: endpoint_mode {mode!r} by default, dnsrr works without IPVS")
    for p in s.get("ports") or []:
        if not isinstance(p, dict) or p.get("mode") != "host":
            problems.append(f"{n}: port {p} not in host mode by default (the mesh needs IPVS)")
    if not s.get("healthcheck"):
        problems.append(f"{n}: no healthcheck")
    if ((s.get("deploy") or {}).get("restart_policy") or {}).get("condition") != "any":
        problems.append(f"{n}: restart_policy condition is not `any` (no depends_on: it must retry)")
base = os.path.dirname(sys.argv[1])
for c, spec in (raw.get("configs") or {}).items():
    f = os.path.normpath(os.path.join(base, spec.get("file", "")))
    if not os.path.isfile(f):
        problems.append(f"config {c}: {f} missing")
sql = sorted(f for f in os.listdir("sql") if f.endswith(".sql"))
targets = [c.get("target", "") for c in (services.get("mysql") or {}).get("configs") or []]
for f in sql:
    if f"/docker-entrypoint-initdb.d/{f}" not in targets:
        problems.append(f"mysql: sql/{f} is not in its init folder")
lbconf = [(raw.get("configs") or {}).get(c.get("source"), {}).get("file")
          for c in (raw["services"].get("lb") or {}).get("configs") or []]
if "../docker/nginx.conf" not in lbconf:
    problems.append("lb: not deploy/docker/nginx.conf (the compose lb's)")
inv = services.get("inventory") or {}
port = str((inv.get("environment") or {}).get("PORT"))
if f"127.0.0.1:{port}/healthz" not in " ".join(map(str, (inv.get("healthcheck") or {}).get("test") or [])):
    problems.append(f"inventory: healthcheck not on its PORT {port}")
if re.search(r"proxy_pass\s+\$", open("deploy/docker/nginx.conf").read()) is None:
    problems.append("nginx.conf: proxy_pass without a variable (a scaled service's new replicas would get no traffic)")
if problems:
    print(f"{name}: FAIL: " + "; ".join(problems))
    sys.exit(1)
PY
echo "$name: pass"
