"""dagrun_torch's version: dagrun's, set in one place (``release`` in
cmd/dagrun/version.go).

In a checkout this module reads it from there. A wheel or an sdist carries
this file written with the number itself and ``BINARY``, the name of the
dagrun executable the wheel installs in the scripts folder
(python/_build/dagrun_build.py writes both).
"""
import re
from pathlib import Path

BINARY = None  # a checkout carries no binary of its own


def _from_checkout() -> str:
    go = Path(__file__).resolve().parent.parent.parent / "cmd" / "dagrun" / "version.go"
    try:
        m = re.search(r'^const release = "([^"]+)"', go.read_text(), re.M)
    except OSError:
        m = None
    return m.group(1) if m else "unknown"


__version__ = _from_checkout()
