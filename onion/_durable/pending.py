"""A paused run's pending calls (`PendingCall`), the batch it goes on with first (`Pending`), and where it paused."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from .._messages import Message, ToolRequest

Decision = Literal["approved", "edited", "rejected", "resolved"]
PauseKind = Literal["tool", "model", "budget", "run", "in_doubt"]

LONE_KINDS = ("model", "budget", "run")
"""The kinds of pause that are a state's only pending call: a model call (`"budget"`: one a spending line paused)
or a run; `"tool"` and `"in_doubt"` are calls of a batch."""


@dataclass(slots=True)
class PendingCall:
    """A call of a paused run, waiting for a person's decision (`RunState.approve`, `edit`, `reject`, `resolve`).

    `kind` is `"tool"` (`name` and `args` as the model asked), `"in_doubt"` (a tool call that started and has no
    recorded result: it may have run), `"model"` (`name` is the model's; `"budget"`: one a spending line paused)
    or `"run"` (`name` is the agent's); a paused model call or run is its state's only pending call and has no
    arguments. `result` is what a person recorded for an in-doubt call (`resolve`).
    """

    id: str
    name: str
    args: dict[str, Any]
    reason: str
    decision: Decision | None = None
    edited_args: dict[str, Any] | None = None
    rejection: str | None = None
    kind: PauseKind = "tool"
    result: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The call as JSON for a person or a client (`GET /runs`, `onion.temporal.pending`): `kind` "tool" (a tool
        call), "in_doubt" (a tool call that may have run), "model" or "budget" (a paused model call, `name` the
        model's) or "run" (a paused run, `name` the agent's); only a tool call has arguments to edit. Its decision
        is not part of it."""
        return {"id": self.id, "kind": self.kind, "name": self.name, "args": self.args, "reason": self.reason}


@dataclass(slots=True)
class Pending:
    """The one batch a run goes on with first: a paused batch decided, or what a dead worker left.

    `settled` answers calls already; `requests` still run, through the tools chain. `final`: the last message
    is the final answer. `kind` `"model"`, `"budget"` or `"run"`: a decided pause of that kind (`rejection` if
    rejected).
    """

    settled: dict[str | None, Message]
    requests: list[ToolRequest]
    approved: bool = False
    final: bool = False
    kind: PauseKind = "tool"
    rejection: str | None = None
    in_doubt: list[ToolRequest] = field(default_factory=list)
    """Calls that started and have no recorded result, of tools that ask a person or reconcile (`@tool(in_doubt=,
    reconcile=)`): the loop settles each before the batch goes on."""


@dataclass(slots=True)
class PausedBatch:
    """Where a run paused: the answers its last batch already has, and the calls still pending."""

    answered: list[Message]
    pending: list[PendingCall]
    batch: str
    """Names this pause: a resume consumes it, so the same decisions delivered again are refused."""


def field_of(data: dict[str, Any], key: str, kind: type) -> Any:
    if key not in data:
        raise ValueError(f"{key!r} is missing")
    value = data[key]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ValueError(f"{key!r} must be {kind.__name__}, not {type(value).__name__}")
    return value


def pending_from(data: Any) -> PendingCall:
    if not isinstance(data, dict):
        raise ValueError(f"a pending call must be a dict, not {type(data).__name__}")
    decision = data.get("decision")
    if decision not in (None, "approved", "edited", "rejected", "resolved"):
        raise ValueError(f"pending call decision {decision!r} is not approved, edited, rejected, resolved or null")
    edited = data.get("edited_args")
    rejection = data.get("rejection")
    result = data.get("result")
    if not (edited is None or isinstance(edited, dict)) or not all(
        text is None or isinstance(text, str) for text in (rejection, result)
    ):
        raise ValueError("a pending call's edited_args must be a dict or null, its rejection and result a str or null")
    kind = data.get("kind", "tool")
    if kind not in ("tool", "in_doubt", *LONE_KINDS):
        raise ValueError(f"pending call kind {kind!r} is not tool, in_doubt, model, budget or run")
    return PendingCall(
        field_of(data, "id", str),
        field_of(data, "name", str),
        field_of(data, "args", dict),
        field_of(data, "reason", str),
        decision,
        edited,
        rejection,
        kind,
        result,
    )


def not_editable(kind: str) -> str:
    """Why a pending call of `kind` (not `"tool"`) has no edit, and what to do instead."""
    if kind == "in_doubt":
        return "may have run already, so it is not run with other arguments; approve, reject or resolve it"
    return f"is a paused {kind}, which has no arguments to edit; approve or reject it"
