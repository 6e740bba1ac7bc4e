"""The loop of one run: model calls and tool batches, each through its chain of layers.

A `Loop` is one build of an agent's stack: its four chains, and the handlers
at their innermost points (`loop`, `request`, `run_batch`, `execute`), which
use the chains they belong to instead of building them again. A run goes
through `Loop.run_through`; a resumed or recovered run first finishes the one
batch it holds (`run._pending`), then goes on as any run.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import pydantic

from . import clock
from ._boundary import BOUNDARY
from ._calls import ModelCall, ToolCall
from ._chains import compose
from ._copies import own_copy, own_message
from ._durable.state import PausedBatch, PendingCall, RunState, plain_state
from ._durable.trust import check_resumable, pending_batch, recorded
from ._events import ModelCallFinished, StreamReset, TextDelta, ToolCallStarted
from ._history import check_history
from ._in_doubt import settle_in_doubt
from ._messages import Message, Usage
from ._output import invalid_output
from ._results import ModelResponse
from ._run import Run, RunResult
from ._stack import bad_result, concurrent_call_next
from ._stream_edits import end_stream, send_out
from ._tool_step import ToolsAgent, ToolStep
from .errors import (
    BudgetExceeded,
    CallRejected,
    MaxStepsExceeded,
)
from .types import AgentLike

if TYPE_CHECKING:
    from ._principal import Principal
    from ._stack import Stack
    from ._tool_sources import OfferedTools, ToolSource
    from ._tools import Tool
    from .types import Tracer


class LoopAgent(ToolsAgent, AgentLike, Protocol):
    """What the loop reads of its agent (`onion.Agent` is one), each run anew: settings may change between runs."""

    @property
    def instructions(self) -> str | None: ...

    @property
    def tools(self) -> Sequence[Tool]: ...

    @property
    def tool_sources(self) -> Sequence[ToolSource]: ...

    @property
    def max_steps(self) -> int: ...

    @property
    def settings(self) -> dict[str, Any]: ...

    @property
    def output_retries(self) -> int: ...


class Loop(ToolStep):
    """One build of `agent`'s stack: the chains of the four kinds and their innermost handlers."""

    __slots__ = (
        "agent",
        "model_chain",
        "offered",
        "profiled",
        "run_chain",
        "stack",
        "tool_chain",
        "tools_chain",
        "tracer",
        "version",
    )
    agent: LoopAgent

    def __init__(
        self,
        agent: LoopAgent,
        offered: OfferedTools,
        stack: Stack,
        checked: bool,
        tracer: Tracer | None,
        profiled: bool,
    ) -> None:
        self.agent = agent
        self.offered = offered
        """The agent's tools and its MCP servers' (kept by the agent: a new build shares them)."""
        self.stack = stack
        self.version = stack.version
        self.tracer = tracer
        self.profiled = profiled
        self.run_chain = compose(stack, "run", self.loop, checked, tracer)
        self.model_chain = compose(stack, "model", self.request, checked, tracer)
        self.tools_chain = compose(stack, "tools", self.run_batch, checked, tracer)
        self.tool_chain = compose(stack, "tool", self.execute, checked, tracer)

    def stale(self, stack: Stack, tracer: Tracer | None, profiled: bool) -> bool:
        """True once this build no longer fits: the stack changed, tracing turned on or off, a profiler started."""
        return self.version != stack.version or self.tracer is not tracer or self.profiled is not profiled

    async def run_through(self, run: Run) -> RunResult[Any]:
        """`run` through the run chain, checking what the chain returns; injected messages land at its end.

        A run resumed with its run pause rejected ends here, before its run layers (`CallRejected`).
        """
        return self.finish(run, await self.start(run))

    def start(self, run: Run) -> Awaitable[Any]:
        """What `run_through` awaits: the run chain on `run`, after the model's `prepare()` if it has one.

        (`agent.run` awaits it itself, then `finish`: one coroutine fewer a run.)
        """
        pending = run._pending
        if pending is not None and pending.kind == "run" and pending.rejection is not None:
            raise rejected(run, "run", pending.rejection)
        prepare = getattr(self.agent.model, "prepare", None)
        if prepare is not None:  # the model's client, set up before any layer's clock starts
            return self.prepared(prepare, run)
        return self.run_chain(run)

    async def prepared(self, prepare: Callable[[], Awaitable[Any]], run: Run) -> Any:
        await prepare()
        return await self.run_chain(run)

    def finish(self, run: Run, result: Any) -> RunResult[Any]:
        """`result` of the run chain, checked; the messages injected meanwhile land at its end."""
        if not isinstance(result, RunResult):
            raise bad_result(self.stack, "run", result)
        if run._injected and result.status != "paused":
            run.flush_injected()
        return result

    async def known_tools(self, run: Run | None) -> dict[str, Tool]:
        """Every tool the agent has now, by name: its own and its MCP servers' (listed if need be)."""
        if self.agent.tool_sources:
            await self.offered.now(run)
        by_name: dict[str, Tool] = self.offered.by_name
        return by_name

    async def resumed(self, state: RunState, output_type: Any, by: Principal | None = None) -> Run:
        """A `Run` going on from the paused `state` (decided), after checking that this agent can; its decisions
        on record as `by`'s (`run.decisions` ends with them)."""
        agent = self.agent
        check_resumable(state, agent.name, await self.known_tools(None))
        run = Run(agent, state.input, list(state.messages), plain_state(state.state), output_type, state.principal)
        run.decisions = [*state.decisions, *recorded(state, by)]
        run.id = state.run_id
        run.session, run.session_from = state.session, state.session_from
        run.steps = state.steps
        run.private = json.loads(json.dumps(state.private))
        run.usage.add(state.usage)
        if state.injected:
            run._injected = list(state.injected)
        run._pending = pending = pending_batch(state)
        run.approved = pending.kind == "run" and pending.rejection is None
        return run

    # -- the loop (the run chain's innermost point) ------------------------------

    async def loop(self, run: Run) -> RunResult[Any]:
        agent = self.agent
        journal = run.journal
        if journal is not None:
            await journal.begin_now(run)
        failures = 0
        approve = False  # the next model call goes ahead approved (a paused model call, approved)
        pending = run._pending
        if pending is not None:
            run._pending = None
            if pending.final:  # a final answer the journal holds: it goes through the run's layers like any
                if (result := self.answer(run, run.messages[-1], failures)) is not None:
                    return result
                failures += 1
            elif pending.kind != "run":
                if pending.kind in ("model", "budget"):  # a paused model call, decided
                    if pending.rejection is not None:
                        raise rejected(run, pending.kind, pending.rejection)
                    approve = True
                if pending.kind == "tool" or pending.settled or pending.requests:
                    tools = await self.known_tools(run)
                    held = await settle_in_doubt(run, pending, tools) if pending.in_doubt else []
                    calls = [ToolCall(run, r, tools.get(r.name), pending.approved) for r in pending.requests]
                    response = ModelResponse(run.messages[-1])
                    if await self.tool_step(run, response, calls, pending.requests, pending.settled, held):
                        return paused_result(run)
        offered_tools = self.offered
        while True:
            if run._injected:
                run.flush_injected()
            max_steps = agent.max_steps
            if run.steps >= max_steps:
                raise MaxStepsExceeded(
                    f"{agent.name} made {run.steps} model calls without a final answer (max_steps={max_steps})",
                    messages=run.messages,
                    usage=run.usage,
                )
            run.steps += 1
            offered = await offered_tools.now(run) if agent.tool_sources else agent.tools
            call = ModelCall(run, list(run.messages), list(offered), agent.model, agent.settings)
            if approve:
                call.approved, approve = True, False
            response = await self.model_chain(call)
            if type(response) is not ModelResponse and not isinstance(response, ModelResponse):
                raise bad_result(self.stack, "model", response)
            if call.pause_reason is not None:
                return pause_model(run, call)
            message = response.message
            counted = call._counted
            if counted is None or (counted[-1] is not response.usage and call._uncounted(response)):
                run.usage.add(response.usage)
            if run.emit is not None:
                emit_response(run, call, response)
            run.messages.append(message)
            journal = run.journal
            if journal is not None:
                journal.model(run, response)
            requests = message.tool_calls
            if not requests:
                if (result := self.answer(run, message, failures)) is not None:
                    return result
                failures += 1
                continue
            if run.steps >= max_steps:
                for request in requests:
                    run.messages.append(Message.tool(request.id, "Not run: the agent reached max_steps.", True))
                continue
            by_name, offered_now = offered_tools.by_name, call.tools
            calls = []
            for request in requests:
                tool = by_name.get(request.name)
                if tool is None or tool not in offered_now:  # not the agent's own, or a layer changed the offer
                    tool = tool_for(offered_now, request.name, by_name)
                calls.append(ToolCall(run, request, tool))
            del call, offered_now  # the model call is done: its copies are not held through the tool step
            if await self.tool_step(run, response, calls, requests, None):
                return paused_result(run)

    def answer(self, run: Run, message: Message, failures: int) -> RunResult[Any] | None:
        """The run's result for its final answer `message`; None when the answer failed validation as the
        output type (the errors are fed back for another), `OutputValidationError` after `output_retries`."""
        output_schema = run._output
        if output_schema is None:
            output: Any = message.text
        else:
            try:
                output = output_schema.validate(message.text)
            except pydantic.ValidationError as error:
                if failures + 1 > self.agent.output_retries:
                    agent = self.agent
                    raise invalid_output(
                        agent.name, output_schema, message.text, error, failures + 1, agent.output_retries, run.messages
                    ) from None
                run.messages.append(Message.user(output_schema.feedback(error)))
                return None
        if run._injected:
            run.flush_injected()
        result = RunResult(output, run.messages, run.usage, run.state, run.id)
        result._run = run
        return result

    # -- the model chain's innermost point ----------------------------------------------

    async def request(self, call: ModelCall) -> ModelResponse:
        """The innermost point of the model chain: check the history, ask the model, count what it produced."""
        check_history(call.messages)
        if call._entered:
            raise concurrent_call_next(f"one of {[layer.name for layer in self.stack.layers('model')]}", "model")
        call._entered = True
        try:
            boundary = BOUNDARY.get()
            model = call.model if boundary is None else boundary.model(call)
            stream = None if call.run.emit is None else getattr(model, "stream", None)
            if stream is not None:
                response = await stream_request(call, stream)
            else:
                if call.streamed:  # a model that does not stream replaces a partial stream
                    send_out(call, (StreamReset(),), len(call._edits or ()))
                    call.streamed = False
                response = await model.request(call)
        finally:
            call._entered = False
        if type(response) is not ModelResponse and not isinstance(response, ModelResponse):
            raise TypeError(
                f"model {call.model!r} returned {type(response).__name__} {response!r:.80} "
                "where request() must return an onion.ModelResponse"
            )
        call._produced(response)
        return response


