"""Reading a journal back: the run rebuilt from its entries, and the batch its dead worker left unfinished.

The entries are those `onion._durable.journal` writes (`onion._durable.entries` lists them).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .._content import part_from
from .._messages import Message, ToolRequest, Usage
from .._principal import DecisionRecord, Principal
from .._results import ToolResult
from ..errors import OnionError
from .state import PauseKind, Pending

if TYPE_CHECKING:
    from collections.abc import Mapping

    from .._tools import Tool
    from .journal import Journal

INTERRUPTED = (
    "Tool {name} was interrupted: the worker running it stopped before its result was recorded, "
    "so it may or may not have run. Check whether it took effect before calling it again."
)


@dataclass(slots=True)
class Replay:
    """A run rebuilt from its journal: the history, and the batch its worker left unfinished."""

    agent: str
    messages: list[Message]
    state: dict[str, Any]
    steps: int = 0
    usage: Usage = field(default_factory=Usage)
    session: str | None = None
    session_from: int = 0
    principal: Principal | None = None
    """Who the run is for (its start entry's), else None."""
    private: dict[str, Any] = field(default_factory=dict)
    """Layers' own data (`run.private`) as of the latest entry that carried it."""
    decisions: list[DecisionRecord] = field(default_factory=list)
    """Every decision on record, in the order made."""
    unanswered: list[ToolRequest] = field(default_factory=list)
    """The last response's tool calls, when their results are not all in the history."""
    results: dict[str, ToolResult] = field(default_factory=dict)
    """Recorded results of the unanswered calls, by call id."""
    started: set[str] = field(default_factory=set)
    """Unanswered calls that started (so may have run)."""
    decided: dict[str, dict[str, Any] | None] = field(default_factory=dict)
    """Unanswered calls a person approved after a pause: their edited arguments, or None (as the model asked)."""
    decided_pause: tuple[PauseKind, str | None] | None = None
    """A paused model call or run a person decided since the last model entry: its kind, the rejection or None."""

    @property
    def completed(self) -> bool:
        """The last entry is a final answer: the run ended, only its release was lost."""
        last = self.messages[-1] if self.messages else None
        return self.steps > 0 and last is not None and last.role == "assistant" and not last.tool_calls


def pending_batch(replayed: Replay, tools: Mapping[str, Tool], journal: Journal) -> Pending:
    """The batch a dead worker left, for the loop to finish first: recorded results as they were, calls in doubt
    answered as interrupted (held in `journal`; an idempotent tool's call runs again; one whose tool asks or
    reconciles, `@tool(in_doubt=, reconcile=)`, left to the loop: `Pending.in_doubt`), the others to run.

    A run whose last entry is its final answer has nothing left to run (`final`).
    """
    if replayed.completed:
        return Pending({}, [], final=True)
    kind, rejection = replayed.decided_pause or ("tool", None)
    settled: dict[str | None, Message] = {
        call_id: Message.tool(call_id, result.content, result.is_error, untrusted=result.untrusted)
        for call_id, result in replayed.results.items()
    }
    requests, in_doubt = [], []
    for request in replayed.unanswered:
        if request.id in settled:
            continue
        tool = tools.get(request.name)
        edited = replayed.decided.get(request.id)
        asked = request if edited is None else ToolRequest(request.id, request.name, dict(edited))
        if request.id in replayed.started and not (tool is not None and tool.idempotent):
            if tool is not None and (tool.in_doubt or tool.reconcile):
                in_doubt.append(asked)  # a person, or the tool's reconcile, says what it did
                continue
            interrupted = ToolResult(INTERRUPTED.format(name=request.name), is_error=True, call_id=request.id)
            journal.hold_result(request.id, interrupted)
            settled[request.id] = Message.tool(request.id, interrupted.content, True)
        else:
            requests.append(asked)
    approved = bool(replayed.decided)
    return Pending(settled, requests, approved=approved, kind=kind, rejection=rejection, in_doubt=in_doubt)


def replay(run_id: str, entries: list[str]) -> Replay:
    """Rebuild the run `run_id` from its journal entries; `OnionError` if they cannot be read."""
    try:
        first = json.loads(entries[0])
        if first.get("k") != "start":
            raise ValueError("the first entry is not the run's start")
        run = Replay(
            first["agent"],
            [Message.from_dict(m) for m in first["messages"]],
            first["state"],
            steps=first.get("steps", 0),
            usage=Usage(**first.get("usage", {})),
            session=first.get("session"),
            session_from=first.get("session_from", 0),
            principal=None if first.get("principal") is None else Principal.from_dict(first["principal"]),
            private=first.get("private") or {},
            decisions=[DecisionRecord.from_dict(item) for item in first.get("decisions") or ()],
        )
        last = run.messages[-1] if run.messages else None
        if last is not None and last.role == "assistant":
            run.unanswered = list(last.tool_calls)  # a run journaled from where it paused
        for text in entries[1:]:
            _apply(run, json.loads(text))
    except (ValueError, KeyError, TypeError, IndexError) as error:
        raise OnionError(
            f"the journal of run {run_id!r} cannot be read ({type(error).__name__}: {error}); "
            "it was written by another version of onion or edited by hand"
        ) from error
    return run


def _apply(run: Replay, entry: dict[str, Any]) -> None:
    kind = entry["k"]
    if kind == "model":
        before = [Message.from_dict(m) for m in entry["before"]]
        if entry.get("reset"):
            run.messages = before
        else:
            run.messages += before
        response = Message.from_dict(entry["response"])
        run.messages.append(response)
        run.steps += 1
        run.usage.add(Usage(**entry["usage"]))
        run.state = entry["state"]
        if "private" in entry:
            run.private = entry["private"]
        run.unanswered = list(response.tool_calls)
        run.results, run.started, run.decided, run.decided_pause = {}, set(), {}, None
    elif kind == "decided":
        if entry.get("kind", "tool") != "tool":
            run.decided_pause = (entry["kind"], entry["rejected"])
        else:
            run.decided[entry["id"]] = entry["args"]
    elif kind == "decision":
        run.decisions.append(DecisionRecord.from_dict(entry["record"]))
    elif kind == "tool":
        run.started.add(entry["id"])
    elif kind == "result":
        content = entry["content"]
        if isinstance(content, list):
            content = [part_from(part) for part in content]
        run.results[entry["id"]] = ToolResult(
            content, is_error=entry["error"], call_id=entry["id"], untrusted=entry.get("untrusted") is True
        )
    elif kind != "end":  # the run was let go of there: nothing to rebuild
        raise ValueError(f"unknown entry kind {kind!r}")
