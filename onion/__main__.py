"""`python -m onion demo`: run the example agent offline. `python -m onion runs`: the runs a store holds."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from ._demo import cli as run_demo
from ._runs_cli import list_runs, show_run
from .errors import StoreUnavailable


def cli() -> None:
    parser = argparse.ArgumentParser(prog="python -m onion")
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="run an example agent and show every layer it passes through")
    demo.add_argument("--model", help='a real model, e.g. "anthropic:claude-sonnet-5-5" (needs its API key)')
    demo.add_argument("--html", type=Path, help="also write the trace of both runs as one HTML page there")
    runs = commands.add_parser("runs", help="list the runs in a store (id, status, pending calls, age)")
    runs.add_argument("--db", type=Path, default=Path("onion.db"), help="the SQLite store (default: onion.db)")
    actions = runs.add_subparsers(dest="action")
    show = actions.add_parser("show", help="print one run: its history and pending calls, secrets redacted")
    show.add_argument("run_id")
    show.add_argument("--db", type=Path, default=argparse.SUPPRESS, help="the SQLite store (default: onion.db)")
    from .serve._cli import add_parser

    add_parser(commands)
    arguments = parser.parse_args()
    if arguments.command == "serve":
        from .serve._cli import run

        run(arguments)
        return
    if arguments.command == "demo":
        run_demo(arguments.model, arguments.html)
        return
    try:
        shown = show_run(arguments.db, arguments.run_id) if arguments.action == "show" else list_runs(arguments.db)
        print(asyncio.run(shown))
    except StoreUnavailable as error:  # a damaged or locked file: the message names it and says what to do
        raise SystemExit(str(error)) from None


if __name__ == "__main__":
    cli()
