"""Which stack driver a run uses: the one place that knows every driver
(drivers.py holds the base class and the built-in local/external drivers,
compose_driver.py the compose one; both import drivers.py, none imports
this module, so the imports run one way)."""
import os

from .compose_driver import ComposeStack
from .drivers import ExternalStack, LocalStack

DRIVERS = ("local", "external", "compose")


def make_driver(name, stack_dir, log):
    """The driver for --driver NAME (None: local, or external when
    LAB_INVENTORY_URLS is set and no --dir was given)."""
    if name is None:
        name = "external" if stack_dir is None and os.environ.get("LAB_INVENTORY_URLS") else "local"
    if name == "external":
        if not os.environ.get("LAB_INVENTORY_URLS"):
            raise ValueError("--driver external needs LAB_INVENTORY_URLS")
        return ExternalStack(os.environ["LAB_INVENTORY_URLS"], os.environ.get("LAB_ORDER_URL"), log)
    if name == "local":
        return LocalStack(stack_dir or "./run", log)
    if name == "compose":
        return ComposeStack(log)
    raise ValueError(f"unknown driver '{name}' (known: {', '.join(DRIVERS)})")
