"""The contexts that flow through the onion, and the results they return."""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import threading
import uuid
from collections.abc import Callable
from typing import Any, ClassVar, Generic, Literal, Protocol, runtime_checkable

from typing_extensions import TypeVar

from ._content import Part, content_text
from ._copies import MUTABLE, own_copy
from ._messages import Message, ToolRequest, Usage
from ._output import OutputSchema, output_schema
from ._state import PausedBatch, Pending, PendingCall, RunState, plain_state, signature, state_key
from ._tools import CONTEXTS, Tool
from .errors import RunStateError
from .types import AgentLike, JournalLike, StreamEdit

OutputT = TypeVar("OutputT", default=str)
"""The type of a run's final output (`output_type`); `str` unless one is given."""

_run_ids = itertools.count(1)
_PROCESS = os.urandom(4).hex()
"""Makes run ids unique across processes, so a saved run never shares its id with a new one."""


@runtime_checkable
class Model(Protocol):
    """What `Agent(model=...)` needs: `request(call)`; `stream(call)` for streaming.

    `stream` yields events (`onion.TextDelta`, ...) and must end with the
    finished `onion.ModelResponse` as its last item. (It lives with the
    contexts its methods take and return.)
    """

    name: str

    async def request(self, call: ModelCall) -> ModelResponse: ...


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
        "_injected",
        "_output",
        "_paused",
        "_pending",
        "agent",
        "approved",
        "emit",
        "id",
        "input",
        "journal",
        "messages",
        "output_type",
        "private",
        "session",
        "session_from",
        "state",
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
    ) -> None:
        self.run = self
        self.agent = agent
        self.input = input
        self.messages = messages
        self.state: dict[str, Any] = {} if state is None else state
        self.private: dict[str, Any] = {}
        """Layers' own JSON data for this run: kept in a paused run's `RunState` (`private`), never in `run.state`."""
        self.usage = Usage()
        self.session: str | None = None
        """The id of the session the run is on (`agent.run(..., session=...)`), else None."""
        self.session_from = 0
        """On a session: `messages[session_from:]` are the run's own, appended to it when the run completes."""
        self.id = f"run-{_PROCESS}-{next(_run_ids)}"
        self.steps = 0
        """Model calls made so far in this run."""
        self.emit: Callable[[Any], None] | None = None
        """Set while the run is streamed: sends an event to the consumer."""
        self.journal: JournalLike | None = None
        """Set when the agent has a store: records each step so the run can be resumed."""
        self.output_type = output_type
        self._output: OutputSchema | None = None if output_type is str else output_schema(output_type)
        self._injected: list[Message] = []  # a list, not a deque: 56 bytes, not 760, for every run
        self._paused: PausedBatch | None = None
        self._pending: Pending | None = None
        """The batch the loop goes on with first (a resumed or recovered run), set before the run starts."""
        self.approved = False
        """True when a person approved this run, paused by a run layer (`pause`): that layer lets it through."""

    def pause(self, reason: str) -> RunResult[Any]:
        """Pause the run for a person's decision: `return ctx.pause(reason)` from a run layer, before `call_next`.

        The run stops before its first model call, pending as one call of
        kind `"run"` (`RunResult.pending`). Approved, it resumes through its
        run layers with `ctx.approved` true; rejected, `agent.resume` raises
        `onion.errors.CallRejected` and nothing runs.
        """
        self._paused = PausedBatch(
            [], [PendingCall(_pause_id("run"), self.agent.name, {}, reason, kind="run")], uuid.uuid4().hex
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
        self._injected.append(Message.user(message) if isinstance(message, str) else message)

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


class ModelCall(Call):
    """One request to the model.

    `messages`, `tools` and `settings` are this request's own: changing them
    changes this request only. `settings` is copied with its nested dicts,
    lists and sets, so a layer may write into `settings["extra_headers"]`;
    the messages and tool definitions in the lists are shared (replace an
    entry to change it for this request). `output_type` is the run's
    (`str` for plain text): providers send its schema (`onion.output_schema`).
    """

    __slots__ = (
        "_checks",
        "_counted",
        "_edits",
        "_entered",
        "approved",
        "messages",
        "model",
        "output_type",
        "pause_reason",
        "settings",
        "streamed",
        "tools",
    )
    kind: ClassVar[str] = "model"

    def __init__(
        self, run: Run, messages: list[Message], tools: list[Tool], model: Model, settings: dict[str, Any]
    ) -> None:
        self.run = run
        self.messages = messages
        self.tools = tools
        self.model = model
        self.settings = own_copy(settings) if settings else {}
        self.output_type: Any = run.output_type
        self.streamed = False
        """True once a streaming model sent deltas for this call."""
        self._edits: list[StreamEdit] | None = None
        self._checks: list[Callable[[ModelResponse], None]] | None = None
        self._counted: list[Usage] | None = None
        self._entered = False
        self.approved = False
        """True when a person approved this call, paused by a model layer (`pause`): that layer lets it through."""
        self.pause_reason: str | None = None
        """Set by `pause(reason)`: the run stops before this call, which is pending."""

    def pause(self, reason: str) -> ModelResponse:
        """Pause this model call for a person's decision: `return ctx.pause(reason)` from a model layer,
        before `call_next`.

        The model is not asked; the run stops here, this call pending as one
        call of kind `"model"` (`RunResult.pending`). Approved, the call goes
        ahead: it enters the model stack again with `ctx.approved` true.
        Rejected, `agent.resume` raises `onion.errors.CallRejected` and the
        model is not asked. The response returned is a placeholder that no
        message will carry.
        """
        self.pause_reason = reason
        return ModelResponse(Message.assistant(f"The model call is waiting for approval: {reason}"))

    def observe(self, observer: Callable[[Any], None]) -> None:
        """Call `observer(event)` for each event the model streams for this call.

        It sees the events as the layers inside this one edited them
        (`edit_stream`). Deltas only flow while the run is streamed
        (`agent.stream`); a layer that short-circuits the call sees none.
        """
        self.edit_stream(Observing(observer))

    def edit_stream(self, edit: StreamEdit) -> Editing:
        """Pass each event the model streams for this call through `edit`, which returns the events to send on.

        `edit(event)` returns `[event]` to pass it on, rewritten events, or
        nothing to hold it back; its `end()`, if it has one, returns what it
        still holds once the model's stream ended. Edits of inner layers run
        first, so this layer's edit sees what they sent on, and the consumer
        sees what the outermost sent on. A `StreamReset` goes through edits
        too (drop what is held). The edit stays for the rest of the call;
        `with call.edit_stream(edit): ...` removes it when the block ends
        (a layer inside `retry` runs once per attempt).
        """
        if self._edits is None:
            self._edits = []
        self._edits.append(edit)
        return Editing(self, edit)

    def on_response(self, check: Callable[[ModelResponse], None]) -> None:
        """Call `check(response)` for each response a model produces for this call.

        Called at the innermost point, before any layer sees the response:
        for every attempt of a retry, and for a response that a layer inside
        will reject. Its usage is already in `run.usage`. `check` may raise
        to refuse the response; the error travels up the model stack.
        """
        if self._checks is None:
            self._checks = []
        self._checks.append(check)

    def _produced(self, response: ModelResponse) -> None:
        """Count what a model produced for this call in `run.usage`, then run the `on_response` checks."""
        usage = response.usage
        self.run.usage.add(usage)
        if self._counted is None:
            self._counted = [usage]
        else:
            self._counted.append(usage)
        if self._checks is not None:
            for check in self._checks:
                check(response)

    def _uncounted(self, response: ModelResponse) -> bool:
        """True for a response whose usage no model produced through this call (a layer made it)."""
        counted, usage = self._counted, response.usage
        return counted is None or (counted[-1] is not usage and all(seen is not usage for seen in counted))

    def __repr__(self) -> str:
        return f"<ModelCall {getattr(self.model, 'name', self.model)!s} messages={len(self.messages)}>"


class ToolBatch(Call):
    """All tool calls of one model response."""

    __slots__ = ("calls", "response")
    kind: ClassVar[str] = "tools"

    def __init__(self, run: Run, calls: list[ToolCall], response: ModelResponse) -> None:
        self.run = run
        self.calls = calls
        self.response = response

    @property
    def approved(self) -> bool:
        """True when a person approved every call of this batch (a paused batch resumed): a layer that paused
        it lets it through."""
        return bool(self.calls) and all(call.approved for call in self.calls)

    def pause(self, reason: str) -> list[ToolResult]:
        """Pause the whole batch for a person's decision: `return ctx.pause(reason)` from a tools layer.

        None of its calls runs; each is pending with `reason` (kind `"tool"`),
        decided one by one as any paused tool call (approved ones run with
        `call.approved` true, rejected ones answer the model with the reason).
        """
        return [call.pause(reason) for call in self.calls]

    def __repr__(self) -> str:
        return f"<ToolBatch {[call.name for call in self.calls]}>"


class ToolCall(Call):
    """One tool call. A layer may change `args` (this call's own copy, nested values too) before `call_next`."""

    __slots__ = (
        "_cancelled",
        "_entered",
        "_left_running",
        "approved",
        "args",
        "id",
        "name",
        "pause_reason",
        "raw_args",
        "tool",
    )
    kind: ClassVar[str] = "tool"

    def __init__(self, run: Run, request: ToolRequest, tool: Tool | None, approved: bool = False) -> None:
        self.run = run
        self.name = request.name
        args = request.args
        self.args = dict(args) if MUTABLE.isdisjoint(map(type, args.values())) else own_copy(args)
        self.id = request.id
        self.tool = tool
        self.raw_args = request.raw_args
        self.approved = approved
        """True when a person approved this call of a paused run (`agent.resume`): layers that pause let it through."""
        self.pause_reason: str | None = None
        """Set by `pause(reason)`: the run stops after this batch, the call pending."""
        self._entered = False
        self._left_running = False
        self._cancelled: threading.Event | None = None

    @property
    def cancelled(self) -> threading.Event:
        """Set once onion stops waiting for this call (a timeout, a cancelled run).

        onion cannot stop a sync tool's thread; a long sync tool that takes
        the `ToolCall` checks `call.cancelled.is_set()` (or waits on it)
        between steps and returns early.
        """
        if self._cancelled is None:
            self._cancelled = threading.Event()
        return self._cancelled

    @property
    def left_running(self) -> bool:
        """True once onion stopped waiting for this call while its sync tool's thread ran.

        The tool may still complete (or just did): onion never starts this
        call again, and the model is told it may still complete.
        """
        return self._left_running

    def block(self, reason: str) -> ToolResult:
        """An error result answering this call with `reason`, for a layer that refuses it."""
        return ToolResult(content=f"Tool call {self.name} was blocked: {reason}", is_error=True, call_id=self.id)

    def pause(self, reason: str) -> ToolResult:
        """Pause this call for a person's decision: `return ctx.pause(reason)` from a tool layer.

        The call does not run; its siblings in the batch do. The run then stops
        before its next model call, with this call pending (`RunResult.pending`).
        The result returned is a placeholder that no message will carry.
        """
        self.pause_reason = reason
        return ToolResult(content=f"Tool call {self.name} is waiting for approval: {reason}", call_id=self.id)

    def __repr__(self) -> str:
        return f"<ToolCall {self.name} id={self.id} args={self.args!r:.60}>"


CONTEXTS.add(ToolCall)  # a tool parameter annotated `ToolCall` is passed the call


class ModelResponse:
    """What a model answered: one assistant message, its usage and why it stopped.

    `cached` is true when a layer served it without reaching a model;
    `model` names the model that produced it, when known.
    """

    __slots__ = ("cached", "message", "model", "raw", "stop_reason", "usage")

    def __init__(
        self,
        message: Message,
        usage: Usage | None = None,
        stop_reason: str | None = None,
        *,
        model: str | None = None,
        cached: bool = False,
        raw: Any = None,
    ) -> None:
        self.message = message
        self.usage = Usage() if usage is None else usage
        self.stop_reason = stop_reason if stop_reason is not None else ("tool_use" if message.tool_calls else "end")
        self.model = model
        self.cached = cached
        self.raw = raw

    @property
    def text(self) -> str:
        return self.message.text

    @property
    def tool_calls(self) -> list[ToolRequest]:
        return self.message.tool_calls

    def replace(self, **changes: Any) -> ModelResponse:
        """A copy with `changes` (`message=`, `usage=`, `stop_reason=`, `model=`, `cached=`, `raw=`), the rest kept.

        A layer that rewrites a response returns `response.replace(message=...)`.
        """
        fields = {name: getattr(self, name) for name in self.__slots__}
        unknown = changes.keys() - fields.keys()
        if unknown:
            raise TypeError(f"ModelResponse.replace() got unknown fields {sorted(unknown)}; it has {sorted(fields)}")
        fields.update(changes)
        message, usage, stop_reason = fields.pop("message"), fields.pop("usage"), fields.pop("stop_reason")
        return ModelResponse(message, usage, stop_reason, **fields)

    def __repr__(self) -> str:
        return f"<ModelResponse text={self.text!r:.40} tool_calls={[c.name for c in self.tool_calls]}>"


class ToolResult:
    """The answer to one tool call. `content` is what the model will read.

    `content` is text, or a list of parts (`str`, `Image`, `Document`) when
    the tool returned an image or a document.
    """

    __slots__ = ("call_id", "content", "is_error", "value")

    def __init__(
        self, content: str | list[Part] = "", *, is_error: bool = False, call_id: str = "", value: Any = None
    ) -> None:
        self.content = content
        self.is_error = is_error
        self.call_id = call_id
        self.value = value
        """What the tool returned, before it was turned into text."""

    @property
    def text(self) -> str:
        """`content` as text: itself, or its text parts with images and documents described (for logs)."""
        return content_text(self.content)

    def replace(self, **changes: Any) -> ToolResult:
        """A copy with `changes` (`content=`, `is_error=`, `call_id=`, `value=`), the rest kept."""
        fields = {name: getattr(self, name) for name in self.__slots__}
        unknown = changes.keys() - fields.keys()
        if unknown:
            raise TypeError(f"ToolResult.replace() got unknown fields {sorted(unknown)}; it has {sorted(fields)}")
        fields.update(changes)
        return ToolResult(fields.pop("content"), **fields)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ToolResult) and (self.content, self.is_error, self.call_id) == (
            other.content,
            other.is_error,
            other.call_id,
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        flag = " error" if self.is_error else ""
        return f"<ToolResult{flag} {self.call_id} {self.content!r:.60}>"


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


class Editing:
    """An edit registered on one call; `with` removes it when this layer's pass ends."""

    __slots__ = ("call", "edit")

    def __init__(self, call: ModelCall, edit: StreamEdit) -> None:
        self.call = call
        self.edit = edit

    def __enter__(self) -> StreamEdit:
        return self.edit

    def __exit__(self, *exc_info: object) -> None:
        edits = self.call._edits
        if edits is not None:
            for index in range(len(edits) - 1, -1, -1):
                if edits[index] is self.edit:
                    del edits[index]
                    break


class Observing:
    """An observer as an edit: it sees each event as the layers inside it left it, and passes it on."""

    __slots__ = ("observer",)

    def __init__(self, observer: Callable[[Any], None]) -> None:
        self.observer = observer

    def __call__(self, event: Any) -> tuple[Any]:
        self.observer(event)
        return (event,)


def _pause_id(kind: str) -> str:
    """A fresh id for a paused model call or run (a tool call's is the model's)."""
    return f"{kind}-{uuid.uuid4().hex[:16]}"


def capture(result: RunResult[Any]) -> RunState:
    """The `RunState` of `result` (a copy: deciding on it changes neither the result nor the run), signed
    when its agent has a `state_key`."""
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
        injected=list(run._injected) if run is not None else [],
        steps=run.steps if run is not None else 0,
        usage=result.usage + Usage(),
        state=plain_state(result.state),
        output=_output_text(result),
        private=_private(run),
        batch=paused.batch if paused is not None else None,
        session=run.session if run is not None else None,
        session_from=run.session_from if run is not None else 0,
    )
    key = state_key(run.agent.state_key) if run is not None else None
    if key is not None:
        state.signature = signature(state, key)
    return state


def _private(run: Run | None) -> dict[str, Any]:
    """A JSON copy of `run.private`; `RunStateError` names the first key whose value is not JSON data."""
    if run is None or not run.private:
        return {}
    try:
        copied: dict[str, Any] = json.loads(json.dumps(run.private))
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
