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
    serve.add_argument("--namespace", default=None, help="the Redis store's namespace (default: onion)")
    serve.add_argument("--token-env", default="ONION_SERVE_TOKEN", help="the variable holding the token")
    serve.add_argument(
        "--allowed-host",
        action="append",
        dest="allowed_hosts",
        metavar="HOST",
        help="a Host name the server answers (repeat it; default: loopback names without a token, else any)",
    )
    serve.add_argument("--heartbeat", type=float, default=15.0, help="seconds between SSE comments (default 15)")
    serve.add_argument(
        "--keep-events", type=float, default=600.0, help="seconds a streamed run's events stay for reconnects"
    )
    serve.add_argument(
        "--keep-events-bytes",
        type=int,
        default=64 * 2**20,
        help="the most bytes of ended runs' events kept in memory for reconnects (default 64 MiB)",
    )
    serve.add_argument("--notify", metavar="URL", help="a webhook (Slack, Teams, yours) told when a run pauses")
    serve.add_argument("--notify-page", metavar="URL", help="the page's public address, for the webhook's link")
    serve.add_argument(
        "--traces", type=int, default=100, help="how many runs' traces the page links to are kept (default 100)"
    )


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
    if arguments.namespace is not None and arguments.redis is None:
        raise SystemExit("serve: --namespace names a Redis store's namespace: give --redis URL too")
    agent = load_agent(arguments.agent)
    if arguments.db is not None:  # the agent kept in the store the flag names, beside the module's own
        agent = agent._kept_in(SQLiteStore(arguments.db))
    elif arguments.redis is not None:
        agent = agent._kept_in(RedisStore(arguments.redis, namespace=arguments.namespace or "onion"))
    app = serve(
        agent,
        token=token,
        allowed_hosts=arguments.allowed_hosts,
        heartbeat=arguments.heartbeat,
        keep_events=arguments.keep_events,
        keep_events_bytes=arguments.keep_events_bytes,
        notify=arguments.notify,
        notify_page=arguments.notify_page,
        traces=arguments.traces,
    )
    print(up_line(arguments, agent, token is not None), flush=True)
    uvicorn.run(app, host=arguments.host, port=arguments.port, log_level="warning")


def up_line(arguments: argparse.Namespace, agent: Agent[Any], has_token: bool) -> str:
    """The one line printed when the server starts: where, on which store, and what the token means."""
    host = f"[{arguments.host}]" if ":" in arguments.host else arguments.host
    if arguments.db is not None:
        store = f"SQLite {arguments.db}"
    elif arguments.redis is not None:
        store = f"Redis namespace {arguments.namespace or 'onion'}"
    else:
        store = "no store (runs live in memory; nothing to list or decide)"
    if has_token:
        who = f"token from ${arguments.token_env}: every request needs it"
    else:
        who = "no token: anyone who can reach this address may run and decide (loopback only)"
    return f"onion: serving agent {agent.name} on http://{host}:{arguments.port} ({store}; {who})"
