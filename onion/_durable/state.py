"""`RunState`: a run that paused for approval (or finished), as data that outlives the process.

`RunResult.to_state()` takes one; `to_json()` / `RunState.from_json(text)` carry
it to any process; `approve`, `reject` and `edit` decide its pending calls;
`agent.resume(state)` goes on from it (what a resume checks: `onion._durable.trust`).
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Literal

from .._messages import Message, Usage
from .._principal import DecisionRecord, Principal
from ..errors import RunStateError
from .pending import LONE_KINDS as LONE_KINDS
from .pending import Decision as Decision
from .pending import PausedBatch as PausedBatch
from .pending import PauseKind as PauseKind
from .pending import Pending as Pending
from .pending import PendingCall as PendingCall
from .pending import field_of as _field
from .pending import not_editable as not_editable
from .pending import pending_from as _pending

VERSION = 1
"""The version `to_json` writes and `from_json` reads."""

Status = Literal["completed", "paused"]


class RunState:
    """Everything a run needs to go on in another process (each field: `docs/durable.md`, "The state as JSON").

    `messages` ends with the assistant message whose batch paused; `answered` holds that batch's results so
    far, `pending` the calls waiting for a decision.
    """

    __slots__ = (
        "agent",
        "answered",
        "batch",
        "decisions",
        "injected",
        "input",
        "messages",
        "output",
        "pending",
        "principal",
        "private",
        "run_id",
        "session",
        "session_from",
        "signature",
        "signed_at",
        "state",
        "status",
        "steps",
        "stored",
        "usage",
    )

    def __init__(
        self,
        *,
        run_id: str,
        agent: str,
        status: Status,
        messages: list[Message],
        input: str | Message | list[Message] | None = None,
        answered: list[Message] | None = None,
        pending: list[PendingCall] | None = None,
        injected: list[Message] | None = None,
        steps: int = 0,
        usage: Usage | None = None,
        state: dict[str, Any] | None = None,
        output: str = "",
        private: dict[str, Any] | None = None,
        batch: str | None = None,
        session: str | None = None,
        session_from: int = 0,
        signature: str | None = None,
        principal: Principal | None = None,
        decisions: list[DecisionRecord] | None = None,
        signed_at: str | None = None,
        stored: bool = False,
    ) -> None:
        self.run_id = run_id
        self.agent = agent
        self.status: Status = status
        self.messages = messages
        self.input = input
        self.answered = answered if answered is not None else []
        self.pending = pending if pending is not None else []
        self.injected = injected if injected is not None else []
        self.steps = steps
        self.usage = usage if usage is not None else Usage()
        self.state = state if state is not None else {}
        self.output = output
        self.private = private if private is not None else {}
        self.batch = batch
        self.session = session
        self.session_from = session_from
        self.signature = signature
        self.principal = principal
        """Who the run is for (`agent.run(..., principal=)`), else None; signed with the rest."""
        self.decisions = decisions if decisions is not None else []
        """Every decision on the run's paused calls so far, on record (who, when, what)."""
        self.signed_at = signed_at
        """When the state was signed (UTC, ISO 8601), signed with the rest; None when it is not signed."""
        self.stored = stored
        """The run paused in a store, which keeps it: it goes on only from there (signed with the rest)."""

    @property
    def paused(self) -> bool:
        return self.status == "paused"

    # -- deciding --------------------------------------------------------------

    def approve(self, call_id: str) -> None:
        """Let the pending call `call_id` run, with its arguments, when the run resumes."""
        self._decide(call_id, "approved")

    def approve_all(self) -> None:
        """Approve every pending call that has no decision yet."""
        for call in self.pending:
            if call.decision is None:
                call.decision = "approved"

    def reject(self, call_id: str, reason: str = "not approved") -> None:
        """Do not run `call_id`: the model gets an error result carrying `reason`."""
        self._decide(call_id, "rejected").rejection = reason

    def edit(self, call_id: str, args: dict[str, Any]) -> None:
        """Run `call_id` with `args` instead of the model's arguments (this approves it)."""
        if not isinstance(args, dict):
            raise TypeError(f"edit({call_id!r}, args): args must be a dict of arguments, not {type(args).__name__}")
        for call in self.pending:
            if call.id == call_id and call.kind != "tool":
                raise RunStateError(f"run {self.run_id}: {call_id} {not_editable(call.kind)}")
        self._decide(call_id, "edited").edited_args = dict(args)

    def resolve(self, call_id: str, result: str) -> None:
        """Answer the in-doubt call `call_id` with `result`, what a person checked it did: it does not run again."""
        if not isinstance(result, str):
            raise TypeError(f"resolve({call_id!r}, result): result is the text the model reads, not {type(result)}")
        for call in self.pending:
            if call.id == call_id and call.kind != "in_doubt":
                raise RunStateError(
                    f"run {self.run_id}: {call_id} is a paused {call.kind}, not a call that may have run: "
                    "only an in-doubt call is resolved with its result; approve or reject it"
                )
        self._decide(call_id, "resolved").result = result

    def _decide(self, call_id: str, decision: Decision) -> PendingCall:
        for call in self.pending:
            if call.id == call_id:
                call.decision, call.edited_args, call.rejection, call.result = decision, None, None, None
                return call
        waiting = ", ".join(f"{c.id} ({c.name})" for c in self.pending) or "none"
        raise RunStateError(f"run {self.run_id} has no pending call {call_id!r}; its pending calls: {waiting}")

    # -- JSON ------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The state as JSON-able data, with a top-level `"version"`."""
        return {
            "version": VERSION,
            "run_id": self.run_id,
            "agent": self.agent,
            "status": self.status,
            "input": _input_data(self.input),
            "messages": [m.to_dict() for m in self.messages],
            "answered": [m.to_dict() for m in self.answered],
            "pending": [dataclasses.asdict(call) for call in self.pending],
            "injected": [m.to_dict() for m in self.injected],
            "steps": self.steps,
            "usage": self.usage.to_dict(),
            "state": self.state,
            "output": self.output,
            "private": self.private,
            "batch": self.batch,
            "session": self.session,
            "session_from": self.session_from,
            "signature": self.signature,
            "principal": None if self.principal is None else self.principal.to_dict(),
            "decisions": [record.to_dict() for record in self.decisions],
            "signed_at": self.signed_at,
            "stored": self.stored,
        }

    def to_json(self) -> str:
        """The state as JSON text, for a file, a database or a queue; `RunState.from_json` reads it."""
        try:
            return json.dumps(self.to_dict(), ensure_ascii=False)
        except (TypeError, ValueError) as error:
            raise RunStateError(
                f"run {self.run_id} cannot be written as JSON ({error}): keep run.state and message meta plain data"
            ) from None

    @classmethod
    def from_json(cls, text: str | bytes) -> RunState:
        """The state `to_json` wrote. Raises `RunStateError` for text that is not one, saying why."""
        if not isinstance(text, str | bytes | bytearray):
            raise TypeError(f"RunState.from_json takes the JSON text, not {type(text).__name__}")
        try:
            data = json.loads(text)
        except ValueError as error:
            raise RunStateError(
                f"the run state is not valid JSON ({error}): it is corrupt or truncated; "
                "load the whole text that RunState.to_json() wrote"
            ) from None
        return cls.from_dict(data)

    @classmethod
    def from_dict(cls, data: Any) -> RunState:
        """The state `to_dict` made; raises `RunStateError` naming what is wrong."""
        if not isinstance(data, dict) or "version" not in data:
            raise RunStateError(
                "this is not an onion run state (no top-level 'version'); pass what RunState.to_json() wrote"
            )
        version = data["version"]
        if version != VERSION:
            raise RunStateError(
                f"run state version {version!r} is not supported: this onion reads version {VERSION}; "
                "resume it with the onion release that saved it"
            )
        try:
            status = _field(data, "status", str)
            if status not in ("completed", "paused"):
                raise ValueError(f"'status' must be 'completed' or 'paused', not {status!r}")
            return cls(
                run_id=_field(data, "run_id", str),
                agent=_field(data, "agent", str),
                status=status,
                input=_input_from(data.get("input")),
                messages=_messages(data, "messages"),
                answered=_messages(data, "answered"),
                pending=[_pending(item) for item in _field(data, "pending", list)],
                injected=_messages(data, "injected"),
                steps=_field(data, "steps", int),
                usage=Usage(**{key: int(value) for key, value in _field(data, "usage", dict).items()}),
                state=_field(data, "state", dict),
                output=_field(data, "output", str),
                private=_field(data, "private", dict) if "private" in data else {},
                batch=_optional(data, "batch", str),
                session=_optional(data, "session", str),
                session_from=_optional(data, "session_from", int) or 0,
                signature=_optional(data, "signature", str),
                principal=None if data.get("principal") is None else Principal.from_dict(data["principal"]),
                decisions=[DecisionRecord.from_dict(item) for item in data.get("decisions") or ()],
                signed_at=_optional(data, "signed_at", str),
                stored=_optional(data, "stored", bool) or False,
            )
        except (ValueError, TypeError) as error:
            raise RunStateError(f"the run state is damaged: {error}; pass what RunState.to_json() wrote") from None

    def __repr__(self) -> str:
        return f"<RunState {self.run_id} {self.status} pending={[c.name for c in self.pending]}>"


