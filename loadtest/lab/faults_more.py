"""The fault cells that decide between the lease guards (see
loadtest/README.md, "Fault scenarios"): a stop-the-world pause right after
the lease check (stall), the holder's clock running slow (skew, libfaketime),
the holder starved of CPU (starve, a cgroup quota shared with a stress-ng
hog) and a slow link from the holder to MySQL or Redis (netdelay, a
delaying relay). Each choreography is a FaultRunner method (lab.faults)
with the same arguments as theirs; `prepare` arms inventory-1 before the
cell and returns what undoes it."""

import collections
import glob
import os
import shutil
import socket
import subprocess
import threading
import time

from .drivers import CellSkip
from .faultplan import (NETDELAY_S, SKEW_HOLD_MS, SKEW_RATE, STALL_ENV, STALL_PAUSE_MS,
                        netdelay_link)
from .net import http_json

# cgroup v1's cpu controller (this machine), else cgroup v2's root.
CPU_V1 = "/sys/fs/cgroup/cpu"
CPU_V2 = "/sys/fs/cgroup"
# starve: the holder's cgroup gets this much CPU per period (the longest
# period the kernel allows), and a stress-ng hog in it takes most of it.
STARVE_QUOTA_US, STARVE_PERIOD_US = 1000, 1000000


def faketime_lib():
    """Path of Debian's libfaketimeMT (threads), or None."""
    found = sorted(glob.glob("/usr/lib/*/faketime/libfaketimeMT.so.1"))
    return found[0] if found else None