async def stream_request(call: ModelCall, stream: Callable[[ModelCall], AsyncIterator[Any]]) -> ModelResponse:
    """Ask a streaming model: its events out through the call's edits to the consumer, its response returned."""
    if call.streamed:
        send_out(call, (StreamReset(),), len(call._edits or ()))
        call.streamed = False
    response = None
    emit = call.run.emit
    assert emit is not None
    async for item in stream(call):
        if isinstance(item, ModelResponse):
            response = item
            continue
        call.streamed = True
        if call._edits:
            send_out(call, (item,), len(call._edits))
        elif not isinstance(item, ToolCallStarted):  # emitted with its arguments once the response is whole
            emit(item)
    end_stream(call)
    if response is None:
        raise TypeError(f"model {call.model!r}: stream() ended without yielding an onion.ModelResponse last")
    return response


def first_messages(agent: LoopAgent, input: str | Message | Sequence[Message]) -> list[Message]:
    """A run's history to start from: copies, so layers editing it never reach the caller's messages."""
    if isinstance(input, str):
        messages = [Message("user", input)]
    elif isinstance(input, Message):
        messages = [own_message(input)]
    else:
        given = list(input)
        if not all(isinstance(m, Message) for m in given):
            raise TypeError("input must be a str, a Message, or a sequence of Messages")
        messages = [own_message(m) for m in given]
    if agent.instructions and not (messages and messages[0].role == "system"):
        messages.insert(0, Message.system(agent.instructions))
    return messages