def plain_state(state: dict[str, Any]) -> dict[str, Any]:
    """A JSON copy of `run.state`; `RunStateError` names the first key whose value is not JSON data."""
    try:
        copied: dict[str, Any] = json.loads(json.dumps(state))
        return copied
    except (TypeError, ValueError):
        for key, value in state.items():
            try:
                json.dumps({key: value})
            except (TypeError, ValueError) as error:
                raise RunStateError(
                    f"run.state[{key!r}] is not JSON-serialisable ({error}); a paused run is saved as JSON: "
                    "keep plain data (str, numbers, bools, None, lists, dicts) in run.state, "
                    "or remove that key before the run pauses"
                ) from None
        raise


def _input_data(value: str | Message | list[Message] | None) -> Any:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, Message):
        return value.to_dict()
    return [m.to_dict() for m in value]


def _input_from(data: Any) -> str | Message | list[Message] | None:
    if data is None or isinstance(data, str):
        return data
    if isinstance(data, dict):
        return Message.from_dict(data)
    if isinstance(data, list):
        return [Message.from_dict(item) for item in data]
    raise ValueError(f"'input' must be a str, a message or a list of messages, not {type(data).__name__}")


def _optional(data: dict[str, Any], key: str, kind: type) -> Any:
    return None if data.get(key) is None else _field(data, key, kind)


def _messages(data: dict[str, Any], key: str) -> list[Message]:
    messages = []
    for index, item in enumerate(_field(data, key, list)):
        try:
            messages.append(Message.from_dict(item))
        except ValueError as error:
            raise ValueError(f"{key}[{index}]: {error}") from None
    return messages
