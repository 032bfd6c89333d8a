"""lab.drivers: the driver chosen by --driver / the environment, and what a
driver without fault verbs answers (CellSkip, so the cell is reported
skipped, never failed)."""

import io
import os
import unittest
from unittest import mock

from lab.driver_choice import make_driver
from lab.drivers import CellSkip, Driver, ExternalStack, LocalStack


class DriverTest(unittest.TestCase):
    def test_make_driver(self):
        log = io.StringIO()
        with mock.patch.dict(os.environ, {"LAB_INVENTORY_URLS": "http://127.0.0.1:1,http://127.0.0.1:2"}):
            self.assertIsInstance(make_driver(None, None, log), ExternalStack)
            self.assertIsInstance(make_driver(None, "./run", log), LocalStack)
            self.assertIsInstance(make_driver("local", None, log), LocalStack)
        with mock.patch.dict(os.environ, {}, clear=True):
            self.assertIsInstance(make_driver(None, None, log), LocalStack)
            with self.assertRaises(ValueError):
                make_driver("external", None, log)
        with self.assertRaises(ValueError):
            make_driver("nonsense", None, log)

    def test_no_fault_verbs_means_skip(self):
        d = Driver(io.StringIO())
        with self.assertRaises(CellSkip):
            d.fault_ready(False)
        for verb in (d.pause, d.resume, d.kill, d.stop, d.start):
            with self.subTest(verb.__name__):
                with self.assertRaises(CellSkip):
                    verb("inventory-1")

    def test_external_stack_sizes(self):
        e = ExternalStack("http://a:1/, http://b:2", "http://o:3", io.StringIO())
        e.up(1)
        self.assertEqual(e.inventory, ["http://a:1"])
        with self.assertRaises(CellSkip):
            e.ensure_order()            # the order service fronts both
        e.up(2)
        e.ensure_order()
        with self.assertRaises(CellSkip):
            e.up(3)


if __name__ == "__main__":
    unittest.main()
