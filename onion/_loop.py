"""The loop of one run: model calls and tool batches, each through its chain of layers.

A `Loop` is one build of an agent's stack: its four chains, and the handlers
at their innermost points (`loop`, `request`, `run_batch`, `execute`), which
use the chains they belong to instead of building them again. A run goes
through `Loop.run_chain`; a resumed or recovered run first finishes the one
batch it holds (`run._pending`), then goes on as any run.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import pydantic

from ._boundary import BOUNDARY
from ._calls import ModelCall, ModelResponse, Run, RunResult, ToolBatch, ToolCall, ToolResult
from ._chains import compose
from ._copies import own_copy, own_message
from ._events import ModelCallFinished, StreamReset, TextDelta, ToolCallStarted, ToolResultEvent
from ._history import check_history
from ._messages import Message, ToolRequest
from ._stack import bad_result, concurrent_call_next
from ._state import PausedBatch, PendingCall, RunState, check_resumable, pending_batch, plain_state
from ._stream_edits import end_stream, send_out
from ._text import valid_text
from ._tools import render
from .errors import (
    CallRejected,
    HookFailed,
    MaxStepsExceeded,
    MiddlewareError,
    OutputValidationError,
    RunBusy,
    RunStateError,
    ToolArgumentsError,
    ToolLeftRunning,
)
from .types import AgentLike

if TYPE_CHECKING:
    from ._stack import Stack
    from ._threads import ToolThreads
    from ._tool_sources import OfferedTools, ToolSource
    from ._tools import Tool
    from .types import Tracer


class LoopAgent(AgentLike, Protocol):
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

    @property
    def parallel_tools(self) -> bool: ...

    @property
    def tool_threads(self) -> ToolThreads: ...


class Loop:
    """One build of `agent`'s stack: the chains of the four kinds and their innermost handlers."""

    __slots__ = ("agent", "model", "offered", "profiled", "run", "stack", "tool", "tools", "tracer", "version")

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
        self.run = compose(stack, "run", self.loop, checked, tracer)
        self.model = compose(stack, "model", self.request, checked, tracer)
        self.tools = compose(stack, "tools", self.run_batch, checked, tracer)
        self.tool = compose(stack, "tool", self.execute, checked, tracer)

    def stale(self, stack: Stack, tracer: Tracer | None, profiled: bool) -> bool:
        """True once this build no longer fits: the stack changed, tracing turned on or off, a profiler started."""
        return self.version != stack.version or self.tracer is not tracer or self.profiled is not profiled

    def __iter__(self) -> Any:  # unpacks as the chains did: run, model, tools, tool, stack
        return iter((self.run, self.model, self.tools, self.tool, self.stack))

    async def run_chain(self, run: Run) -> RunResult[Any]:
        """`run` through the run chain, checking what the chain returns; injected messages land at its end.

        A run resumed with its run pause rejected ends here, before its run layers (`CallRejected`).
        """
        pending = run._pending
        if pending is not None and pending.kind == "run" and pending.rejection is not None:
            raise rejected(run, "run", pending.rejection)
        prepare = getattr(self.agent.model, "prepare", None)
        if prepare is not None:  # the model's client, set up before any layer's clock starts
            await prepare()
        result = await self.run(run)
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

    async def resumed(self, state: RunState, output_type: Any) -> Run:
        """A `Run` going on from the paused `state` (decided), after checking that this agent can."""
        agent = self.agent
        check_resumable(state, agent.name, await self.known_tools(None))
        run = Run(agent, state.input, list(state.messages), plain_state(state.state), output_type)
        run.id = state.run_id
        run.session, run.session_from = state.session, state.session_from
        run.steps = state.steps
        run.private = json.loads(json.dumps(state.private))
        run.usage.add(state.usage)
        run._injected.extend(state.injected)
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
                if pending.kind == "model":  # a paused model call, decided
                    if pending.rejection is not None:
                        raise rejected(run, "model", pending.rejection)
                    approve = True
                if pending.kind == "tool" or pending.settled or pending.requests:
                    tools = await self.known_tools(run)
                    calls = [ToolCall(run, r, tools.get(r.name), pending.approved) for r in pending.requests]
                    response = ModelResponse(run.messages[-1])
                    if await self.tool_step(run, response, calls, pending.requests, pending.settled):
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
            response = await self.model(call)
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
                    raise invalid_output(self.agent, run, message.text, error, failures + 1) from None
                run.messages.append(Message.user(output_schema.feedback(error)))
                return None
        if run._injected:
            run.flush_injected()
        result = RunResult(output, run.messages, run.usage, run.state, run.id)
        result._run = run
        return result

    # -- the tool step --------------------------------------------------------------

    async def tool_step(
        self,
        run: Run,
        response: ModelResponse,
        calls: list[ToolCall],
        requests: list[ToolRequest],
        settled: dict[str | None, Message] | None,
    ) -> bool:
        """Run `calls` as one batch and answer every call of `response`, in call order.

        `settled` holds answers known before the batch (a resumed run). Returns
        True when a layer paused a call: the answers are then kept aside
        (`run._paused`) and the call left unanswered. If the batch fails or is
        cancelled, every call is answered with an error before the exception
        propagates, so the history stays valid for a layer that catches it.
        """
        try:
            results = await self.tools(ToolBatch(run, calls, response)) if calls else []
            if type(results) is not list or len(results) != len(calls):
                raise bad_result(self.stack, "tools", results, expected_count=len(calls))
            answers = []
            paused = False
            for call, result in zip(calls, results, strict=True):
                if type(result) is not ToolResult and not isinstance(result, ToolResult):
                    raise bad_result(self.stack, "tools", results, expected_count=len(calls))
                paused = paused or call.pause_reason is not None
                content = result.content
                if type(content) is str:
                    text = content if content.isascii() else valid_text(content)
                    answers.append(Message("tool", text, [], call.id, result.is_error))
                else:
                    answers.append(Message.tool(call.id, content, result.is_error))
            if settled is not None:
                answers = in_call_order(response, answers, settled)
        except BaseException as error:
            reason = "the run was cancelled" if isinstance(error, asyncio.CancelledError) else type(error).__name__
            for request in response.tool_calls:
                known = settled.get(request.id) if settled is not None else None
                run.messages.append(
                    known or Message.tool(request.id, f"No result: the batch stopped ({reason}).", True)
                )
            raise
        if paused:
            pause(run, calls, requests, answers)
            return True
        run.messages.extend(answers)
        return False

    async def run_batch(self, batch: ToolBatch) -> list[ToolResult]:
        """The innermost point of the tools chain: each call through the tool chain, side by side.

        The first call runs in this task, the others in tasks of their own; the
        first failure cancels the others (the first call too, while it runs) and
        is raised.
        """
        calls = batch.calls
        if len(calls) <= 1 or not self.agent.parallel_tools:
            return [await self.one(call) for call in calls]
        current = asyncio.current_task()
        assert current is not None
        failed: list[BaseException] = []
        first_running = True

        def stop(task: asyncio.Task[ToolResult]) -> None:
            if not task.cancelled() and (error := task.exception()) is not None and not failed:
                failed.append(error)
                if first_running:  # stop the first call where it waits, as a task group would
                    current.cancel()

        create = asyncio.get_running_loop().create_task
        tasks = [create(self.one(call)) for call in calls[1:]]
        for task in tasks:
            task.add_done_callback(stop)
        try:
            try:
                results = [await self.one(calls[0])]
            finally:
                first_running = False
            for task in tasks:
                results.append(await task)
        except BaseException as error:
            for task in tasks:
                task.remove_done_callback(stop)
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            if failed and isinstance(error, asyncio.CancelledError) and current.uncancel() == 0:
                raise failed[0] from None
            raise
        return results

    async def one(self, call: ToolCall) -> ToolResult:
        """One call through the tool chain; what escapes it becomes an error result.

        Not a hook's failure (`HookFailed`): that stops the run with the hook's own exception.
        """
        try:
            result = await self.tool(call)
        except (MiddlewareError, RunBusy):
            raise
        except HookFailed as failed:
            raise failed.error from failed.error.__cause__
        except Exception as error:
            outcome = "gave no result" if call._left_running else "failed"
            result = ToolResult(
                content=valid_text(f"Tool {call.name} {outcome}: {type(error).__name__}: {error}"),
                is_error=True,
                call_id=call.id,
            )
        if type(result) is not ToolResult and not isinstance(result, ToolResult):
            raise bad_result(self.stack, "tool", result)
        if call.pause_reason is not None:
            return result
        run = call.run
        if run.journal is not None:
            await run.journal.finished(call, result)
        if run.emit is not None:
            run.emit(ToolResultEvent(call.id, call.name, result))
        return result

    async def execute(self, call: ToolCall) -> ToolResult:
        """The innermost point of the tool chain: validate the arguments, run the tool."""
        tool = call.tool
        if tool is None:
            names = ", ".join(self.offered.by_name) or "none"
            return ToolResult(
                content=f"Unknown tool {call.name!r}. Available tools: {names}.", is_error=True, call_id=call.id
            )
        if call.raw_args is not None and not call.args:
            return ToolResult(
                content=f"The arguments for {call.name} were not valid JSON ({call.raw_args!r:.200}). "
                "Send a JSON object matching the tool's parameters.",
                is_error=True,
                call_id=call.id,
            )
        try:
            args = tool.validate(call.args)
        except ToolArgumentsError as error:
            return ToolResult(
                content=f"{error}. Fix the arguments and call {call.name} again.", is_error=True, call_id=call.id
            )
        if call._entered:
            raise concurrent_call_next(f"one of {[layer.name for layer in self.stack.layers('tool')]}", "tool")
        if call._left_running:
            raise ToolLeftRunning(
                f"tool {call.name} was not started again: an earlier attempt of this call was left running "
                "and may still complete"
            )
        call._entered = True
        threads = self.agent.tool_threads
        try:
            journal = call.run.journal
            if journal is not None:
                await journal.started(call)
            boundary = BOUNDARY.get()
            if boundary is None:
                value = await tool.invoke(args, call, threads)
            else:
                value = await boundary.tool(call, lambda: tool.invoke(args, call, threads))
        finally:
            call._entered = False
        if isinstance(value, ToolResult):  # the tool answered itself (an MCP server's isError result, ...)
            if not value.call_id:
                value.call_id = call.id
            return value
        return ToolResult(content=render(value), call_id=call.id, value=value)

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


