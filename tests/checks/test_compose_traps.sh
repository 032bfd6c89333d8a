#!/usr/bin/env bash
# The known traps of deploy/docker-compose.yml stay avoided: MySQL's health
# check cannot pass on the image's temporary init server (TCP to 127.0.0.1,
# never the socket), sql/ is mounted as the init folder, every depends_on
# waits for a health check, nothing meant to be scaled has a container_name
# or a fixed host port, nginx re-resolves scaled replicas (Docker's resolver
# 127.0.0.11 + a variable in proxy_pass) and rate-limits nothing, profiles
# hold what they promise, and the bench report lands in ./reports.
# Exit 0 pass, 77 skip (no docker-compose / python3-yaml), 1 fail.
set -u
name=test_compose_traps
nginx_conf=deploy/docker/nginx.conf
# shellcheck source=tests/checks/compose_common.sh
. "$(dirname "$0")/compose_common.sh"
compose_config

# nginx's own parser, when nginx is installed (the resolver is not queried
# by -t, so this needs no network).
if command -v nginx >/dev/null 2>&1; then
    mkdir -p "$tmp/nginx/logs"
    # a private pid path: -t opens it, and /tmp/nginx.pid may be someone's
    sed "s|^\( *pid \).*;|\1$tmp/nginx/nginx.pid;|" "$nginx_conf" >"$tmp/nginx/nginx.conf"
    nginx -t -q -p "$tmp/nginx" -c "$tmp/nginx/nginx.conf" >"$tmp/nginx.out" 2>&1 \
        || fail "nginx -t: $(grep -v 'could not open error log' "$tmp/nginx.out" | tr '\n' ' ' | cut -c1-300)"
fi

# MySQL 8.0 instead (the documented option): the override renders, runs
# mysql:8.0 with the password plugin the lab's client speaks, and changes
# nothing else of the mysql service.
env -i PATH="$PATH" HOME="${HOME:-/tmp}" docker-compose -f "$compose_file" \
    -f deploy/docker-compose.mysql8.yml config >"$tmp/mysql8.yml" 2>"$tmp/err" \
    || fail "docker-compose config with docker-compose.mysql8.yml: $(tr '\n' ' ' <"$tmp/err" | cut -c1-300)"
"$py" - "$tmp/config.yml" "$tmp/mysql8.yml" <<'PY' || exit 1
import sys, yaml
base, my8 = (yaml.safe_load(open(p))["services"]["mysql"] for p in sys.argv[1:3])
problems = []
if my8.get("image") != "mysql:8.0":
    problems.append(f"image {my8.get('image')}, expected mysql:8.0")
if "--default-authentication-plugin=mysql_native_password" not in (my8.get("command") or []):
    problems.append("no --default-authentication-plugin=mysql_native_password (libmariadb cannot "
                    "log in with caching_sha2_password without TLS)")
for k in set(base) | set(my8):
    if k not in ("image", "command") and base.get(k) != my8.get(k):
        problems.append(f"changes the mysql service's {k}")
if problems:
    print("test_compose_traps: FAIL: docker-compose.mysql8.yml: " + "; ".join(problems))
    sys.exit(1)
PY

"$py" - "$tmp/config.yml" "$compose_file" "$nginx_conf" "$PWD" <<'PY'
import os, re, sys, yaml

cfg_path, compose_file, nginx_conf, root = sys.argv[1:5]
name = "test_compose_traps"
cfg = yaml.safe_load(open(cfg_path))
raw = yaml.safe_load(open(compose_file))
services = cfg.get("services") or {}
problems = []

def health_text(svc):
    test = (svc.get("healthcheck") or {}).get("test") or []
    return test if isinstance(test, str) else " ".join(map(str, test))

def volumes(svc):
    out = []
    for v in svc.get("volumes") or []:
        if isinstance(v, dict):
            out.append((v.get("source"), v.get("target")))
        else:
            parts = str(v).split(":")
            out.append((parts[0], parts[1] if len(parts) > 1 else None))
    return out

if "version" in raw:
    problems.append("compose file has a `version:` key (Compose Specification files omit it)")

# Base services and images.
for svc_name, image in (("mysql", "mariadb:10.11"), ("redis", "redis:7")):
    svc = services.get(svc_name)
    if not svc:
        problems.append(f"service {svc_name} missing")
        continue
    if svc.get("image") != image:
        problems.append(f"{svc_name}: image {svc.get('image')}, expected {image}")
    if svc.get("profiles"):
        problems.append(f"{svc_name}: must not sit behind a profile")
    if not health_text(svc):
        problems.append(f"{svc_name}: no healthcheck")

mysql = services.get("mysql") or {}
h = health_text(mysql)
if not re.search(r"(-h\s*|--host[= ])127\.0\.0\.1\b", h):
    problems.append("mysql: healthcheck must connect over TCP with -h 127.0.0.1 "
                    "(the init server listens on the socket only)")
if re.search(r"(-h\s*|--host[= ])localhost\b", h) or "--socket" in h or "-S " in h:
    problems.append("mysql: healthcheck uses the socket (localhost/--socket), which the init server answers")
# MariaDB refuses to start on an option it does not know: MySQL's own
# (the authentication plugin) belong in the MySQL 8 override only.
if any("authentication-plugin" in str(a) for a in (mysql.get("command") or [])):
    problems.append("mysql: MySQL-only --default-authentication-plugin on the MariaDB default "
                    "(mariadbd refuses to start); it belongs in docker-compose.mysql8.yml")
