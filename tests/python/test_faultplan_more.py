"""lab.faultplan's cells that decide between the lease guards (stall, skew,
starve, netdelay): the shipped files expand to the cells the README lists, every
verdict follows its mechanism (fenced or not, watchdog or not), and
faults-all runs them."""

import io
import socket
import threading
import time
import unittest

from lab.faults_more import DelayRelay
from lab.faultplan import FAULTS, NETDELAY_S, STALL_ENV, STALL_PAUSE_MS, expect, netdelay_link
from lab.scenario import expand_cells, parse_scenario, resolve_scenario

LEASE_CHECKERS = ("redlock", "etcd", "zookeeper")


def cells_of(name):
    return {c["label"]: c for c in expand_cells(parse_scenario(resolve_scenario(name)), None)}


class FaultPlanMoreTest(unittest.TestCase):
    def test_stall_has_every_lease_guard_unfenced_broke_fenced_held(self):
        cells = cells_of("stall")
        for g in LEASE_CHECKERS:
            self.assertEqual(cells[f"stall/{g}"]["expected"], "broke", g)
            self.assertIn(g, STALL_ENV)
            self.assertGreater(STALL_PAUSE_MS[g], 0)
        for g in ("etcd", "zookeeper"):
            c = cells[f"stall/{g}/fencing"]
            self.assertTrue(c["fields"]["fencing"])
            self.assertEqual(c["expected"], "held", g)
            self.assertIn("fencing=true", cells[f"stall/{g}"]["expected_why"])
        # Redlock issues no token: its only cell says why fencing is no way out.
        self.assertNotIn("stall/redlock/fencing", cells)
        self.assertIn("cannot fence", cells["stall/redlock"]["expected_why"])

    def test_stall_pause_outlasts_each_lease(self):
        """The pause must outlast the lease (or session) it is meant to
        outlive: redlock 1 s, etcd 2 s + 0.5 s tick, ZooKeeper 4 s session."""
        cells = cells_of("stall")
        self.assertGreater(STALL_PAUSE_MS["redlock"], cells["stall/redlock"]["fields"]["lock_ttl_ms"])
        self.assertGreater(STALL_PAUSE_MS["etcd"], cells["stall/etcd"]["fields"]["lock_ttl_ms"] + 500)
        self.assertGreater(STALL_PAUSE_MS["zookeeper"], 4000 + 500)

    def test_skew_verdicts_follow_watchdog_and_fencing(self):
        table = [
            # (label, fields, expected)
            ("redlock", {}, "held"),
            ("redlock", {"watchdog": False}, "broke"),
            ("etcd", {}, "held"),
            ("etcd", {"watchdog": False}, "broke"),
            ("etcd", {"watchdog": False, "fencing": True}, "held"),
            ("zookeeper", {}, "held"),
            ("zookeeper", {"watchdog": False}, "held"),   # the server's word, not the clock
        ]
        for guard, fields, want in table:
            got, why = expect("skew", guard, fields)
            self.assertEqual(got, want, (guard, fields))
            self.assertTrue(why)

    def test_starve_verdicts(self):
        table = [
            ("redis-lock", {}, "broke"),
            ("redis-lock", {"fencing": True}, "held"),
            ("redlock", {}, "held"),
            ("etcd", {}, "held"),
            ("zookeeper", {}, "held"),
        ]
        for guard, fields, want in table:
            got, why = expect("starve", guard, fields)
            self.assertEqual(got, want, (guard, fields))
            if got == "broke":
                self.assertIn("fencing", why)

    def test_netdelay_breaks_the_lock_at_the_far_end_of_the_slow_link(self):
        cells = cells_of("netdelay")
        self.assertEqual(netdelay_link("redis-lock"), "redis")
        for g in ("lock-table", "redlock", "etcd", "zookeeper"):
            self.assertEqual(netdelay_link(g), "mysql", g)
        for g in ("redis-lock", "lock-table"):
            self.assertEqual(cells[f"netdelay/{g}"]["expected"], "broke", g)
            self.assertEqual(cells[f"netdelay/{g}/fencing"]["expected"], "held", g)
        for g in LEASE_CHECKERS:
            self.assertEqual(cells[f"netdelay/{g}"]["expected"], "held", g)
        # lock-table's row outlives the hold (2.5 s), not the hold plus one
        # delayed write (NETDELAY_S)
        ttl = cells["netdelay/lock-table"]["fields"]["lock_ttl_ms"]
        self.assertLess(2500, ttl)
        self.assertLess(ttl, 2500 + NETDELAY_S * 1000)

    def test_faults_all_runs_them(self):
        for f in ("stall", "skew", "starve", "netdelay"):
            self.assertIn(f, FAULTS)
        labels = set(cells_of("faults-all"))
        for name in ("stall", "skew", "starve", "netdelay"):
            for label in cells_of(name):
                self.assertIn(label, labels)


class DelayRelayTest(unittest.TestCase):
    """netdelay's relay: what the client sends arrives `delay` late, in
    order; the answers pass at once; close() ends every connection."""

    def setUp(self):
        self.server = socket.socket()
        self.server.bind(("127.0.0.1", 0))
        self.server.listen(4)
        threading.Thread(target=self.echo, daemon=True).start()
        self.relay = DelayRelay(self.server.getsockname()[1], io.StringIO())

    def tearDown(self):
        self.relay.close()
        self.server.close()

    def echo(self):
        try:
            conn, _ = self.server.accept()
        except OSError:
            return
        with conn:
            while True:
                data = conn.recv(4096)
                if not data:
                    return
                conn.sendall(data)

    def round_trip(self, client, payload):
        t = time.time()
        client.sendall(payload)
        got = b""
        while len(got) < len(payload):
            got += client.recv(4096)
        return got, time.time() - t

    def test_delay_applies_while_on_and_keeps_order(self):
        client = socket.create_connection(("127.0.0.1", self.relay.port), timeout=5)
        got, took = self.round_trip(client, b"fast")
        self.assertEqual(got, b"fast")
        self.assertLess(took, 0.2)
        self.relay.delay = 0.3
        t0 = time.time()
        client.sendall(b"one-")
        time.sleep(0.05)                # read (and held) by the relay by then
        self.relay.delay = 0.0          # a later chunk waits behind the delayed one
        client.sendall(b"two")
        got = b""
        while len(got) < len(b"one-two"):
            got += client.recv(4096)
        self.assertEqual(got, b"one-two")
        self.assertGreaterEqual(time.time() - t0, 0.29)
        client.close()

    def test_close_ends_connections(self):
        client = socket.create_connection(("127.0.0.1", self.relay.port), timeout=5)
        self.round_trip(client, b"x")
        self.relay.close()
        self.assertEqual(client.recv(10), b"")
        client.close()


if __name__ == "__main__":
    unittest.main()
