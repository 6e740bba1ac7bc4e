"""The tool step of a run: one batch through the tools chain, each call through the tool chain, answered in order.

`ToolStep` is the part of a `Loop` (`onion._loop`) that runs tools; a paused
batch is kept aside here (`pause`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Collection, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from . import clock
from ._boundary import BOUNDARY
from ._calls import ToolBatch, ToolCall
from ._copies import MUTABLE, own_copy
from ._durable.state import PausedBatch, PendingCall, plain_state
from ._events import ToolResultEvent
from ._messages import Message, ToolRequest
from ._results import ModelResponse, ToolResult
from ._run import Run
from ._stack import bad_result, concurrent_call_next
from ._text import valid_text
from ._tools import Tool, render
from .errors import HookFailed, MiddlewareError, RunBusy, RunStateError, ToolArgumentsError, ToolLeftRunning

if TYPE_CHECKING:
    from ._stack import Stack
    from ._threads import ToolThreads
    from ._tool_sources import OfferedTools
    from .types import Handler


class ToolsAgent(Protocol):
    """What the tool step reads of its agent (`onion.Agent` is one)."""

    @property
    def parallel_tools(self) -> bool: ...

    @property
    def tool_threads(self) -> ToolThreads: ...


class ToolStep:
    """The tool step and the innermost handlers of the tools and tool chains (a `Loop` is one)."""

    __slots__ = ()
    agent: ToolsAgent
    offered: OfferedTools
    stack: Stack
    tools_chain: Handler
    tool_chain: Handler

    async def tool_step(
        self,
        run: Run,
        response: ModelResponse,
        calls: list[ToolCall],
        requests: list[ToolRequest],
        settled: dict[str | None, Message] | None,
        held: Sequence[ToolCall] = (),
    ) -> bool:
        """Run `calls` as one batch and answer every call of `response`, in call order.

        `settled` holds answers known before the batch; `held` are calls that may have run, paused for a person
        without running (`onion._in_doubt`). True when a call is paused (the answers are kept aside in
        `run._paused`). A failed or cancelled batch answers every call with an error, then raises.
        """
        try:
            results = await self.tools_chain(ToolBatch(run, calls, response)) if calls else []
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
                    answers.append(Message("tool", text, [], call.id, result.is_error, untrusted=result.untrusted))
                else:
                    answers.append(Message.tool(call.id, content, result.is_error, untrusted=result.untrusted))
            if held:
                paused = True
                answers += [Message.tool(call.id, "") for call in held]  # placeholders: the calls are pending
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
            asked = [ToolRequest(call.id, call.name, call._asked) for call in held]
            pause(run, [*calls, *held], [*requests, *asked], answers, {call.id for call in held})
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
        side = SideBySide(current, self.one)
        create = asyncio.get_running_loop().create_task
        tasks = [create(side.one(call)) for call in calls[1:]]
        try:
            try:
                results = [await self.one(calls[0])]
            finally:
                side.first_running = False
            for task in tasks:
                results.append(await task)
        except BaseException as error:
            failed, side.stopped = side.failed, True
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            if failed is not None and isinstance(error, asyncio.CancelledError) and current.uncancel() == 0:
                raise failed from None
            raise
        return results

    async def one(self, call: ToolCall) -> ToolResult:
        """One call through the tool chain; what escapes it becomes an error result.

        Not a hook's failure (`HookFailed`): that stops the run with the hook's own exception.
        """
        try:
            result = await self.tool_chain(call)
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
        tool = call.tool
        if tool is not None and tool.untrusted:  # whoever answered (the tool, a cache, a layer): outside content
            result.untrusted = True
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
        arguments = call._args
        if arguments is None:  # no layer read them: the model's own, unless a tool could change them there
            arguments = call._asked
            if not MUTABLE.isdisjoint(map(type, arguments.values())):
                arguments = call.args
        if call.raw_args is not None and not arguments:
            return ToolResult(
                content=f"The arguments for {call.name} were not valid JSON ({call.raw_args!r:.200}). "
                "Send a JSON object matching the tool's parameters.",
                is_error=True,
                call_id=call.id,
            )
        try:
            args = tool.validate(arguments)
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
            if boundary is not None:
                value = await boundary.tool(call, lambda: tool.invoke(args, call, threads))
            elif type(tool) is Tool and tool.is_async and tool._context_parameter is None:
                try:  # what invoke does for a plain async function, without a coroutine of its own
                    value = await tool.function(**args)
                except asyncio.CancelledError:
                    call.cancelled.set()
                    raise
                except Exception:
                    raise
                except BaseException as error:
                    raise tool.aborted(error) from error
            else:
                value = await tool.invoke(args, call, threads)
        finally:
            call._entered = False
        if isinstance(value, ToolResult):  # the tool answered itself (an MCP server's isError result, ...)
            if not value.call_id:
                value.call_id = call.id
            if tool.untrusted:
                value.untrusted = True
            return value
        return ToolResult(content=render(value), call_id=call.id, value=value, untrusted=tool.untrusted)


class SideBySide:
    """One batch's calls in tasks of their own: the first failure among them cancels the first call's task."""

    __slots__ = ("current", "failed", "first_running", "run_one", "stopped")

    def __init__(self, current: asyncio.Task[Any], run_one: Callable[[ToolCall], Awaitable[ToolResult]]) -> None:
        self.current = current
        self.run_one = run_one
        self.failed: BaseException | None = None
        self.first_running = True
        self.stopped = False
        """Set once the batch stopped (it cancels the tasks): a failure after that is not the batch's."""

    async def one(self, call: ToolCall) -> ToolResult:
        """`call` in a task of its own: its failure, the batch's first, is kept and stops the first call if it runs.

        (What a done callback would do, without a callback scheduled for every task.)
        """
        try:
            return await self.run_one(call)
        except BaseException as error:
            if not isinstance(error, asyncio.CancelledError) and self.failed is None and not self.stopped:
                self.failed = error
                if self.first_running:  # stop the first call where it waits, as a task group would
                    self.current.cancel()
            raise


def pause(
    run: Run,
    calls: list[ToolCall],
    requests: list[ToolRequest],
    answers: list[Message],
    in_doubt: Collection[str] = (),
) -> None:
    """Keep a paused batch aside: its pending calls (with the arguments asked for) and the answers so far.

    `in_doubt`: the ids of calls pending because they may have run (kind `"in_doubt"`). If `run.state` cannot be
    saved, the paused calls are answered as not run and the error propagates.
    """
    pending = [
        PendingCall(
            call.id,
            call.name,
            own_copy(request.args),
            call.pause_reason,
            kind="in_doubt" if call.id in in_doubt else "tool",
        )
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
    run._paused = PausedBatch([m for m in answers if m.tool_call_id not in waiting], pending, clock.uuid4().hex)


def in_call_order(response: ModelResponse, answers: list[Message], settled: dict[str | None, Message]) -> list[Message]:
    """The answers of a resumed batch merged with those settled before it, in the order the model asked."""
    fresh = {message.tool_call_id: message for message in answers}
    return [settled.get(request.id) or fresh[request.id] for request in response.tool_calls]
