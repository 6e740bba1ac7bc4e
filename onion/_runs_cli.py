"""`python -m onion runs`: list the runs a store holds, or show one, with secrets redacted.

What is printed comes from the journal (model text, tool results, session
ids): every control character in it is escaped, so none reaches the terminal.
The subcommands that change runs (approve, reject, edit, resolve, resume,
delete, purge) are in `_runs_actions.py`, what their arguments mean in
`_runs_args.py`; those that check or export journals
(verify, export), in `_runs_audit.py`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from types import EllipsisType
from typing import Any

from ._durable.replay import replay
from ._durable.state import RunState
from ._messages import Message
from ._principal import DecisionRecord, Principal
from ._runs_args import arguments_json, decisions_of, duration
from .errors import OnionError
from .stores import RedisStore, RunRecord, SQLiteStore, Store

Where = Path | Store
"""An SQLite file (opened and closed here), or a store the caller opened."""


class Refused(Exception):
    """What the operator must fix, or why nothing was done: printed as one line (control characters escaped)."""

    def __init__(self, message: str) -> None:
        super().__init__(printable(message))


class CheckFailed(Exception):
    """What a check found wrong, a line per finding (each printable already): printed, and the command exits 1."""


async def list_runs(
    where: Where,
    *,
    limit: int = 100,
    now: float | None = None,
    tenant: str | EllipsisType | None = ...,
    status: str | None = None,
) -> str:
    """A table of the runs in the store `where`, most recently updated first; with `tenant`, only its runs
    (`None`: the runs of no tenant), as `store.runs(tenant=...)` filters them; with `status`, only the runs of
    the `limit` most recently updated that have it.

    PENDING counts the calls waiting: for a paused run, for a decision; for
    a run whose worker died or that failed, calls without a recorded result.
    """
    async with opened(where) as store:
        records = await (store.runs(limit=limit) if tenant is ... else store.runs(limit=limit, tenant=tenant))
        records = [record for record in records if status is None or record.status == status]
        for record in records:
            if record.status in ("running", "failed"):
                record.pending = len(_history(record, await store.journal(record.run_id))[1])
    if not records:
        of = "" if tenant is ... else " without a tenant" if tenant is None else f" of tenant {tenant!r}"
        which = "runs" if status is None else f"{status} runs"
        return printable(f"no {which}{of} in {label(where)}")
    now = time.time() if now is None else now
    rows = [("RUN", "STATUS", "PENDING", "AGE", "AGENT", "SESSION")]
    rows += [
        (r.run_id, status_of(r, now), str(r.pending), age(now - r.created), r.agent, r.session or "") for r in records
    ]
    cells = [[printable(cell) for cell in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in cells)


async def show_run(where: Where, run_id: str, *, now: float | None = None) -> str:
    """One run: its record, its history and its pending (or unfinished) calls, secrets redacted."""
    async with opened(where) as store:
        record = await store.run_record(run_id)
        if record is None:
            raise Refused(f"no run {run_id!r} in {label(where)}: `python -m onion runs` lists them")
        entries = await store.journal(run_id)
    now = time.time() if now is None else now
    lines = [
        f"run      {record.run_id}",
        f"status   {status_of(record, now)}",
        f"agent    {record.agent}",
        f"age      {age(now - record.created)} (updated {age(now - record.updated)} ago)",
    ]
    if record.session:
        lines.append(f"session  {record.session}")
    replayed = replay(run_id, entries) if entries else None
    if replayed is not None and replayed.principal is not None:
        lines.append(f"principal {_who(replayed.principal, roles=True)}")
    messages, pending = _history(record, entries)
    lines.append("")
    lines.append(f"history ({len(messages)} messages)")
    lines += [_line(index, message) for index, message in enumerate(messages)]
    if pending:
        lines.append("")
        lines.append(f"pending calls ({len(pending)})")
        lines += pending
    if replayed is not None and replayed.decisions:
        lines.append("")
        lines.append(f"decisions ({len(replayed.decisions)})")
        lines += [_decision(decision) for decision in replayed.decisions]
    return "\n".join(map(printable, lines))


def _history(record: RunRecord, entries: list[str]) -> tuple[list[Message], list[str]]:
    """The messages, and a line per call still waiting (secrets redacted): from the saved state when paused, else
    the journal."""
    if record.status == "paused" and record.state:
        state = RunState.from_json(record.state)
        pending = [
            f"{c.id}  {c.name}({_args(c.args)})  {WAITS.get(c.kind, 'paused')}: {scrubbed(c.reason)}"
            for c in state.pending
        ]
        return [*state.messages, *state.answered], pending
    if not entries:
        return [], []
    replayed = replay(record.run_id, entries)
    messages = list(replayed.messages)
    pending = []
    for request in replayed.unanswered:
        result = replayed.results.get(request.id)
        if result is not None:
            messages.append(Message.tool(request.id, result.content, result.is_error))
            continue
        where = "started, no result recorded (in doubt)" if request.id in replayed.started else "not started"
        pending.append(f"{request.id}  {request.name}({_args(request.args)})  {where}")
    return messages, pending


WAITS = {"in_doubt": "may have run", "budget": "paused (budget)"}
"""How `runs show` names a pending call's wait, by kind (else "paused")."""


