"""`python -m onion demo`: run the example agent offline."""

from __future__ import annotations

import argparse
import asyncio

from ._demo import main


def cli() -> None:
    parser = argparse.ArgumentParser(prog="python -m onion")
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="run an example agent and show every layer it passes through")
    demo.add_argument("--model", help='a real model, e.g. "anthropic:claude-sonnet-5-5" (needs its API key)')
    arguments = parser.parse_args()
    asyncio.run(main(arguments.model))


if __name__ == "__main__":
    cli()
