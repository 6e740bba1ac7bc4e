"""`python -m onion serve module:agent`: the agent behind uvicorn, on the store a flag names, the token from the env."""

from __future__ import annotations

import argparse
import importlib
import ipaddress
import os
import sys
from pathlib import Path
from typing import Any

from onion import Agent

LOOPBACK = ("localhost",)


def add_parser(commands: Any) -> None:
    """The `serve` subcommand's arguments."""
    serve = commands.add_parser("serve", help="serve an agent over HTTP: runs, streaming, AG-UI, the approvals page")
    serve.add_argument("agent", help="where the agent is: module:attribute (an onion Agent)")
    where = serve.add_mutually_exclusive_group()
    where.add_argument("--db", type=Path, help="an SQLite store for runs, sessions and decisions")
    where.add_argument("--redis", help="a Redis store URL (redis://host:6379/0)")
    serve.add_argument("--host", default="127.0.0.1", help="the address to listen on (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8000, help="the port (default 8000)")
    serve.add_argument("--token-env", default="ONION_SERVE_TOKEN", help="the variable holding the token")


def load_agent(spec: str, *, command: str = "serve") -> Agent[Any]:
    """The `Agent` that `module:attribute` names (the current directory importable); SystemExit saying what is wrong.

    `command` starts the messages (`runs approve` loads its agent here too).
    """
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise SystemExit(f"{command} {spec!r}: name the agent as module:attribute, e.g. myapp:agent")
    sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise SystemExit(f"{command} {spec!r}: cannot import {module_name!r} ({error})") from None
    agent = getattr(module, attribute, None)
    if not isinstance(agent, Agent):
        raise SystemExit(f"{command} {spec!r}: {module_name}.{attribute} is {type(agent).__name__}, not an onion Agent")
    return agent


def is_loopback(host: str) -> bool:
    if host in LOOPBACK:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def run(arguments: argparse.Namespace) -> None:
    """Serve the agent until interrupted."""
    import uvicorn

    from onion.stores import RedisStore, SQLiteStore

    from ._app import serve

    token = os.environ.get(arguments.token_env) or None
    if token is None and not is_loopback(arguments.host):
        raise SystemExit(
            f"serve: refusing to listen on {arguments.host} without a token: "
            f"set {arguments.token_env} (or --token-env NAME), or listen on 127.0.0.1"
        )
    agent = load_agent(arguments.agent)
    if arguments.db is not None:
        agent.store = SQLiteStore(arguments.db)
    elif arguments.redis is not None:
        agent.store = RedisStore(arguments.redis)
    uvicorn.run(serve(agent, token=token), host=arguments.host, port=arguments.port, log_level="warning")