class MoreFaults:
    """Mixed into FaultRunner: self.stack, self.inv(), self.holder(),
    self.body(), self.log are theirs."""

    # ---- arming inventory-1 ---------------------------------------------

    def prepare(self, c):
        """Restart inventory-1 the way the cell needs (nothing for the
        older faults). Returns a list of callables that undo it."""
        env = None
        if c["fault"] == "stall":
            if c["guard"] not in STALL_ENV:
                raise CellSkip(f"no fault point after the lease check in {c['guard']}")
            env = {STALL_ENV[c["guard"]]: str(STALL_PAUSE_MS[c["guard"]])}
        elif c["fault"] == "skew":
            lib = faketime_lib()
            if lib is None:
                raise CellSkip("libfaketime not installed (apt-get install faketime)")
            env = {"LAB_INVENTORY_PRELOAD": lib, "FAKETIME": f"+0 x{SKEW_RATE:g}"}
        elif c["fault"] == "starve":
            if self.stack.name != "local":
                raise CellSkip("CPU starvation needs the local stack (a cgroup of its pid)")
            if not cpu_cgroup_root():
                raise CellSkip("no writable cgroup cpu controller (cfs quota)")
            if not shutil.which("stress-ng"):
                raise CellSkip("stress-ng not installed")
        elif c["fault"] == "netdelay":
            if netdelay_link(c["guard"]) == "mysql":
                self.relay = DelayRelay(self.stack.mysql_port, self.log)
                args = f"--mysql-port {self.relay.port}"
            else:
                # With Sentinels (a stack that ran failover cells) inventory-1
                # would ask them for the master and bypass the relay: no
                # Sentinels for it, the relay in front of today's master.
                master = self.stack.current_master(self.replica_ready)
                self.relay = DelayRelay(self.stack.port(master), self.log)
                args = f"--redis-port {self.relay.port} --redis-sentinels="
            env = {"LAB_INVENTORY_ARGS": args}
        if env is None:
            return []
        if self.stack.name != "local":
            # before anything is stopped: compose cannot start an instance
            # with extra environment, and would leave inventory-1 down
            self.close_relay()
            raise CellSkip(f"{c['fault']} restarts inventory-1 armed: needs the local stack "
                           "(deploy/local/stack)")
        def plain():
            self.stack.stop("inventory-1", check=False)
            self.stack.start("inventory-1", check=False)
            self.close_relay()

        self.stack.stop("inventory-1")
        try:
            self.stack.start("inventory-1", env=env)
        except (RuntimeError, OSError):
            plain()   # the next cells need inventory-1 as it was
            raise
        return [plain]

    def close_relay(self):
        if getattr(self, "relay", None) is not None:
            self.relay.close()
            self.relay = None

    def wait_answer(self, i, answers, until):
        """Poll inventory-i's /healthz (0.3 s each) until it answers
        (answers=True) or stops answering (False), or time `until`.
        Returns whether it got there."""
        while time.time() < until:
            try:
                st, _ = http_json("GET", f"{self.inv(i)}/healthz", timeout=0.3)
                up = st == 200
            except OSError:
                up = False
            if up == answers:
                return True
            time.sleep(0.05)
        return False

    # ---- choreographies --------------------------------------------------

    # stall: the holder stops itself right after its lease check (the
    # guard's fault point), before its COMMIT
    def _stall(self, c, at, ev, hold, prefix, after):
        at(1.0)
        th = self.holder(self.inv(1), self.body(c, {"order_id": f"{prefix}-holder", "hold_ms": 200,
                                                    "lock_wait_ms": 5000}), 40, hold)
        ev("holder in (inventory-1, hold_ms 200)", "mark")
        pause_s = STALL_PAUSE_MS[c["guard"]] / 1000.0
        if self.wait_answer(1, False, time.time() + 6):
            ev(f"inventory-1 stopped after its lease check ({pause_s:g} s, fault point)")
            if self.wait_answer(1, True, time.time() + pause_s + 5):
                ev("inventory-1 running again: the holder commits", "end")
        else:
            ev("inventory-1 never stopped: the fault point was not reached", "mark")
        return th

    # skew: the holder's clocks run at SKEW_RATE (inventory-1 started under
    # libfaketime by prepare)
    def _skew(self, c, at, ev, hold, prefix, after):
        at(1.0)
        # the fault lasts the whole cell: no moment to recover from
        ev(f"holder in (inventory-1, its clock at x{SKEW_RATE:g}, hold_ms {SKEW_HOLD_MS} of its time)",
           "mark")
        return self.holder(self.inv(1), self.body(c, {"order_id": f"{prefix}-holder",
                                                      "hold_ms": SKEW_HOLD_MS,
                                                      "lock_wait_ms": 5000}), 40, hold)

    # starve: inventory-1 and a stress-ng hog share a cgroup with 1 ms of
    # CPU per second, from 1.5 to 5.5 s
    def _starve(self, c, at, ev, hold, prefix, after):
        at(1.0)
        th = self.holder(self.inv(1), self.body(c, {"order_id": f"{prefix}-holder", "hold_ms": 2500,
                                                    "lock_wait_ms": 5000}), 40, hold)
        ev("holder in (inventory-1, hold_ms 2500)", "mark")
        at(1.5)
        with open(os.path.join(self.stack.dir, "pids", "inventory-1.pid"), encoding="ascii") as f:
            pid = int(f.read().strip())
        group = Starver(pid, f"lab-starve-{os.getpid()}-{c['cell']}", self.log)
        after.append(group.end)
        group.begin()
        ev(f"inventory-1 starved: {STARVE_QUOTA_US // 1000} ms of CPU per "
           f"{STARVE_PERIOD_US // 1000000} s, shared with a stress-ng hog")
        at(5.5)
        group.end()
        ev("inventory-1 gets the CPU again", "end")
        return th

    # netdelay: what inventory-1 sends on one link (MySQL, or Redis for
    # redis-lock) arrives NETDELAY_S late from 1.5 to 4.5 s
    def _netdelay(self, c, at, ev, hold, prefix, after):
        at(1.0)
        th = self.holder(self.inv(1), self.body(c, {"order_id": f"{prefix}-holder", "hold_ms": 2500,
                                                    "lock_wait_ms": 5000}), 40, hold)
        ev("holder in (inventory-1, hold_ms 2500)", "mark")
        at(1.5)
        link = "MySQL" if netdelay_link(c["guard"]) == "mysql" else "Redis"
        self.relay.delay = NETDELAY_S
        ev(f"inventory-1 -> {link}: {NETDELAY_S:g} s delay")
        at(4.5)
        self.relay.delay = 0.0
        ev(f"inventory-1 -> {link}: no delay (queued bytes still drain in order)", "end")
        return th


class DelayRelay:
    """A TCP relay from a free 127.0.0.1 port to 127.0.0.1:target that
    holds what the client sends for `delay` seconds (set at any time; bytes
    stay in order), as tc netem's delay on that link would; the answers
    pass at once. In user space because the kernel the lab was measured on
    has no sch_netem. close() stops it and every connection."""

    def __init__(self, target, log):
        self.target, self.log = target, log
        self.delay = 0.0
        self.closed = False
        self.socks = []
        self.lock = threading.Lock()
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(128)
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self.accept, daemon=True).start()
        log.write(f"relay 127.0.0.1:{self.port} -> 127.0.0.1:{target}\n")

    def keep(self, *socks):
        with self.lock:
            self.socks.extend(socks)

    def accept(self):
        while not self.closed:
            try:
                client, _ = self.listener.accept()
                server = socket.create_connection(("127.0.0.1", self.target), timeout=5)
                server.settimeout(None)
            except OSError:
                if self.closed:
                    return
                continue
            self.keep(client, server)
            queue = collections.deque()
            ready = threading.Condition()
            threading.Thread(target=self.read_delayed, args=(client, queue, ready), daemon=True).start()
            threading.Thread(target=self.send_due, args=(server, queue, ready), daemon=True).start()
            threading.Thread(target=self.pump, args=(server, client), daemon=True).start()

    def read_delayed(self, src, queue, ready):
        last = 0.0
        while True:
            try:
                data = src.recv(65536)
            except OSError:
                data = b""
            due = max(time.time() + self.delay, last)
            last = due
            with ready:
                queue.append((due, data))
                ready.notify()
            if not data:
                return

    def send_due(self, dst, queue, ready):
        while True:
            with ready:
                while not queue:
                    ready.wait()
                due, data = queue.popleft()
            wait = due - time.time()
            if wait > 0:
                time.sleep(wait)
            try:
                if not data:
                    dst.shutdown(socket.SHUT_WR)
                    return
                dst.sendall(data)
            except OSError:
                return

    def pump(self, src, dst):
        while True:
            try:
                data = src.recv(65536)
                if not data:
                    dst.shutdown(socket.SHUT_WR)
                    return
                dst.sendall(data)
            except OSError:
                return

    def close(self):
        self.closed = True
        with self.lock:
            socks, self.socks = self.socks, []
        for s in [self.listener, *socks]:
            # shutdown first: a bare close() does not wake a thread blocked
            # in recv() or accept() on the socket
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()


