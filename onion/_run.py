"""A whole run: `Call` (the base of the four contexts), `Run` and its outcome `RunResult`."""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import threading
from collections.abc import Callable
from typing import Any, ClassVar, Generic, Literal

from typing_extensions import TypeVar

from . import clock
from ._durable.state import PausedBatch, Pending, PendingCall, RunState, plain_state
from ._durable.trust import sign, signing_keys
from ._messages import Message, Usage
from ._output import OutputSchema, output_schema
from ._principal import DecisionRecord, Principal, checked
from .errors import RunStateError
from .types import AgentLike, JournalLike

OutputT = TypeVar("OutputT", default=str)
"""The type of a run's final output (`output_type`); `str` unless one is given."""

_run_ids = itertools.count(1)
_QUEUEING = threading.Lock()
_PROCESS = os.urandom(4).hex()
"""Makes run ids unique across processes, so a saved run never shares its id with a new one."""


def _forked() -> None:
    """A process forked after `import onion` (a pre-fork server's worker) draws its own run ids."""
    global _PROCESS
    _PROCESS = os.urandom(4).hex()


os.register_at_fork(after_in_child=_forked)


class Call:
    """Base of the four contexts; `kind` says which one, `run` is the run it belongs to."""

    __slots__ = ("run",)
    kind: ClassVar[str] = "call"
    run: Run


class Run(Call):
    """One whole `agent.run(...)`.

    `output_type` is the type the final answer is validated as (`str`: the
    answer text as is).
    """

    __slots__ = (
        "__weakref__",
        "_id",
        "_injected",
        "_output",
        "_paused",
        "_pending",
        "_principal",
        "_private",
        "_state",
        "agent",
        "approved",
        "decisions",
        "emit",
        "input",
        "journal",
        "messages",
        "output_type",
        "session",
        "session_from",
        "steps",
        "usage",
    )
    kind: ClassVar[str] = "run"

    def __init__(
        self,
        agent: AgentLike,
        input: Any,
        messages: list[Message],
        state: dict[str, Any] | None = None,
        output_type: Any = str,
        principal: Principal | None = None,
    ) -> None:
        self.agent = agent
        self._principal = checked(principal)
        self.input = input
        self.messages = messages
        self._state = state
        self._private: dict[str, Any] | None = None
        self.usage = Usage()
        self.session: str | None = None
        """The id of the session the run is on (`agent.run(..., session=...)`), else None."""
        self.session_from = 0
        """On a session: `messages[session_from:]` are the run's own, appended to it when the run completes."""
        self._id: str | None = None
        self.steps = 0
        """Model calls made so far in this run."""
        self.emit: Callable[[Any], None] | None = None
        """Set while the run is streamed: sends an event to the consumer."""
        self.journal: JournalLike | None = None
        """Set when the agent has a store: records each step so the run can be resumed."""
        self.output_type = output_type
        self._output: OutputSchema | None = None if output_type is str else output_schema(output_type)
        self._injected: list[Message] | None = None  # made by the first inject: most runs never queue one
        self._paused: PausedBatch | None = None
        self._pending: Pending | None = None
        """The batch the loop goes on with first (a resumed or recovered run), set before the run starts."""
        self.approved = False
        """True when a person approved this run, paused by a run layer (`pause`): that layer lets it through."""
        self.decisions: list[DecisionRecord] = []
        """Every decision on this run's paused calls so far, on record (who, when, what)."""

    @property
    def run(self) -> Run:
        """The run itself (a property, not a slot: a run referring to itself would live until the GC ran)."""
        return self

    @run.setter
    def run(self, run: Run) -> None:
        if run is not self:
            raise AttributeError("a Run's run is the run itself")

    @property
    def id(self) -> str:
        """The run's id, unique across processes (`RunResult.run_id`, the journal's key); inside a durable engine,
        drawn from its clock (the same when it replays)."""
        id = self._id
        if id is None:
            id = self._id = f"run-{_PROCESS}-{next(_run_ids)}" if not clock.in_engine() else f"run-{clock.uuid4().hex}"
        return id

    @id.setter
    def id(self, id: str) -> None:
        self._id = id

    @property
    def principal(self) -> Principal | None:
        """Who the run is for (`agent.run(..., principal=)`), else None; read-only, kept when it pauses or is
        recovered, and a sub-agent's run has its parent's."""
        return self._principal

    @property
    def state(self) -> dict[str, Any]:
        """The run's own data, for layers and tools (JSON data when the run pauses); `RunResult.state` at the end."""
        state = self._state
        if state is None:
            state = self._state = {}
        return state

    @state.setter
    def state(self, state: dict[str, Any]) -> None:
        self._state = state

    @property
    def private(self) -> dict[str, Any]:
        """Layers' own JSON data for this run: kept in a paused run's `RunState` (`private`), never in `run.state`."""
        private = self._private
        if private is None:
            private = self._private = {}
        return private

    @private.setter
    def private(self, private: dict[str, Any]) -> None:
        self._private = private

    def pause(self, reason: str) -> RunResult[Any]:
        """Pause the run for a person's decision: `return ctx.pause(reason)` from a run layer, before `call_next`.

        The run stops before its first model call, pending as one call of
        kind `"run"` (`RunResult.pending`). Approved, it resumes through its
        run layers with `ctx.approved` true; rejected, `agent.resume` raises
        `onion.errors.CallRejected` and nothing runs.
        """
        self._paused = PausedBatch(
            [], [PendingCall(_pause_id("run"), self.agent.name, {}, reason, kind="run")], clock.uuid4().hex
        )
        result: RunResult[Any] = RunResult(
            "" if self._output is None else None, self.messages, self.usage, self.state, self.id, status="paused"
        )
        result._run = self
        return result

    def inject(self, message: Message | str) -> None:
        """Queue a message for the history; it lands at the next safe point.

        The safe point is right before the next model call (after the latest
        response and all of its tool results), or the end of the run. A plain
        string becomes a user message. Safe to call from any thread: messages
        from one thread land in the order it injected them.
        """
        message = Message.user(message) if isinstance(message, str) else message
        injected = self._injected
        if injected is None:
            with _QUEUEING:  # two threads injecting the first messages at once make one queue
                injected = self._injected
                if injected is None:
                    injected = self._injected = []
        injected.append(message)

    def flush_injected(self) -> None:
        """Append the queued messages to the history (onion calls this at safe points).

        Takes what is queued when it starts; a message injected meanwhile (from
        another thread) stays queued for the next safe point.
        """
        injected = self._injected
        if injected:
            taken = injected[:]  # each step one operation under the GIL: an append meanwhile lands after these
            del injected[: len(taken)]
            self.messages.extend(taken)

    def __repr__(self) -> str:
        return f"<Run {self.id} steps={self.steps} messages={len(self.messages)}>"


