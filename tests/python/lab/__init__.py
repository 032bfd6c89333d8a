"""The load-test package for the tests here: `lab` lives in loadtest/lab,
and this folder is what both `python3 -m unittest discover -s tests/python`
and `python3 -m pytest tests/python` put on the path when run from the
repository root. Importing `lab` from here puts loadtest/ on the path and
hands back the real package (its own module, ROOT and files), so a test
sees exactly what loadtest/lab's users see."""

import importlib
import os
import sys

_LOADTEST = os.path.normpath(
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "loadtest"))
if _LOADTEST not in sys.path:
    sys.path.insert(0, _LOADTEST)
# The import system returns whatever sys.modules holds once this file ran:
# the real package, found on loadtest/ now that this stand-in is gone.
del sys.modules[__name__]
sys.modules[__name__] = importlib.import_module(__name__)