def tool_for(offered: list[Tool], name: str, by_name: dict[str, Any]) -> Tool | None:
    """The tool a request names when a layer changed what its model call offered: among those, else the agent's."""
    for tool in offered:
        if tool.name == name:
            return tool
    found: Tool | None = by_name.get(name)
    return found


def emit_response(run: Run, call: ModelCall, response: ModelResponse) -> None:
    """Tell a streamed run's consumer what a model call answered (its text, if not streamed, and its tool calls)."""
    emit = run.emit
    assert emit is not None
    if not call.streamed and response.text:
        emit(TextDelta(response.text))
    for request in response.tool_calls:
        emit(ToolCallStarted(request.id, request.name, own_copy(request.args)))
    emit(ModelCallFinished(response, response.usage, response.cached))


def pause_model(run: Run, call: ModelCall) -> RunResult[Any]:
    """Pause the run before the model call `call` (a model layer paused it): pending, not counted as a step.

    A usage a model produced for it meanwhile stays counted. If `run.state` cannot be saved, the error propagates.
    """
    run.steps -= 1
    plain_state(run.state)
    model = getattr(call.model, "name", None) or str(call.model)
    kind = call.pause_kind
    paused = PendingCall(f"{kind}-{clock.uuid4().hex[:16]}", model, {}, call.pause_reason or "", kind=kind)
    run._paused = PausedBatch([], [paused], clock.uuid4().hex)
    return paused_result(run)


def rejected(run: Run, kind: str, reason: str) -> CallRejected | BudgetExceeded:
    if kind == "budget":
        return BudgetExceeded(
            f"run {run.id}: a person rejected going on past its budget's soft line ({reason}); the run ends here, "
            "nothing was called",
            usage=run.usage + Usage(),
        )
    what = "model call" if kind == "model" else "run"
    return CallRejected(
        f"run {run.id}: a person rejected its paused {what} ({reason}); the run ends here, nothing was called",
        reason=reason,
        kind=kind,
    )


def paused_result(run: Run) -> RunResult[Any]:
    result = RunResult("" if run._output is None else None, run.messages, run.usage, run.state, run.id, status="paused")
    result._run = run
    return result
