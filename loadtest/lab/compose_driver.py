"""The `compose` stack driver: the running default compose project of
deploy/docker-compose.yml (loadtest/compare --driver compose).

Ports and the project name come from the environment, else deploy/.env
(COMPOSE_PROJECT_NAME, OVERSELL_INVENTORY_1_PORT, OVERSELL_INVENTORY_2_PORT,
OVERSELL_ORDER_PORT, OVERSELL_MYSQL_PUBLISH_PORT, OVERSELL_MYSQL_ROOT_PASSWORD).
Fault verbs act on the project's containers: pause = docker pause,
resume = docker unpause, kill = docker kill (of redis and redis-replica a
freeze, see FREEZE_FOR_KILL), stop/start = docker stop/start, start waits
until the process serves again. Redis and the Sentinels are not published: they are asked
through `docker exec ... redis-cli`, so port(proc) names the process and
redis_cli takes that name. MySQL is published on 127.0.0.1 (the fault
cells read the ledger with the mariadb client); its root password goes to
that client as MYSQL_PWD. Nothing is started or stopped but what a fault
cell names; instances = the two fixed inventories (inventory-1, -2)."""

import os
import subprocess
import time
import urllib.request

from . import ROOT
from .drivers import CellSkip, Driver

# loadtest process names (deploy/local/stack's) -> compose services
SERVICES = {"order-1": "order"}

# `kill` of these is a freeze (docker pause) and the next `start` thaws it.
# A killed container's name leaves Docker's DNS; the Sentinels resolve
# hostnames (a restarted container keeps its name, not its address) and
# block on each failed lookup of the gone master, which sends them into
# TILT mode: no failover for 30 s, so the failover cell would measure a
# Sentinel stall, not the lock. A frozen master stops answering as a dead
# one does; thawed, the Sentinels demote it and it resyncs from the new
# master, dropping what it alone had, as a restarted empty one would.
FREEZE_FOR_KILL = ("redis", "redis-replica")


def dotenv(path):
    """KEY=VALUE lines of a compose .env file (no interpolation)."""
    env = {}
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                line = line.strip()
                if line and not line.startswith("#") and "=" in line:
                    k, v = line.split("=", 1)
                    env[k.strip()] = v.strip()
    except OSError:
        pass
    return env


