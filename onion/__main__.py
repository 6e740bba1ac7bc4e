"""`python -m onion demo`: run the example agent offline. `python -m onion runs`: the runs a store holds."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import NoReturn

from ._demo import cli as run_demo

SERVE_NEEDS = ("starlette", "uvicorn", "ag_ui")
"""The `serve` extra's packages: without them, every command but `serve` works."""


class Parser(argparse.ArgumentParser):
    """Bad arguments are one line naming what to fix (no usage block): `python -m onion runs approve -h` says more."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see {self.prog} -h)\n")


def parser() -> Parser:
    """The command line: `demo`, `runs` (and its actions) and `serve`."""
    from . import _runs_cli
    from .serve._cli import add_parser

    main = Parser(prog="python -m onion")
    commands = main.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="run an example agent and show every layer it passes through")
    demo.add_argument("--model", help='a real model, e.g. "anthropic:claude-sonnet-5-5" (needs its API key)')
    demo.add_argument("--html", type=Path, help="also write the trace of both runs as one HTML page there")
    _runs_cli.add_parser(commands)
    add_parser(commands)
    return main


def cli() -> None:
    from . import _runs_cli

    arguments = parser().parse_args()
    if arguments.command == "serve":
        from .serve._cli import run

        try:
            run(arguments)
        except ModuleNotFoundError as missing:
            if (missing.name or "").partition(".")[0] not in SERVE_NEEDS:
                raise
            needs = f"python -m onion serve needs the serve extra: pip install 'onion[serve]' ({missing})"
            raise SystemExit(needs) from None
        return
    if arguments.command == "demo":
        run_demo(arguments.model, arguments.html)
        return
    _runs_cli.run(arguments)


if __name__ == "__main__":
    cli()
