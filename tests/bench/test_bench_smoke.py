"""`python -m bench` keeps working: every section runs at tiny sizes and prints its rows.

No timing is asserted; the figures of a smoke run mean nothing.
"""

from __future__ import annotations

import subprocess
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def smoke_table() -> tuple[str, dict[str, list[str]]]:
    """The header line, and the table's rows by section."""
    done = subprocess.run(
        [sys.executable, "-m", "bench", "--smoke", "--peers-python", sys.executable],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    header, _columns, _rule, *lines = done.stdout.splitlines()
    sections: dict[str, list[str]] = defaultdict(list)
    for line in lines:
        sections[line.split()[0]].append(line)
    return header, sections


def test_bench_prints_one_table_with_every_expected_row() -> None:
    """Header, then stack, loop, tracing, peers (measured or skipped), concurrency, library, durable, redis (measured,
    or skipped without a redis-server), serve, temporal and import rows."""
    header, rows = smoke_table()
    assert header.startswith("onion benchmarks (smoke")
    sections = [
        *("stack", "loop", "tracing", "peers", "concurrency", "library", "durable", "redis", "serve", "temporal"),
        "import",
    ]
    assert list(rows) == sections
    expected = {
        "stack": [
            f"{kind} kind, {n}" for kind in ("model", "tool") for n in ("0 layers", "1 layer,", "5 l", "10 l", "20 l")
        ],
        "loop": ["agent run, 0 layers", "agent run, 10 layers"],
        "tracing": ["instrument()", "instrument(layers=True)", "off after uninstrument()"],
        "peers": ["LangChain", "pydantic-ai", "OpenAI Agents"],
        "concurrency": ["wall, onion", "wall, hand loop", "peak RSS per run", "tracemalloc peak per run"],
        "library": [""],
        "durable": ["SQLiteStore", "per model call", "per tool call", "concurrent journaled runs"],
        "serve": ["POST /runs JSON, keep-alive", "JSON: server CPU per run", "POST /runs SSE", "SSE: server CPU"],
        "temporal": ["activities per run", "as a workflow, local dev server", "pydantic-ai"],
        "import": ["import onion", "import middleware"],
    }
    if not any("skipped: no redis-server" in line for line in rows["redis"]):
        expected["redis"] = [
            "rate_limit",
            "cache, per model call that misses",
            "journal, +1",
            "concurrent runs",
            "a follower on another process",
        ]
    for section, names in expected.items():
        for name in names:
            assert any(name in line for line in rows[section]), f"no {section} row with {name!r}"
    figures = [line for lines in rows.values() for line in lines if "skipped:" not in line]
    assert all(line.rstrip().endswith(("x", "n/a", "ok", "OVER")) for line in figures), "every figure has a ratio"
