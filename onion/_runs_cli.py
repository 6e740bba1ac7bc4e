"""`python -m onion runs`: list the runs a store holds, or show one, with secrets redacted.

What is printed comes from the journal (model text, tool results, session
ids): every control character in it is escaped, so none reaches the terminal.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from ._journal import replay
from ._messages import Message
from ._state import RunState
from .stores import RunRecord, SQLiteStore


async def list_runs(db: Path, *, limit: int = 100, now: float | None = None) -> str:
    """A table of the runs in the store at `db`, most recently updated first.

    PENDING counts the calls waiting: for a paused run, for a decision; for
    a run whose worker died or that failed, calls without a recorded result.
    """
    async with _open(db) as store:
        records = await store.runs(limit=limit)
        for record in records:
            if record.status in ("running", "failed"):
                record.pending = len(_history(record, await store.journal(record.run_id))[1])
    if not records:
        return f"no runs in {db}"
    now = time.time() if now is None else now
    rows = [("RUN", "STATUS", "PENDING", "AGE", "AGENT", "SESSION")]
    rows += [
        (r.run_id, _status(r, now), str(r.pending), _age(now - r.created), r.agent, r.session or "") for r in records
    ]
    cells = [[_printable(cell) for cell in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in cells)


async def show_run(db: Path, run_id: str, *, now: float | None = None) -> str:
    """One run: its record, its history and its pending (or unfinished) calls, secrets redacted."""
    async with _open(db) as store:
        record = await store.run_record(run_id)
        if record is None:
            raise SystemExit(f"no run {run_id!r} in {db}")
        entries = await store.journal(run_id)
    now = time.time() if now is None else now
    lines = [
        f"run      {record.run_id}",
        f"status   {_status(record, now)}",
        f"agent    {record.agent}",
        f"age      {_age(now - record.created)} (updated {_age(now - record.updated)} ago)",
    ]
    if record.session:
        lines.append(f"session  {record.session}")
    messages, pending = _history(record, entries)
    lines.append("")
    lines.append(f"history ({len(messages)} messages)")
    lines += [_line(index, message) for index, message in enumerate(messages)]
    if pending:
        lines.append("")
        lines.append(f"pending calls ({len(pending)})")
        lines += pending
    return "\n".join(map(_printable, lines))


def _history(record: RunRecord, entries: list[str]) -> tuple[list[Message], list[str]]:
    """The messages, and a line per call still waiting (secrets redacted): from the saved state when paused, else
    the journal."""
    if record.status == "paused" and record.state:
        state = RunState.from_json(record.state)
        pending = [f"{c.id}  {c.name}({_args(c.args)})  paused: {_scrubbed(c.reason)}" for c in state.pending]
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


def _line(index: int, message: Message) -> str:
    text = _scrubbed(message.text)
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
    from middleware.patterns import scrub_value

    return json.dumps(scrub_value(args), ensure_ascii=False, sort_keys=True)[1:-1]


def _scrubbed(text: str) -> str:
    """`text` with its secrets hidden; JSON within it as data (a value under a secret's name is hidden whole),
    wherever it starts (`config: {"password": ...}` too)."""
    from middleware.patterns import scrub, scrub_value

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


def _printable(text: str) -> str:
    """`text` with every character that is not printable (C0 and C1 controls, ESC, DEL, bidi marks) escaped."""
    return text if text.isprintable() else "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _status(record: RunRecord, now: float) -> str:
    if record.status == "running" and record.lease_expires is not None and record.lease_expires <= now:
        return "running (lease expired: resumable)"
    return record.status


def _age(seconds: float) -> str:
    seconds = max(0.0, seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f}{unit}"
    return f"{seconds:.0f}s"


def _open(db: Path) -> SQLiteStore:
    if not db.exists():
        raise SystemExit(f"no store at {db}: pass the SQLite file the agents use, --db PATH")
    return SQLiteStore(db)