sql_dir = os.path.join(root, "sql")
if (sql_dir, "/docker-entrypoint-initdb.d") not in [(s, t) for s, t in volumes(mysql)]:
    problems.append(f"mysql: {sql_dir} is not mounted at /docker-entrypoint-initdb.d")

# depends_on: always wait for health, on a service that has a health check.
for svc_name, svc in services.items():
    deps = svc.get("depends_on") or {}
    if isinstance(deps, list):
        problems.append(f"{svc_name}: depends_on without condition: service_healthy")
        continue
    for dep, spec in deps.items():
        if (spec or {}).get("condition") != "service_healthy":
            problems.append(f"{svc_name}: depends_on {dep} without condition: service_healthy")
        if dep not in services or not health_text(services[dep]):
            problems.append(f"{svc_name}: depends_on {dep}, which has no healthcheck")
        elif set(services[dep].get("profiles") or []) - set(svc.get("profiles") or []):
            problems.append(f"{svc_name}: depends_on {dep} from a profile {svc_name} is not in")

want_deps = {"inventory-1": {"mysql", "redis"}, "inventory-2": {"mysql", "redis"},
             "inventory": {"mysql", "redis"}, "order": {"mysql", "inventory-1", "inventory-2"},
             "lb": {"inventory"}, "loadtest": {"order"}}
for svc_name, want in want_deps.items():
    have = set((services.get(svc_name) or {}).get("depends_on") or {})
    if not want <= have:
        problems.append(f"{svc_name}: depends_on lacks {sorted(want - have)}")

# Scaling: no fixed names anywhere, no host port on the scaled service.
for svc_name, svc in services.items():
    if "container_name" in svc:
        problems.append(f"{svc_name}: container_name blocks --scale and parallel projects")
inv = services.get("inventory") or {}
if inv.get("ports"):
    problems.append("inventory (scalable): publishes host ports; only nginx (lb) may")

# Profiles hold what they promise.
want_profiles = {"redis-replica": "replica",
                 "inventory": "lb", "lb": "lb", "loadtest": "bench"}
for svc_name, profile in want_profiles.items():
    svc = services.get(svc_name)
    if svc is None:
        problems.append(f"service {svc_name} (profile {profile}) missing")
    elif profile not in (svc.get("profiles") or []):
        problems.append(f"{svc_name}: not in profile {profile}")
# A plain `up` runs what every guard needs.
for svc_name in ("mysql", "redis", "redis-m1", "redis-m2", "redis-m3", "sentinel-1",
                 "sentinel-2", "sentinel-3", "zookeeper", "etcd", "inventory-1",
                 "inventory-2", "order"):
    if svc_name not in services:
        problems.append(f"base service {svc_name} missing")
    if (services.get(svc_name) or {}).get("profiles"):
        problems.append(f"{svc_name}: a base service must not need a profile")
for svc_name in ("redis-m1", "redis-m2", "redis-m3"):
    svc = services.get(svc_name) or {}
    if not str(svc.get("image", "")).startswith("redis:") or not health_text(svc):
        problems.append(f"{svc_name}: expected a redis image with a healthcheck")

# The lab's own image, built from this repository.
for svc_name, svc in services.items():
    cmd = svc.get("command") or []
    if cmd and cmd[0] in ("inventory", "order", "compare", "loadgen"):
        b = svc.get("build") or {}
        if os.path.normpath(str(b.get("context"))) != root or b.get("dockerfile") != "deploy/docker/Dockerfile":
            problems.append(f"{svc_name}: not built from deploy/docker/Dockerfile with the repository as context")

# Bench: the report reaches ./reports on the host.
lt = services.get("loadtest") or {}
rep = (lt.get("environment") or {}).get("LAB_REPORTS_DIR")
if not rep:
    problems.append("loadtest: LAB_REPORTS_DIR not set")
elif (os.path.join(root, "reports"), rep) not in volumes(lt):
    problems.append(f"loadtest: {os.path.join(root, 'reports')} not mounted at LAB_REPORTS_DIR {rep}")

# nginx: re-resolve scaled replicas, no rate limit.
lb = services.get("lb") or {}
if not any(t == "/etc/nginx/nginx.conf" and s == os.path.join(root, nginx_conf) for s, t in volumes(lb)):
    problems.append(f"lb: {nginx_conf} not mounted at /etc/nginx/nginx.conf")
if not os.path.exists(nginx_conf):
    problems.append(f"{nginx_conf} missing")
else:
    conf = re.sub(r"#[^\n]*", "", open(nginx_conf).read())
    if not re.search(r"\bresolver\s+127\.0\.0\.11\b", conf):
        problems.append("nginx.conf: no `resolver 127.0.0.11` (Docker's DNS)")
    passes = re.findall(r"\bproxy_pass\s+([^;]+);", conf)
    if not passes:
        problems.append("nginx.conf: no proxy_pass")
    for p in passes:
        if "$" not in p:
            problems.append(f"nginx.conf: proxy_pass {p.strip()} has no variable: resolved once, scaled replicas never see traffic")
    for m in re.finditer(r"\bupstream\s+\S+\s*\{([^}]*)\}", conf):
        for server in re.findall(r"\bserver\s+([^;]+);", m.group(1)):
            if not re.search(r"\bresolve\b", server):
                problems.append(f"nginx.conf: upstream server {server.strip()} without `resolve`")
    for directive in ("limit_req", "limit_conn", "limit_rate"):
        if re.search(r"\b" + directive + r"\w*\s", conf):
            problems.append(f"nginx.conf: {directive} would throttle the load generator")

if problems:
    print(f"{name}: FAIL: " + "; ".join(problems))
    sys.exit(1)
sys.exit(0)
PY