def _who(principal: Principal | None, *, roles: bool = False) -> str:
    """A principal as `runs show` names it: its id, tenant and (`roles`) roles; never its attrs."""
    if principal is None:
        return "(no principal given)"
    about = [] if principal.tenant is None else [f"tenant {principal.tenant}"]
    if roles and principal.roles:
        about.append(f"roles {', '.join(sorted(principal.roles))}")
    return scrubbed(principal.id + (f" ({', '.join(about)})" if about else ""))


def _decision(record: DecisionRecord) -> str:
    """One decision on record: the call, what, who and when; an edit's arguments or a rejection's reason, then
    what the person was told, last, each cut at 200 characters after redacting."""
    line = f"{record.call_id}  {record.decision}  by {_who(record.by)}  at {record.at}"
    if record.args is not None:
        line += f"  args {_cut(_args(record.args))}"
    if record.reason is not None:
        line += f"  reason {_cut(scrubbed(record.reason))}"
    if record.asked is not None:
        line += f"  asked {_cut(scrubbed(record.asked))}"
    return line


def _cut(text: str) -> str:
    return text if len(text) <= 200 else text[:200] + "…"


def _line(index: int, message: Message) -> str:
    text = scrubbed(message.text)
    if len(text) > 200:
        text = text[:200] + "…"
    parts = [f"{index:>3} {message.role:<9}"]
    if message.tool_call_id:
        parts.append(f"[{message.tool_call_id}]" + (" error" if message.is_error else ""))
    if text:
        parts.append(text)
    parts += [f"-> {c.name}({_args(c.args)}) [{c.id}]" for c in message.tool_calls]
    return " ".join(parts)


def _args(args: dict[str, Any]) -> str:
    from onion.scrub import scrub_value

    return json.dumps(scrub_value(args), ensure_ascii=False, sort_keys=True)[1:-1]


def scrubbed(text: str) -> str:
    """`text` with its secrets hidden; JSON within it as data (a value under a secret's name is hidden whole),
    wherever it starts (`config: {"password": ...}` too)."""
    from onion.scrub import scrub, scrub_value

    decoder, parts, at = json.JSONDecoder(), [], 0
    for start, char in enumerate(text):
        if start < at or char not in "{[":
            continue
        try:
            value, end = decoder.raw_decode(text, start)
        except ValueError:
            continue
        parts += [scrub(text[at:start]), json.dumps(scrub_value(value), ensure_ascii=False)]
        at = end
    return "".join(parts) + scrub(text[at:])


