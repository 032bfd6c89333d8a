"""lab.compose_driver: what the compose driver reads from deploy/.env and the
environment, and what it refuses without touching Docker. Its fault verbs
against a real engine are tests/compose/run's part (make compose-test)."""

import io
import os
import tempfile
import unittest
from unittest import mock

from lab.compose_driver import ComposeStack, dotenv
from lab.driver_choice import DRIVERS, make_driver
from lab.drivers import CellSkip


class DotenvTest(unittest.TestCase):
    def test_reads_key_values_skips_comments(self):
        with tempfile.NamedTemporaryFile("w", suffix=".env", delete=False) as f:
            f.write("# a comment\nA=1\n\n  B = two words \nNOEQUALS\nC=x=y\n")
        try:
            self.assertEqual(dotenv(f.name), {"A": "1", "B": "two words", "C": "x=y"})
        finally:
            os.unlink(f.name)

    def test_missing_file_is_empty(self):
        self.assertEqual(dotenv("/nonexistent/.env"), {})


class ComposeStackTest(unittest.TestCase):
    def make(self, **env):
        with mock.patch.dict(os.environ, env, clear=False):
            return ComposeStack(io.StringIO())

    def test_registered(self):
        self.assertIn("compose", DRIVERS)
        self.assertIsInstance(make_driver("compose", None, io.StringIO()), ComposeStack)

    def test_environment_wins_over_dotenv(self):
        s = self.make(COMPOSE_PROJECT_NAME="olab-x", OVERSELL_INVENTORY_1_PORT="61001",
                      OVERSELL_INVENTORY_2_PORT="61002", OVERSELL_ORDER_PORT="61000",
                      OVERSELL_MYSQL_PUBLISH_PORT="61003")
        self.assertEqual(s.project, "olab-x")
        self.assertEqual(s.inventory, ["http://127.0.0.1:61001", "http://127.0.0.1:61002"])
        self.assertEqual(s.order, "http://127.0.0.1:61000")
        self.assertEqual(s.mysql_port, 61003)

    def test_two_fixed_instances(self):
        s = self.make()
        s.up(1)
        self.assertEqual(len(s.inventory), 1)
        with self.assertRaises(CellSkip):
            s.ensure_order()
        s.up(2)
        s.ensure_order()
        with self.assertRaises(CellSkip):
            s.up(3)

    def test_redis_processes_by_name(self):
        s = self.make()
        for p in ("redis", "redis-replica", "sentinel-2", "redis-m1"):
            self.assertEqual(s.port(p), p)
        with self.assertRaises(KeyError):
            s.port("mysql")

    def test_start_with_environment_is_a_skip(self):
        # the container is started as it was (the caller stopped it), then skip
        s = self.make()
        started = []
        s.verb = lambda verb, proc, check=True: started.append((verb, proc)) or \
            mock.Mock(returncode=1)
        with self.assertRaises(CellSkip):
            s.start("inventory-1", env={"LAB_TEST_SETNX_PAUSE_MS": "3000"})
        self.assertEqual(started, [("start", "inventory-1")])


if __name__ == "__main__":
    unittest.main()