def cpu_cgroup_root():
    """The folder new cpu cgroups go in (v1 cpu controller, or v2 with cpu
    enabled), or None."""
    if os.access(os.path.join(CPU_V1, "cgroup.procs"), os.W_OK) and \
            os.path.exists(os.path.join(CPU_V1, "cpu.cfs_quota_us")):
        return CPU_V1
    ctl = os.path.join(CPU_V2, "cgroup.subtree_control")
    try:
        with open(ctl, encoding="ascii") as f:
            if "cpu" in f.read().split():
                return CPU_V2
    except OSError:
        pass
    return None


class Starver:
    """A cgroup with a tiny CPU quota holding one process (by pid) and a
    stress-ng hog (started here, stopped by its pid); end() puts the
    process back where it was and removes what begin() made. Safe to call
    end() twice."""

    def __init__(self, pid, name, log):
        self.pid, self.log = pid, log
        self.root = cpu_cgroup_root()
        self.dir = os.path.join(self.root, name)
        self.home = None
        self.hog = None

    def write(self, path, text):
        with open(path, "w", encoding="ascii") as f:
            f.write(text)

    def begin(self):
        os.mkdir(self.dir)
        if self.root == CPU_V1:
            self.write(os.path.join(self.dir, "cpu.cfs_period_us"), str(STARVE_PERIOD_US))
            self.write(os.path.join(self.dir, "cpu.cfs_quota_us"), str(STARVE_QUOTA_US))
        else:
            self.write(os.path.join(self.dir, "cpu.max"), f"{STARVE_QUOTA_US} {STARVE_PERIOD_US}")
        self.home = self.cgroup_of(self.pid)
        procs = os.path.join(self.dir, "cgroup.procs")
        # The hog joins the cgroup before it starts (its workers inherit it)
        # and ends by itself after 10 s at the latest.
        self.hog = subprocess.Popen(
            ["sh", "-c", 'echo $$ > "$1" && exec stress-ng --cpu 1 --timeout 10s --quiet', "_", procs],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        time.sleep(0.1)
        self.write(procs, str(self.pid))
        self.log.write(f"starve: pid {self.pid} and stress-ng {self.hog.pid} in {self.dir}\n")

    def cgroup_of(self, pid):
        """The pid's cpu cgroup folder now."""
        want = "cpu" if self.root == CPU_V1 else ""
        with open(f"/proc/{pid}/cgroup", encoding="ascii") as f:
            for line in f:
                _, ctls, path = line.rstrip("\n").split(":", 2)
                if (want in ctls.split(",")) if want else ctls == "":
                    return os.path.join(self.root, path.lstrip("/"))
        return self.root

    def end(self):
        if not os.path.isdir(self.dir):
            return
        # Lift the quota first: throttled, the hog's workers would take up
        # to a period each to die.
        lift = ("cpu.cfs_quota_us", "-1") if self.root == CPU_V1 else ("cpu.max", "max")
        try:
            self.write(os.path.join(self.dir, lift[0]), lift[1])
        except OSError:
            pass
        if self.home:
            try:
                self.write(os.path.join(self.home, "cgroup.procs"), str(self.pid))
            except OSError:
                pass   # the process is gone
            self.home = None
        if self.hog is not None:
            try:
                os.killpg(self.hog.pid, 9)   # its own session: the hog and its workers only
            except OSError:
                pass
            self.hog.wait(timeout=10)
            self.hog = None
        for _ in range(50):
            try:
                os.rmdir(self.dir)
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.1)   # the hog's workers are still leaving
