"""The contexts of a model call, a tool batch and a tool call, and the `Model` protocol they name."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable
from typing import Any, ClassVar, Literal, Protocol, runtime_checkable

from ._copies import own_copy
from ._messages import Message, ToolRequest, Usage
from ._results import ModelResponse, ToolResult
from ._run import Call, Run
from ._tools import CONTEXTS, Tool
from .types import StreamEdit


@runtime_checkable
class Model(Protocol):
    """What `Agent(model=...)` needs: `request(call)`; `stream(call)` for streaming.

    `stream` yields events (`onion.TextDelta`, ...) and must end with the
    finished `onion.ModelResponse` as its last item. (It lives with the
    contexts its methods take and return.)
    """

    name: str

    async def request(self, call: ModelCall) -> ModelResponse: ...


class ModelCall(Call):
    """One request to the model.

    `messages`, `tools` and `settings` are this request's own (`settings` with its nested values); the
    messages and tools in the lists are shared: replace an entry to change it. `output_type` is the run's.
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
        "pause_kind",
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
        self.pause_kind: Literal["model", "budget"] = "model"

    def pause(self, reason: str, *, kind: Literal["model", "budget"] = "model") -> ModelResponse:
        """Pause this model call for a person's decision: `return ctx.pause(reason)` from a model layer.

        The run stops, this call pending (kind `"model"`, or `"budget"` for a spending line: `middleware.budget`).
        Approved, it enters the model stack again with `ctx.approved` true; rejected, `agent.resume` raises
        `onion.errors.CallRejected` (`onion.errors.BudgetExceeded` for kind `"budget"`).
        """
        self.pause_reason, self.pause_kind = reason, kind
        return ModelResponse(Message.assistant(f"The model call is waiting for approval: {reason}"))

    def observe(self, observer: Callable[[Any], None]) -> None:
        """Call `observer(event)` for each event the model streams for this call.

        It sees the events as the layers inside this one edited them
        (`edit_stream`). Deltas only flow while the run is streamed
        (`agent.stream`); a layer that short-circuits the call sees none.
        """
        self.edit_stream(Observing(observer))

    def edit_stream(self, edit: StreamEdit) -> Editing:
        """Pass each event the model streams for this call through `edit` (a `StreamEdit`).

        Inner layers' edits run first. The edit stays for the rest of the call; `with call.edit_stream(edit):`
        removes it when the block ends (`docs/middleware.md`, "Streaming and deltas").
        """
        if self._edits is None:
            self._edits = []
        self._edits.append(edit)
        return Editing(self, edit)

    def on_response(self, check: Callable[[ModelResponse], None]) -> None:
        """Call `check(response)` for each response a model produces for this call, before any layer sees it.

        It runs for every attempt of a retry; `check` may raise to refuse the response.
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
        "_args",
        "_asked",
        "_cancelled",
        "_entered",
        "_left_running",
        "_step",
        "approved",
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
        self._asked = request.args
        self._args: dict[str, Any] | None = None
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
        self._step = run.steps  # the model call that asked for it (a resumed or recovered run counts as before)

    @property
    def args(self) -> dict[str, Any]:
        """This call's own arguments (a copy of the model's, nested dicts, lists and sets too), made when first read."""
        args = self._args
        if args is None:
            args = self._args = own_copy(self._asked)
        return args

    @args.setter
    def args(self, args: dict[str, Any]) -> None:
        self._args = args

    @property
    def idempotency_key(self) -> str:
        """A key naming this call of this run, for the API the tool calls (a payment API's idempotency key).

        The same for this call across retries, a resume and recovery after a crash (it is made from the run's id,
        the model call that asked and the call's id, so nothing stores it); different for every other call.
        """
        made = hashlib.sha256(f"{self.run.id}\x00{self._step}\x00{self.id}".encode()).hexdigest()
        return f"onion-{made[:40]}"

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