class ComposeStack(Driver):
    """deploy/docker-compose.yml's running project (never brought up or
    down here: `docker compose up -d` first, `--profile replica` for the
    failover cells)."""

    name = "compose"
    supports_faults = True

    def __init__(self, log):
        super().__init__(log)
        conf = dotenv(os.path.join(ROOT, "deploy", ".env"))

        def knob(k, default):
            return os.environ.get(k) or conf.get(k) or default

        self.docker = os.environ.get("DOCKER", "docker")
        self.project = knob("COMPOSE_PROJECT_NAME", "oversell-lab")
        inv1 = int(knob("OVERSELL_INVENTORY_1_PORT", "8001"))
        inv2 = int(knob("OVERSELL_INVENTORY_2_PORT", "8002"))
        self.all = [f"http://127.0.0.1:{inv1}", f"http://127.0.0.1:{inv2}"]
        self.inventory = list(self.all)
        self.order = f"http://127.0.0.1:{int(knob('OVERSELL_ORDER_PORT', '8000'))}"
        self.mysql_port = int(knob("OVERSELL_MYSQL_PUBLISH_PORT", "13306"))
        # the mariadb client the fault cells run logs in as root
        os.environ.setdefault("MYSQL_PWD", knob("OVERSELL_MYSQL_ROOT_PASSWORD", "lab"))
        self.dir = f"compose project {self.project}"
        self.frozen = set()   # processes a `kill` froze (FREEZE_FOR_KILL)

    # ---- containers ------------------------------------------------------

    def dk(self, *args, check=True, timeout=120):
        cmd = [self.docker, *args]
        try:
            p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               timeout=timeout)
        except (OSError, subprocess.SubprocessError) as e:
            raise RuntimeError(f"{' '.join(cmd[:3])}: {e}") from e
        self.log.write(f"$ {' '.join(cmd)}\n{p.stdout}")
        self.log.flush()
        if check and p.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd[:3])} failed: {p.stdout.strip()[:300]}")
        return p

    def container(self, proc):
        """The container id of a process name (stopped ones too)."""
        svc = SERVICES.get(proc, proc)
        out = self.dk("ps", "-aq", "--filter", f"label=com.docker.compose.project={self.project}",
                      "--filter", f"label=com.docker.compose.service={svc}").stdout.split()
        if not out:
            raise CellSkip(f"no container of service '{svc}' in compose project {self.project}")
        return out[0]

    def running(self, proc):
        try:
            c = self.container(proc)
        except CellSkip:
            return False
        return self.dk("inspect", "-f", "{{.State.Running}}", c, check=False).stdout.strip() == "true"

    def verb(self, verb, proc, check=True):
        if verb == "kill" and proc in FREEZE_FOR_KILL:
            # See FREEZE_FOR_KILL: frozen, and start() thaws it.
            self.log.write(f"compose: kill {proc} is a freeze (docker pause): a killed "
                           "container's name leaves Docker's DNS and the Sentinels stall\n")
            self.frozen.add(proc)
            return self.dk("pause", self.container(proc), check=check)
        cmd = {"pause": "pause", "resume": "unpause", "kill": "kill", "stop": "stop",
               "start": "start"}[verb]
        return self.dk(cmd, self.container(proc), check=check)

    def start(self, proc, check=True, env=None):
        """docker start, then wait (<= 60 s) until it serves again, as
        deploy/local/stack start does: an inventory's or order's /healthz
        answers, another container's healthcheck says healthy."""
        if env:
            # the caller stopped it for this start: start it as it was, then skip
            self.start(proc, check=False)
            raise CellSkip("compose cannot start a container with extra environment "
                           f"({', '.join(env)})")
        if proc in self.frozen:
            self.frozen.discard(proc)
            p = self.verb("resume", proc, check)
        else:
            p = self.verb("start", proc, check)
        if p.returncode != 0:
            return p
        url = {"inventory-1": self.all[0], "inventory-2": self.all[1], "order-1": self.order,
               "order": self.order}.get(proc)
        c = self.container(proc)
        deadline = time.time() + 60
        while time.time() < deadline:
            if url:
                try:
                    with urllib.request.urlopen(url + "/healthz", timeout=2) as r:
                        if r.status == 200:
                            return p
                except OSError:
                    pass
            else:
                h = self.dk("inspect", "-f", "{{if .State.Health}}{{.State.Health.Status}}"
                            "{{else}}running{{end}}", c, check=False).stdout.strip()
                if h in ("healthy", "running"):
                    return p
            time.sleep(0.3)
        if check:
            raise RuntimeError(f"{proc} did not serve within 60 s of docker start")
        return p

    # ---- load cells ------------------------------------------------------

    def up(self, n):
        if n > len(self.all):
            raise CellSkip(f"compose runs {len(self.all)} fixed inventory instances")
        self.instances = n
        self.inventory = self.all[:n]

    def ensure_order(self):
        if self.instances != len(self.all):
            raise CellSkip(f"the order service fronts all {len(self.all)} instances")

    # ---- fault cells -----------------------------------------------------

    def fault_ready(self, need_replica):
        # a container a previous cell left stopped (or killed) is started
        # again; a project that is not up at all is the user's to start
        for p in ("mysql", "redis", "inventory-1", "inventory-2"):
            if not self.running(p):
                self.container(p)   # CellSkip: no such service in the project
                self.start(p)
        self.up(2)
        return bool(need_replica) and self.running("redis-replica") and self.running("sentinel-1")

    def port(self, proc):
        # Redis-protocol processes are reached by name (redis_cli below).
        if proc == "redis" or proc == "redis-replica" or proc.startswith("sentinel-") \
                or proc.startswith("redis-m"):
            return proc
        raise KeyError(proc)

    def redis_cli(self, port, *args, timeout=5):
        proc = str(port)
        p = 26379 if proc.startswith("sentinel-") else 6379
        try:
            c = self.container(proc)
            r = subprocess.run([self.docker, "exec", c, "redis-cli", "-p", str(p), *args],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               timeout=timeout)
            return r.stdout.strip()
        except (OSError, subprocess.SubprocessError, CellSkip):
            return ""

    def sentinel_master_port(self):
        """The master the Sentinels name, as a process name (compose
        Sentinels announce hostnames: 'redis' or 'redis-replica')."""
        for i in (1, 2, 3):
            out = self.redis_cli(f"sentinel-{i}", "SENTINEL", "get-master-addr-by-name", "lab",
                                 timeout=3).split()
            if len(out) == 2:
                return out[0]
        return None

    def current_master(self, replica_ready):
        if not replica_ready:
            return "redis"
        m = self.sentinel_master_port()
        return m if m in ("redis", "redis-replica") else "redis"

    def reset_redis_topology(self):
        """redis = master, redis-replica replicating it, Sentinels restarted
        (each writes a fresh config at start)."""
        for n in ("sentinel-1", "sentinel-2", "sentinel-3", "redis-replica"):
            self.verb("stop", n, check=False)
        if not self.running("redis"):
            self.verb("start", "redis")
        self.redis_cli("redis", "REPLICAOF", "NO", "ONE")
        for n in ("redis-replica", "sentinel-1", "sentinel-2", "sentinel-3"):
            self.verb("start", n)
        self.redis_cli("redis-replica", "REPLICAOF", "redis", "6379")
        # Fresh Sentinels learn the replica from the master's INFO (every
        # 10 s) and each other from hello messages (every 2 s): until all
        # three know both, a failover cannot happen and the cell would
        # measure that. Out of TILT too.
        deadline = time.time() + 45
        while time.time() < deadline:
            info = self.redis_cli("redis-replica", "INFO", "replication")
            ready = "master_link_status:up" in info and self.sentinel_master_port() == "redis"
            for i in (1, 2, 3):
                si = self.redis_cli(f"sentinel-{i}", "INFO", "sentinel", timeout=3)
                if "sentinel_tilt:0" not in si or "slaves=1," not in si or "sentinels=3" not in si:
                    ready = False
            if ready:
                return
            time.sleep(0.5)
        raise RuntimeError("replica or Sentinels not ready within 45 s after a reset")
