#!/usr/bin/env bash
# Ports and health paths in deploy/docker-compose.yml match the services:
# inventory-1 8001, inventory-2 8002, order 8000, the scalable `inventory`
# 8001; each container's PORT, published/exposed port and healthcheck URL
# (http://127.0.0.1:PORT/healthz) agree; order's INVENTORY_URLS, the bench
# runner's URLs, nginx's proxy target and REDLOCK_NODES name real compose
# services on their real ports; the services' code serves /healthz and its
# --port defaults are the contract's.
# Exit 0 pass, 77 skip (no docker-compose / python3-yaml), 1 fail.
set -u
name=test_compose_ports
# shellcheck source=tests/checks/compose_common.sh
. "$(dirname "$0")/compose_common.sh"
compose_config
for role in inventory order; do
    if [ -x "$build/bin/$role" ]; then
        timeout 10 env -i PATH=/usr/bin:/bin "$build/bin/$role" --help >"$tmp/$role.help" 2>/dev/null \
            || fail "$build/bin/$role --help failed"
    fi
done

"$py" - "$tmp" <<'PY'
import glob, os, re, sys, yaml
from urllib.parse import urlsplit

tmp = sys.argv[1]
name = "test_compose_ports"
cfg = yaml.safe_load(open(os.path.join(tmp, "config.yml")))
services = cfg.get("services") or {}
problems = []

# The contract: which service listens where (services/API.md, the seeds' ports).
EXPECT = {"inventory-1": ("inventory", 8001), "inventory-2": ("inventory", 8002),
          "order": ("order", 8000), "inventory": ("inventory", 8001)}
HEALTH = "/healthz"

sys.path.insert(0, "tests/checks")
from compose_model import env_of, role_of

def container_ports(svc):
    out = []
    for p in svc.get("ports") or []:
        if isinstance(p, dict):
            out.append(int(p["target"]))
        else:
            out.append(int(str(p).split("/")[0].rsplit(":", 1)[-1]))
    return out

def health_urls(svc):
    test = (svc.get("healthcheck") or {}).get("test") or []
    if isinstance(test, str):
        test = [test]
    return re.findall(r"https?://[^\s\"']+", " ".join(str(t) for t in test))

listen = {}   # service -> port its program listens on
for svc_name, svc in services.items():
    role = role_of(svc)
    if role not in ("inventory", "order"):
        continue
    env = env_of(svc)
    try:
        port = int(env.get("PORT"))
    except (TypeError, ValueError):
        problems.append(f"{svc_name}: PORT not set to a number")
        continue
    listen[svc_name] = port
    if svc_name in EXPECT and EXPECT[svc_name] != (role, port):
        problems.append(f"{svc_name}: runs {role} on {port}, expected {EXPECT[svc_name][0]} on {EXPECT[svc_name][1]}")
    for cp in container_ports(svc):
        if cp != port:
            problems.append(f"{svc_name}: publishes container port {cp}, listens on {port}")
    exposed = [int(str(e).split("/")[0]) for e in svc.get("expose") or []]
    for e in exposed:
        if e != port:
            problems.append(f"{svc_name}: exposes {e}, listens on {port}")
    urls = health_urls(svc)
    if not urls:
        problems.append(f"{svc_name}: no HTTP healthcheck")
    for u in urls:
        s = urlsplit(u)
        if s.hostname not in ("127.0.0.1", "localhost") or s.port != port or s.path != HEALTH:
            problems.append(f"{svc_name}: healthcheck {u}, expected http://127.0.0.1:{port}{HEALTH}")
for svc_name in EXPECT:
    if svc_name not in services:
        problems.append(f"service {svc_name} missing")

def check_urls(owner, var, value, want_role):
    if not value:
        problems.append(f"{owner}: {var} empty")
        return []
    hit = []
    for u in str(value).split(","):
        s = urlsplit(u.strip())
        target = services.get(s.hostname)
        if target is None or role_of(target) != want_role:
            problems.append(f"{owner}: {var} names {s.hostname}, not a compose {want_role} service")
        elif s.port != listen.get(s.hostname):
            problems.append(f"{owner}: {var} uses {s.hostname}:{s.port}, it listens on {listen.get(s.hostname)}")
        else:
            hit.append(s.hostname)
    return hit

order_env = env_of(services.get("order") or {})
hit = check_urls("order", "INVENTORY_URLS", order_env.get("INVENTORY_URLS"), "inventory")
if sorted(hit) != ["inventory-1", "inventory-2"]:
    problems.append(f"order: INVENTORY_URLS reaches {sorted(hit)}, expected inventory-1 and inventory-2")

for svc_name, svc in services.items():
    if role_of(svc) != "compare":
        continue
    env = env_of(svc)
    check_urls(svc_name, "LAB_INVENTORY_URLS", env.get("LAB_INVENTORY_URLS"), "inventory")
    check_urls(svc_name, "LAB_ORDER_URL", env.get("LAB_ORDER_URL"), "order")

