"""Stack drivers: what the runner needs from wherever the services run.

Every driver offers the same attributes and methods (the `Driver` class
below documents them); the runner and the fault cells use nothing else:

  inventory, order, mysql_port, redis_port, dir, started_here, instances
  up(n) ensure_order() down()                         load cells
  fault_ready(need_replica) port(proc) current_master() sql(query)
  pause|resume|kill|stop|start(proc) reset_redis_topology()   fault cells

Process names are deploy/local/stack's: inventory-N, order-1, mysql, redis,
redis-replica, sentinel-N, redis-mN. Drivers: `local` (LocalStack, the
embedded stack through deploy/local/stack), `external` (ExternalStack:
services somebody else runs; no fault verbs) and `compose` (ComposeStack in
compose_driver.py: docker pause/unpause/kill/stop/start on the running
compose project's containers). lab.cli picks one by --driver."""

import os
import shutil
import subprocess
import time

from . import ROOT


class CellSkip(Exception):
    """The cell cannot run on this stack; str() is the reason."""


class Driver:
    """The interface. Methods raise RuntimeError when the stack refuses,
    CellSkip when this driver cannot do what a cell needs."""

    name = "none"
    supports_faults = False

    def __init__(self, log):
        self.log = log
        self.dir = ""
        self.started_here = False   # down() at the end unless --keep
        self.instances = None       # inventory instances up now
        self.inventory = []         # base URLs of those instances
        self.order = ""             # base URL of the order service
        self.mysql_port = None      # 127.0.0.1 ports for audits (None: unknown)
        self.redis_port = None

    def up(self, n):
        """Make n inventory instances (and the order service) answer."""
        raise NotImplementedError

    def ensure_order(self):
        """The order service fronts exactly the instances up now."""
        raise NotImplementedError

    def down(self):
        """Stop what this driver started (never fails)."""

    # ---- fault cells ----------------------------------------------------

    def fault_ready(self, need_replica):
        """Two inventory instances for fault cells; with a Redis replica and
        three Sentinels when need_replica and the machine can. Returns
        whether the replica topology is there."""
        raise CellSkip(f"fault scenarios need a driver with fault verbs (not '{self.name}')")

    def port(self, proc):
        """127.0.0.1 port of a Redis-protocol process (redis, redis-replica,
        sentinel-N)."""
        raise KeyError(proc)

    def verb(self, verb, proc, check=True):
        """pause|resume|kill|stop|start one process."""
        raise CellSkip(f"driver '{self.name}' cannot {verb} {proc}")

    def pause(self, proc, check=True):
        return self.verb("pause", proc, check)

    def resume(self, proc, check=True):
        return self.verb("resume", proc, check)

    def kill(self, proc, check=True):
        return self.verb("kill", proc, check)

    def stop(self, proc, check=True):
        return self.verb("stop", proc, check)

    def start(self, proc, check=True, env=None):
        return self.verb("start", proc, check)

    def reset_redis_topology(self):
        """redis = master, redis-replica replicating it, fresh Sentinels."""
        raise CellSkip(f"driver '{self.name}' cannot reset Redis")

    # ---- shared helpers --------------------------------------------------

    def sql(self, query, timeout=30):
        """(returncode, stdout, stderr) of one read-only query as root on the
        stack's MariaDB (tab-separated, no headers). A driver whose MySQL has
        no published port overrides it (e.g. docker exec)."""
        try:
            p = subprocess.run(["mariadb", "--no-defaults", "-h127.0.0.1", f"-P{self.mysql_port}",
                                "-uroot", "-N", "-B", "-e", query], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, timeout=timeout)
        except (OSError, subprocess.SubprocessError) as e:
            return 1, "", str(e)
        return p.returncode, p.stdout, p.stderr

    def redis_cli(self, port, *args, timeout=5):
        try:
            p = subprocess.run(["redis-cli", "-h", "127.0.0.1", "-p", str(port), *args],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               timeout=timeout)
            return p.stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return ""

    def sentinel_master_port(self):
        for i in (1, 2, 3):
            out = self.redis_cli(self.port(f"sentinel-{i}"), "SENTINEL", "get-master-addr-by-name",
                                 "lab", timeout=2).split()
            if len(out) == 2 and out[1].isdigit():
                return int(out[1])
        return None

    def current_master(self, replica_ready):
        """Name of the Redis process that is the master now ('redis' unless a
        failover moved it)."""
        if not replica_ready:
            return "redis"
        p = self.sentinel_master_port()
        return "redis-replica" if p == self.port("redis-replica") else "redis"