class RunResult(Generic[OutputT]):
    """The outcome of a run: the final answer, the whole history, usage and state.

    `output` is the final answer: its text, or the validated value of the
    run's `output_type` (`RunResult[City]`). `status` is `"completed"`, or
    `"paused"` when tool calls wait for a person's decision (`pending`; `output`
    is then `""`, or `None` for a typed run); `to_state()` is the run as a `RunState`.
    """

    __slots__ = ("_run", "messages", "output", "run_id", "state", "status", "usage")

    def __init__(
        self,
        output: OutputT,
        messages: list[Message],
        usage: Usage,
        state: dict[str, Any],
        run_id: str = "",
        *,
        status: Literal["completed", "paused"] = "completed",
    ) -> None:
        self.output = output
        self.messages = messages
        self.usage = usage
        self.state = state
        """The run's `run.state` dict (the paused run itself is `to_state()`)."""
        self.run_id = run_id
        self.status = status
        self._run: Run | None = None

    @property
    def paused(self) -> bool:
        """True when the run stopped for approval of its `pending` calls."""
        return self.status == "paused"

    @property
    def decisions(self) -> list[DecisionRecord]:
        """Every decision on the run's paused calls, on record: who (`by`), when (`at`), what."""
        return list(self._run.decisions) if self._run is not None else []

    @property
    def principal(self) -> Principal | None:
        """Who the run was for (`agent.run(..., principal=)`), else None."""
        return self._run._principal if self._run is not None else None

    @property
    def pending(self) -> list[PendingCall]:
        """The calls waiting for a decision (empty unless paused): tool calls, or one paused model call or run."""
        paused = self._run._paused if self._run is not None else None
        return list(paused.pending) if paused is not None and self.paused else []

    def to_state(self) -> RunState:
        """This run as a `RunState`, to save with `to_json()` and go on with `agent.resume(state)`.

        Raises `onion.errors.RunStateError` naming the key if `run.state` is not JSON data.
        """
        return capture(self)

    def __repr__(self) -> str:
        if self.paused:
            return f"<RunResult paused pending={[call.name for call in self.pending]}>"
        return f"<RunResult output={self.output!r:.60} messages={len(self.messages)}>"


def _pause_id(kind: str) -> str:
    """A fresh id for a paused model call or run (a tool call's is the model's), from the run's clock."""
    return f"{kind}-{clock.uuid4().hex[:16]}"


def capture(result: RunResult[Any]) -> RunState:
    """The `RunState` of `result` (a copy: deciding on it changes neither the result nor the run), signed
    when its agent has a `state_key`; `stored` when the run is journaled in a store."""
    run = result._run
    paused = run._paused if run is not None else None
    state = RunState(
        run_id=result.run_id,
        agent=run.agent.name if run is not None else "",
        status=result.status,
        input=run.input if run is not None else None,
        messages=list(result.messages),
        answered=list(paused.answered) if paused is not None else [],
        pending=[dataclasses.replace(call) for call in paused.pending] if paused is not None else [],
        injected=list(run._injected or ()) if run is not None else [],
        steps=run.steps if run is not None else 0,
        usage=result.usage + Usage(),
        state=plain_state(result.state),
        output=_output_text(result),
        private=_private(run),
        batch=paused.batch if paused is not None else None,
        session=run.session if run is not None else None,
        session_from=run.session_from if run is not None else 0,
        principal=run._principal if run is not None else None,
        decisions=list(run.decisions) if run is not None else [],
        stored=run is not None and run.journal is not None,
    )
    keys = signing_keys(run.agent.state_key) if run is not None else ()
    if keys:
        sign(state, keys)
    return state


def _private(run: Run | None) -> dict[str, Any]:
    """A JSON copy of `run.private`; `RunStateError` names the first key whose value is not JSON data."""
    if run is None or not run._private:
        return {}
    try:
        copied: dict[str, Any] = json.loads(json.dumps(run._private))
    except (TypeError, ValueError) as error:
        raise RunStateError(
            f"run.private of run {run.id} is not JSON data ({error}): layers keep plain data there"
        ) from None
    return copied


def _output_text(result: RunResult[Any]) -> str:
    """The final answer as the history holds it (a typed run's JSON text; with `pseudonymize`, its
    placeholders); a paused run has none."""
    run = result._run
    if result.paused:
        return ""
    answer = None if run is None else next((m for m in reversed(run.messages) if m.role == "assistant"), None)
    return str(result.output) if answer is None else answer.text
