"""Import time: `python -c "import onion"` and `import middleware` against `python -c pass`."""

from __future__ import annotations

import sys
from pathlib import Path

from .table import Row
from .timing import Scale, interleaved_commands

SECTION = "import"
ROOT = Path(__file__).resolve().parent.parent


def rows(scale: Scale) -> list[Row]:
    commands = {
        "pass": [sys.executable, "-c", "pass"],
        "onion": [sys.executable, "-c", "import onion"],
        "middleware": [sys.executable, "-c", "import middleware"],
    }
    t = interleaved_commands(commands, repeats=scale.import_repeats, cwd=ROOT)
    found = []
    for module, note in (("onion", ""), ("middleware", ", onion included")):
        net = (t[module] - t["pass"]) * 1e3
        name = f"python -c 'import {module}' (net {net:.0f} ms{note})"
        found.append(Row(SECTION, name, t[module] * 1e3, "ms", t["pass"] * 1e3, "python -c pass"))
    return found