def pause(run: Run, calls: list[ToolCall], requests: list[ToolRequest], answers: list[Message]) -> None:
    """Keep a paused batch aside: its pending calls (with the arguments asked for) and the answers so far.

    If `run.state` cannot be saved, the paused calls are answered as not run and the error propagates.
    """
    pending = [
        PendingCall(call.id, call.name, own_copy(request.args), call.pause_reason)
        for call, request in zip(calls, requests, strict=True)
        if call.pause_reason is not None
    ]
    waiting = {call.id for call in pending}
    try:
        plain_state(run.state)
    except RunStateError:
        text = "No result: the run could not pause (run.state is not JSON data)."
        run.messages.extend(
            m if m.tool_call_id not in waiting else Message.tool(m.tool_call_id or "", text, True) for m in answers
        )
        raise
    run._paused = PausedBatch([m for m in answers if m.tool_call_id not in waiting], pending, uuid.uuid4().hex)


def pause_model(run: Run, call: ModelCall) -> RunResult[Any]:
    """Pause the run before the model call `call` (a model layer paused it): pending, not counted as a step.

    A usage a model produced for it meanwhile stays counted. If `run.state` cannot be saved, the error propagates.
    """
    run.steps -= 1
    plain_state(run.state)
    model = getattr(call.model, "name", None) or str(call.model)
    paused = PendingCall(f"model-{uuid.uuid4().hex[:16]}", model, {}, call.pause_reason or "", kind="model")
    run._paused = PausedBatch([], [paused], uuid.uuid4().hex)
    return paused_result(run)


