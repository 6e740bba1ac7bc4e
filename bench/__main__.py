"""`python -m bench [--quick]`: run every benchmark, print one table of ratios."""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import sys
import time
from collections.abc import Callable

from . import (
    agentdojo,
    concurrency,
    contain,
    durable,
    imports,
    library,
    loop,
    peers,
    policy,
    redis_stores,
    sdk,
    serve,
    stack,
    temporal,
    tracing,
)
from .table import Row, render
from .timing import FULL, QUICK, SMOKE, Scale

SECTIONS = (
    "stack",
    "loop",
    "tracing",
    "peers",
    "concurrency",
    "library",
    "durable",
    "redis",
    "serve",
    "temporal",
    "import",
)
SEPARATE = ("agentdojo", "contain")
"""Sections run only when named with `--only` (AgentDojo takes minutes, in its own venv; `contain` alone is a
part of `library`)."""


def machine() -> str:
    """CPU model, cores, Python and date, for the header."""
    model = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            model = next(line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name"))
    except (OSError, StopIteration):
        model = platform.processor() or model
    today = datetime.date.today().isoformat()
    return f"{model}, {os.cpu_count()} cores, Python {platform.python_version()}, {today}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="fewer rounds and runs (about 25 s)")
    size.add_argument(
        "--smoke", action="store_true", help="tiny sizes: checks that everything runs, figures mean little"
    )
    parser.add_argument(
        "--peers-python", help="interpreter with the peers (default: $ONION_BENCH_PYTHON, else .bench-venv/bin/python)"
    )
    parser.add_argument("--only", nargs="+", choices=SECTIONS + SEPARATE, help="run only these sections")
    args = parser.parse_args(argv)
    scale: Scale = SMOKE if args.smoke else QUICK if args.quick else FULL
    python = peers.interpreter(args.peers_python)
    sections: dict[str, Callable[[], list[Row]]] = {
        "stack": lambda: stack.rows(scale),
        "loop": lambda: loop.rows(scale) + sdk.rows(scale),
        "tracing": lambda: tracing.rows(scale),
        "peers": lambda: peers.rows(scale, python),
        "concurrency": lambda: concurrency.rows(scale),
        "library": lambda: library.rows(scale) + policy.rows(scale) + contain.rows(scale),
        "durable": lambda: durable.rows(scale),
        "redis": lambda: redis_stores.rows(scale),
        "serve": lambda: serve.rows(scale),
        "temporal": lambda: temporal.rows(scale, python),
        "import": lambda: imports.rows(scale),
        "agentdojo": lambda: agentdojo.rows(scale),
        "contain": lambda: contain.rows(scale),
    }
    rows: list[Row] = []
    started = time.perf_counter()
    for name in args.only or SECTIONS:
        print(f"measuring {name} ...", file=sys.stderr, flush=True)
        rows.extend(sections[name]())
    kind = "smoke" if args.smoke else "quick" if args.quick else "full"
    print(f"onion benchmarks ({kind}, {time.perf_counter() - started:.0f} s): {machine()}")
    print(render(rows))


if __name__ == "__main__":
    main()