def printable(text: str) -> str:
    """`text` with every character that is not printable (C0 and C1 controls, ESC, DEL, bidi marks) escaped."""
    return text if text.isprintable() else "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def status_of(record: RunRecord, now: float) -> str:
    if record.status == "running" and record.lease_expires is not None and record.lease_expires <= now:
        return "running (lease expired: resumable)"
    return record.status


def age(seconds: float) -> str:
    seconds = max(0.0, seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f}{unit}"
    return f"{seconds:.0f}s"


@asynccontextmanager
async def opened(where: Where) -> AsyncIterator[Store]:
    """The store `where` names: an SQLite file must exist (no empty store is created) and is closed after."""
    if not isinstance(where, Path):
        yield where
        return
    if not where.exists():
        raise Refused(f"no store at {where}: pass the SQLite file the agents use, --db PATH")
    async with SQLiteStore(where) as store:
        yield store


def label(where: Where) -> str:
    """The store as messages name it (a Redis URL with its password hidden)."""
    return str(where) if isinstance(where, Path) else repr(where).strip("<>")


# -- the command line ------------------------------------------------------------------------------------------------

STATUSES = ("running", "paused", "completed", "failed")
DECIDING = ("approve", "reject", "edit", "resolve", "resume")


def add_parser(commands: Any) -> None:
    """The `runs` subcommand and its actions."""
    runs = commands.add_parser("runs", help="list, show, decide, resume or delete the runs in a store")
    store_options(runs, None)
    runs.add_argument("--tenant", metavar="TENANT", help="list only the runs of this tenant")
    runs.add_argument("--status", choices=STATUSES, help="list only the runs in this status")
    actions = runs.add_subparsers(dest="action")
    show = actions.add_parser("show", help="print one run: its history and pending calls, secrets redacted")
    show.add_argument("run_id")
    approve = actions.add_parser("approve", help="approve a paused run's calls (all of them when none is named)")
    approve.add_argument("run_id")
    approve.add_argument("calls", nargs="*", metavar="CALL", help="the call ids to approve (default: every one)")
    reject = actions.add_parser("reject", help="reject a paused run's calls: the model reads the reason")
    reject.add_argument("run_id")
    reject.add_argument("calls", nargs="+", metavar="CALL")
    reject.add_argument("--reason", required=True, help="what the model reads instead of the tool's result")
    edit = actions.add_parser("edit", help="run a paused call with other arguments (this approves it)")
    edit.add_argument("run_id")
    edit.add_argument("call", metavar="CALL")
    edit.add_argument("--args", required=True, type=arguments_json, help="the arguments, a JSON object")
    resolve = actions.add_parser("resolve", help="record what a call that may have run did, as you checked it")
    resolve.add_argument("run_id")
    resolve.add_argument("call", metavar="CALL")
    resolve.add_argument("--result", required=True, help="what the call did: the model reads it as its result")
    for parser in (reject, edit, resolve):
        parser.add_argument("--approve-rest", action="store_true", help="approve the other pending calls")
    resume = actions.add_parser("resume", help="go on with a run that failed or whose worker died")
    resume.add_argument("run_id")
    remove = actions.add_parser("delete", help="forget a run and its journal")
    remove.add_argument("run_id")
    purge_ = actions.add_parser("purge", help="delete the completed and failed runs not updated for a while")
    purge_.add_argument("--older-than", required=True, type=duration, metavar="DURATION", help="e.g. 7d, 12h")
    purge_.add_argument("--all", action="store_true", help="paused and running runs too")
    verify_ = actions.add_parser(
        "verify", help="check that journals are as written: nothing altered, removed, inserted"
    )
    which = verify_.add_mutually_exclusive_group(required=True)
    which.add_argument("run_id", nargs="?", metavar="RUN_ID", help="the run to check")
    which.add_argument("--all", action="store_true", help="every run in the store")
    verify_.add_argument(
        "--key-env",
        action="append",
        default=[],
        metavar="NAME",
        help="the environment variable holding the agents' state_key (once per key while keys are rolled)",
    )
    export = actions.add_parser("export", help="write a run's journal as JSON lines (decisions: who, when, what)")
    export.add_argument("run_id")
    for name, parser in actions.choices.items():
        store_options(parser, argparse.SUPPRESS)
        if name in DECIDING:
            parser.add_argument("--agent", required=True, help="the agent that runs it: module:attribute")
        if name in DECIDING[:4]:
            parser.add_argument("--as", dest="by", metavar="NAME", help="who decides, on record (default: your login)")