def rejected(run: Run, kind: str, reason: str) -> CallRejected:
    what = "model call" if kind == "model" else "run"
    return CallRejected(
        f"run {run.id}: a person rejected its paused {what} ({reason}); the run ends here, nothing was called",
        reason=reason,
        kind=kind,
    )


def invalid_output(
    agent: LoopAgent, run: Run, text: str, error: pydantic.ValidationError, answers: int
) -> OutputValidationError:
    errors = error.errors(include_url=False)
    problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'answer'}: {e['msg']}" for e in errors)
    return OutputValidationError(
        f"{agent.name}: the final answer is not a valid {run._output.name if run._output else 'output'} "
        f"after {answers} answers (output_retries={agent.output_retries}): {problems}",
        errors=list(errors),
        text=text,
        messages=run.messages,
    )


def paused_result(run: Run) -> RunResult[Any]:
    result = RunResult("" if run._output is None else None, run.messages, run.usage, run.state, run.id, status="paused")
    result._run = run
    return result


def in_call_order(response: ModelResponse, answers: list[Message], settled: dict[str | None, Message]) -> list[Message]:
    """The answers of a resumed batch merged with those settled before it, in the order the model asked."""
    fresh = {message.tool_call_id: message for message in answers}
    return [settled.get(request.id) or fresh[request.id] for request in response.tool_calls]