# Backends: the compose names on their images' ports.
for svc_name, svc in services.items():
    if role_of(svc) != "inventory":
        continue
    env = env_of(svc)
    if env.get("MYSQL_HOST") == "mysql" and str(env.get("MYSQL_PORT")) != "3306":
        problems.append(f"{svc_name}: MYSQL_PORT {env.get('MYSQL_PORT')}, mysql listens on 3306")
    if env.get("REDIS_HOST") == "redis" and str(env.get("REDIS_PORT")) != "6379":
        problems.append(f"{svc_name}: REDIS_PORT {env.get('REDIS_PORT')}, redis listens on 6379")
    nodes = str(env.get("REDLOCK_NODES") or "").split(",")
    if len(nodes) < 3:
        problems.append(f"{svc_name}: REDLOCK_NODES has {len(nodes)} nodes, redlock needs 3")
    for n in nodes:
        host, _, port = n.partition(":")
        if host not in services or services[host].get("profiles") or port != "6379":
            problems.append(f"{svc_name}: REDLOCK_NODES entry {n} is not a base-profile redis on 6379")
    # Every guard's backend is a base service on its real port.
    for n in str(env.get("LAB_ZK_HOSTS") or "").split(","):
        host, _, port = n.partition(":")
        if host not in services or services[host].get("profiles") or port != "2181":
            problems.append(f"{svc_name}: LAB_ZK_HOSTS entry {n} is not a base service on 2181")
    ep = str(env.get("LAB_ETCD_ENDPOINTS") or "")
    m = re.fullmatch(r"http://([^:/]+):2379", ep)
    if not m or m.group(1) not in services or services[m.group(1)].get("profiles"):
        problems.append(f"{svc_name}: LAB_ETCD_ENDPOINTS {ep!r} is not http://<base service>:2379")
    for n in str(env.get("LAB_REDIS_SENTINELS") or "").split(","):
        host, _, port = n.partition(":")
        cmd = " ".join(map(str, (services.get(host) or {}).get("command") or []))
        if host not in services or services[host].get("profiles") or port != "26379" \
                or "port 26379" not in cmd or "--sentinel" not in cmd:
            problems.append(f"{svc_name}: LAB_REDIS_SENTINELS entry {n} is not a base Sentinel on 26379")
order = services.get("order") or {}
if env_of(order).get("MYSQL_HOST") == "mysql" and str(env_of(order).get("MYSQL_PORT")) != "3306":
    problems.append("order: MYSQL_PORT is not 3306")

# nginx (profile lb) proxies to the scalable service's name and port and is
# published and health-checked on the port it listens on.
conf_path = "deploy/docker/nginx.conf"
lb = services.get("lb")
if lb is None:
    problems.append("service lb missing")
elif not os.path.exists(conf_path):
    problems.append(f"{conf_path} missing")
else:
    conf = re.sub(r"#[^\n]*", "", open(conf_path).read())
    targets = re.findall(r"set\s+\$\w+\s+(https?://[^;\s]+)\s*;", conf)
    if not targets:
        problems.append("nginx.conf: no `set $var http://host:port` proxy target")
    for t in targets:
        s = urlsplit(t)
        if s.hostname != "inventory" or s.port != listen.get("inventory"):
            problems.append(f"nginx.conf: proxies to {s.hostname}:{s.port}, the scalable service is inventory:{listen.get('inventory')}")
    nginx_ports = {int(p) for p in re.findall(r"\blisten\s+(?:[\d.]+:)?(\d+)", conf)}
    for cp in container_ports(lb):
        if cp not in nginx_ports:
            problems.append(f"lb: publishes {cp}, nginx listens on {sorted(nginx_ports)}")
    for u in health_urls(lb):
        if urlsplit(u).port not in nginx_ports:
            problems.append(f"lb: healthcheck {u} is not on nginx's port {sorted(nginx_ports)}")

# The code: /healthz is served, and the binaries' own --port defaults are the
# contract's (so the seeds' ports, the embedded stack and compose agree).
srcs = [f for d in ("services", "lib") for f in glob.glob(f"{d}/**/*.c", recursive=True)]
if glob.glob("services/*/*.c"):
    if not any('"' + HEALTH + '"' in open(f, errors="replace").read() for f in srcs):
        problems.append(f"no C source under services/ or lib/ routes \"{HEALTH}\"")
for role, port in (("inventory", 8001), ("order", 8000)):
    path = os.path.join(tmp, role + ".help")
    if os.path.exists(path):
        m = re.search(r"^\s+--port\s+\S+\s+(\d+)", open(path).read(), re.M)
        if not m or int(m.group(1)) != port:
            problems.append(f"{role} --help: --port default {m and m.group(1)}, contract says {port}")

if problems:
    print(f"{name}: FAIL: " + "; ".join(problems))
    sys.exit(1)
sys.exit(0)
PY
