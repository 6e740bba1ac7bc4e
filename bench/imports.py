"""Import time: `python -c "import onion"` and `import middleware` against `python -c pass`, and `import onion`
on top of pydantic (what every onion program imports anyway) against pydantic alone, and on top of pydantic and
asyncio (what every onion program runs on) to show onion's own share."""

from __future__ import annotations

import sys
from pathlib import Path

from .table import Row
from .timing import Scale, interleaved_commands

SECTION = "import"
ROOT = Path(__file__).resolve().parent.parent
PYDANTIC = "from pydantic import BaseModel"
ASYNCIO = f"{PYDANTIC}; import asyncio"


def rows(scale: Scale) -> list[Row]:
    commands = {
        "pass": [sys.executable, "-c", "pass"],
        "onion": [sys.executable, "-c", "import onion"],
        "middleware": [sys.executable, "-c", "import middleware"],
        "pydantic": [sys.executable, "-c", PYDANTIC],
        "pydantic onion": [sys.executable, "-c", f"{PYDANTIC}; import onion"],
        "asyncio": [sys.executable, "-c", ASYNCIO],
        "asyncio onion": [sys.executable, "-c", f"{ASYNCIO}; import onion"],
    }
    t = interleaved_commands(commands, repeats=scale.import_repeats, cwd=ROOT)
    found = []
    for module, note in (("onion", ""), ("middleware", ", onion included")):
        net = (t[module] - t["pass"]) * 1e3
        name = f"python -c 'import {module}' (net {net:.0f} ms{note})"
        found.append(Row(SECTION, name, t[module] * 1e3, "ms", t["pass"] * 1e3, "python -c pass"))
    more = (t["pydantic onion"] - t["pydantic"]) * 1e3
    found.append(
        Row(
            SECTION,
            f"import onion on top of pydantic BaseModel ({more:.0f} ms more)",
            t["pydantic onion"] * 1e3,
            "ms",
            t["pydantic"] * 1e3,
            "pydantic alone",
            aim=1.3,
        )
    )
    more = (t["asyncio onion"] - t["asyncio"]) * 1e3
    asyncio_alone = (t["asyncio"] - t["pydantic"]) * 1e3
    found.append(
        Row(
            SECTION,
            f"import onion on top of pydantic and asyncio ({more:.0f} ms more; asyncio itself {asyncio_alone:.0f} ms)",
            t["asyncio onion"] * 1e3,
            "ms",
            t["asyncio"] * 1e3,
            "pydantic + asyncio",
        )
    )
    return found