def store_options(parser: argparse.ArgumentParser, default: Any) -> None:
    parser.add_argument("--db", type=Path, default=default, help="the SQLite store (default: onion.db)")
    parser.add_argument("--redis", default=default, metavar="URL", help="a Redis store (redis://host:6379/0)")
    parser.add_argument("--namespace", default=default, help="the Redis store's namespace (default: onion)")


def run(arguments: argparse.Namespace) -> None:
    """Carry out `python -m onion runs ...`: print what it did, or exit with one line saying what went wrong."""
    command = f"runs {arguments.action}" if arguments.action else "runs"
    try:
        print(asyncio.run(carried_out(arguments)))
    except CheckFailed as failed:
        print(failed)
        raise SystemExit(1) from None
    except Refused as refused:
        raise SystemExit(f"{command}: {refused}") from None
    except Exception as error:  # a store down or damaged, a call not pending: one line, never a traceback
        what = str(error) if isinstance(error, OnionError) else f"{type(error).__name__}: {error}"
        raise SystemExit(printable(f"{command}: {scrubbed(what)}")) from None


async def carried_out(arguments: argparse.Namespace) -> str:
    where = store_named(arguments)
    try:
        async with opened(where) as store:
            return await carry_out(arguments, store)
    finally:
        if not isinstance(where, Path):
            await where.aclose()


async def carry_out(arguments: argparse.Namespace, store: Store) -> str:
    action, run_id = arguments.action, getattr(arguments, "run_id", "")
    if arguments.tenant is not None and action:
        raise Refused(f"--tenant lists one tenant's runs: give it without {action!r}")
    if arguments.status is not None and action:
        raise Refused(f"--status lists the runs in one status: give it without {action!r}")
    if action in DECIDING:
        from .serve._cli import load_agent

        try:
            agent = load_agent(arguments.agent, command="--agent")
        except SystemExit as error:
            raise Refused(str(error)) from None
        try:
            from ._runs_actions import decide, recover

            kept = agent._kept_in(store)  # beside the agent: the module's agent is not changed
            if action == "resume":
                return await recover(kept, run_id)
            return await decide(kept, run_id, decisions_of(arguments), by=arguments.by)
        finally:
            await agent.aclose()
    if action == "show":
        return await show_run(store, run_id)
    if action in ("verify", "export"):
        from ._runs_audit import export_run, keys_named, verify_runs

        if action == "export":
            return await export_run(store, run_id)
        return await verify_runs(store, run_id, keys_named(arguments.key_env))
    from ._runs_actions import delete, purge

    if action == "delete":
        return await delete(store, run_id)
    if action == "purge":
        return await purge(store, arguments.older_than, every_status=arguments.all)
    return await list_runs(store, tenant=... if arguments.tenant is None else arguments.tenant, status=arguments.status)


def store_named(arguments: argparse.Namespace) -> Path | RedisStore:
    """The store `--db` or `--redis` (with `--namespace`) names; onion.db when neither does."""
    if arguments.redis is not None and arguments.db is not None:
        raise Refused("give --db FILE or --redis URL, not both")
    if arguments.redis is None:
        if arguments.namespace is not None:
            raise Refused("--namespace names a Redis store's namespace: give --redis URL too")
        return Path("onion.db") if arguments.db is None else Path(arguments.db)
    return RedisStore(arguments.redis, namespace=arguments.namespace or "onion")