class LocalStack(Driver):
    """deploy/local/stack in one folder; remembers whether we started it."""

    name = "local"
    supports_faults = True

    def __init__(self, folder, log):
        super().__init__(log)
        self.dir = os.path.abspath(folder)
        self.script = os.path.join(ROOT, "deploy", "local", "stack")
        self.order_for = None
        self.env = {}
        self.mysql_mode = "single"   # or galera3 (the cluster scenario)
        self.extra_env = {}          # e.g. LAB_PORT_BASE of a second stack

    def run(self, *args, check=True, env=None):
        cmd = [self.script, *args, "--dir", self.dir]
        if self.extra_env:
            env = dict(env or os.environ)
            env.update(self.extra_env)
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, timeout=600, env=env)
        self.log.write(f"$ {' '.join(cmd)}\n{p.stdout}")
        self.log.flush()
        if check and p.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd[:2])} failed:\n{p.stdout.strip()}")
        return p

    def verb(self, verb, proc, check=True):
        return self.run(verb, proc, check=check)

    def start(self, proc, check=True, env=None):
        e = None
        if env:
            e = dict(os.environ)
            e.update(env)
        return self.run("start", proc, check=check, env=e)

    def running_before(self):
        pids = os.path.join(self.dir, "pids")
        return os.path.isdir(pids) and any(n.endswith(".pid") for n in os.listdir(pids))

    def up(self, n):
        if self.instances == n:
            return
        if self.instances is None and not self.running_before():
            self.started_here = True
        self.run("up", "--inventory", str(n), "--orders", "1", "--mysql", self.mysql_mode)
        self.instances = n
        self.read_env()

    def ensure_order(self):
        # The order service learns its inventory URLs at start: restart it
        # when the instance count changed since.
        if self.order_for == self.instances:
            return
        self.run("stop", "order-1")
        self.run("up", "--inventory", str(self.instances), "--orders", "1")
        self.order_for = self.instances

    def read_env(self):
        env = {}
        with open(os.path.join(self.dir, "stack.env"), encoding="utf-8") as f:
            for tok in f.read().split():
                if "=" in tok:
                    k, v = tok.split("=", 1)
                    env[k] = v
        self.env = env
        inv = int(env["INV_PORT"])
        self.inventory = [f"http://127.0.0.1:{inv + i}" for i in range(self.instances)]
        self.order = f"http://127.0.0.1:{int(env['ORDER_PORT'])}"
        self.mysql_port = int(env["MYSQL_PORT"])
        self.redis_port = int(env["REDIS_PORT"])

    def down(self):
        self.run("down", check=False)

    def _env_value(self, key):
        try:
            with open(os.path.join(self.dir, "stack.env"), encoding="utf-8") as f:
                for tok in f.read().split():
                    if tok.startswith(key + "="):
                        return tok.split("=", 1)[1]
        except OSError:
            pass
        return ""

    def fault_ready(self, need_replica):
        # Without redis-sentinel the stack comes up without the replica and
        # failover cells are skipped.
        if need_replica and not shutil.which("redis-sentinel"):
            need_replica = False
        had = self.running_before() and self._env_value("REPLICA") == "1"
        if self.instances is None and not self.running_before():
            self.started_here = True
        args = ["up", "--inventory", "2", "--orders", "1"]
        if need_replica or had:
            args.append("--redis-replica")
        if need_replica and not had and self.running_before():
            # inventories started without --redis-sentinels: start them again
            for n in ("inventory-1", "inventory-2"):
                self.stop(n, check=False)
        self.run(*args)
        self.instances = 2
        self.order_for = None
        self.read_env()
        return need_replica or had

    def port(self, proc):
        e = self.env
        if proc == "redis":
            return int(e["REDIS_PORT"])
        if proc == "redis-replica":
            return int(e["REPLICA_PORT"])
        if proc.startswith("sentinel-"):
            return int(e["SENTINEL_PORT"]) + int(proc[9:]) - 1
        raise KeyError(proc)

    def reset_redis_topology(self):
        for n in ("sentinel-1", "sentinel-2", "sentinel-3", "redis-replica", "redis"):
            self.stop(n, check=False)
        for n in ("sentinel-1", "sentinel-2", "sentinel-3", "redis-replica"):
            shutil.rmtree(os.path.join(self.dir, n), ignore_errors=True)
        for n in ("redis", "redis-replica", "sentinel-1", "sentinel-2", "sentinel-3"):
            self.start(n)
        # Fresh Sentinels learn the replica from the master's INFO (every
        # 10 s) and each other from hello messages (every 2 s): until all
        # three know both (and are out of TILT), a failover cannot happen
        # and the cell would measure that (as the compose driver does).
        deadline = time.time() + 45
        while time.time() < deadline:
            info = self.redis_cli(self.port("redis-replica"), "INFO", "replication")
            ready = "master_link_status:up" in info and \
                self.sentinel_master_port() == self.port("redis")
            for i in (1, 2, 3):
                si = self.redis_cli(self.port(f"sentinel-{i}"), "INFO", "sentinel", timeout=3)
                if "sentinel_tilt:0" not in si or "slaves=1," not in si or "sentinels=3" not in si:
                    ready = False
            if ready:
                return
            time.sleep(0.2)
        raise RuntimeError("replica or Sentinels not ready within 45 s after a reset")


class ExternalStack(Driver):
    """Services somebody else runs (docker compose): LAB_INVENTORY_URLS
    (comma list) and LAB_ORDER_URL. Nothing is started, resized or stopped:
    a cell with N instances uses the first N inventory URLs directly, and
    goes through the order service only when N is all of them."""

    name = "external"

    def __init__(self, urls, order, log):
        super().__init__(log)
        self.all = [u.rstrip("/") for u in urls.split(",") if u.strip()]
        self.order = (order or "").rstrip("/")
        self.dir = "external: " + ", ".join(self.all)
        self.inventory = self.all
        self.mysql_port = int(os.environ.get("LAB_MYSQL_PORT", "0") or 0) or None
        self.redis_port = int(os.environ.get("LAB_REDIS_PORT", "0") or 0) or None

    def up(self, n):
        if n > len(self.all):
            raise CellSkip(f"only {len(self.all)} inventory instances in LAB_INVENTORY_URLS")
        self.instances = n
        self.inventory = self.all[:n]

    def ensure_order(self):
        if not self.order:
            raise CellSkip("LAB_ORDER_URL not set")
        if self.instances != len(self.all):
            raise CellSkip(f"the order service fronts all {len(self.all)} instances")
