"""The agent: the loop of model calls and tool batches, each through its chain of layers."""

from __future__ import annotations

import asyncio
import copy
import json
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Generic, Literal, NamedTuple, TypeVar, overload

import pydantic

from ._boundary import BOUNDARY
from ._calls import ModelCall, ModelResponse, OutputT, Run, RunResult, ToolBatch, ToolCall, ToolResult
from ._copies import own_copy, own_message
from ._durable import finish_recovered_batch, rejection_text, resume_from_store, resume_paused, run_in_store
from ._events import (
    Event,
    ModelCallFinished,
    RunFinished,
    RunPaused,
    StreamReset,
    TextDelta,
    ToolCallStarted,
    ToolResultEvent,
)
from ._history import check_history
from ._messages import Message, ToolRequest
from ._model import Model, resolve_model
from ._output import output_schema
from ._session_runs import resume_in_session, run_in_session, session_of
from ._stack import Handler, Stack, bad_result, checked_by_default, concurrent_call_next, profiling
from ._state import PausedBatch, PendingCall, RunState, check_resumable, check_trusted, plain_state, state_key
from ._stream_edits import end_stream, send_out
from ._streaming import EventQueue
from ._threads import ToolThreads, default_tool_threads
from ._tool_sources import OfferedTools, ToolSource
from ._tools import Tool, as_tool, render, valid_text
from .errors import (
    HookFailed,
    MaxStepsExceeded,
    MiddlewareError,
    OutputValidationError,
    RunBusy,
    RunStateError,
    ToolArgumentsError,
    ToolLeftRunning,
)
from .tracing import _chains as tracing

if TYPE_CHECKING:
    from typing import Self

    from .stores import Session, Store

T = TypeVar("T")


class _Chains(NamedTuple):
    run: Handler
    model: Handler
    tools: Handler
    tool: Handler
    stack: Stack


class Agent(Generic[OutputT]):
    """An LLM agent whose every call flows through its stack of middleware.

    `await agent.run(input)` loops: call the model; if it asked for tools,
    run that batch and call the model again; stop at an answer without
    tools. `max_steps` bounds the model calls of one run.

    `output_type` (default `str`, the answer text) is any type pydantic
    validates: the final answer is validated as it (`result.output` is a
    `City`), its schema sent to the model; an answer that fails is fed back
    with the errors up to `output_retries` times, then
    `onion.errors.OutputValidationError`.
    """

    def __init__(
        self,
        model: Model | str,
        *,
        tools: Iterable[Tool | Callable[..., Any] | ToolSource] = (),
        instructions: str | None = None,
        middleware: Iterable[Any] = (),
        name: str | None = None,
        max_steps: int = 50,
        parallel_tools: bool = True,
        settings: dict[str, Any] | None = None,
        checked: bool | None = None,
        store: Store | None = None,
        lease: float = 30.0,
        tool_threads: ToolThreads | None = None,
        output_type: type[OutputT] = str,  # type: ignore[assignment]
        output_retries: int = 2,
        state_key: bytes | str | None = None,
    ) -> None:
        self.model = resolve_model(model)
        self._owns_model = isinstance(model, str)
        given = list(tools)
        self.tools = [as_tool(item) for item in given if not isinstance(item, ToolSource)]
        """The agent's own tools (functions); MCP servers' tools are listed when a run needs them."""
        self.tool_sources = [item for item in given if isinstance(item, ToolSource)]
        """MCP servers (`onion.mcp.MCPServer`) given in `tools`: connected on first use, closed by `aclose()`."""
        self._tools_by_name = {item.name: item for item in self.tools}
        self._offered = OfferedTools(self.tools, self.tool_sources)
        if len(self._tools_by_name) != len(self.tools):
            names = [item.name for item in self.tools]
            duplicates = sorted({name for name in names if names.count(name) > 1})
            raise ValueError(
                f"two tools share the name {', '.join(map(repr, duplicates))}: rename one (@tool(name=...))"
            )
        self.instructions = instructions
        self.name = name or "agent"
        self.max_steps = max_steps
        self.parallel_tools = parallel_tools
        self.settings = dict(settings or {})
        self.checked = checked_by_default() if checked is None else checked
        self.stack = Stack(*middleware, name=self.name)
        self.store = store
        """Where runs are journaled and sessions kept (`onion.stores`); None: runs live in memory only."""
        if lease <= 0:
            raise ValueError(f"{self.name}: lease must be positive seconds, got {lease!r}")
        self.lease = lease
        """Seconds a worker holds a journaled run without renewing it (it renews every lease / 3)."""
        self.tool_threads = tool_threads or default_tool_threads
        """The threads sync tools run in (`onion.ToolThreads`; default: 32 shared by every agent)."""
        if output_type is not str:
            output_schema(output_type)  # a type pydantic cannot take fails here, naming it
        self.output_type = output_type
        """The type final answers are validated as, unless a run gives its own (`run(..., output_type=)`)."""
        if not isinstance(output_retries, int) or isinstance(output_retries, bool) or output_retries < 0:
            raise ValueError(f"{self.name}: output_retries must be a non-negative int, got {output_retries!r}")
        self.output_retries = output_retries
        """How many more answers a run asks for after one fails validation as `output_type`."""
        self.state_key = state_key
        """Signs paused runs (`to_state()`) and checks the states `resume` is given (else `ONION_STATE_KEY`)."""
        self._chains: _Chains | None = None
        self._version = -1
        self._tracing: tracing.Switch | None = None
        self._profiled = False

    async def aclose(self) -> None:
        """Close the MCP servers in `tools` and the model's client if onion built it (a model given as a string).

        Idempotent; a server closed here is connected again if the agent runs again.
        """
        for source in self.tool_sources:
            await source.aclose()
        close = getattr(self.model, "aclose", None)
        if self._owns_model and close is not None:
            await close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def use(self, *middleware: Any) -> Self:
        """Append middleware (innermost so far); returns the agent."""
        self.stack.use(*middleware)
        return self

    def as_tool(self, name: str | None = None, description: str | None = None, *, inherit: bool = False) -> Tool:
        """This agent as a tool of another: it takes a `task` and answers with this agent's output.

        The run is a child of the calling run: cancelling that cancels it,
        its usage is added to it. `inherit=True` runs it through the calling
        agent's stack (outermost) as well as this agent's own; without it, the
        calling agent's privacy layers (`pseudonymize`, `redact`: layers with
        `covers_sub_agents = True`) still wrap it, so what the parent hides
        from its model never reaches the child's.
        """
        from ._subagent import agent_tool

        return agent_tool(self, name, description, inherit)

    def _restacked(self, *middleware: Any) -> Self:
        """This agent with `middleware` as its stack instead of its own, every other setting kept.

        A shallow copy, so a setting added to `Agent` later carries over
        without being named here; the chains built from the stack are built
        again, and the copy never closes the model (this agent owns it).
        """
        derived = copy.copy(self)
        derived.stack = Stack(*middleware, name=self.name)
        derived._chains = None
        derived._owns_model = False
        return derived

    def on(
        self, event: str, matcher: Any = None, *, errors: Literal["raise", "log"] = "raise"
    ) -> Callable[[Callable[..., Any]], Any]:
        """Decorator adding a hook for `event` (see `onion.hooks`) to this agent only."""
        from . import hooks

        def add(function: Callable[..., Any]) -> Callable[..., Any]:
            self.use(hooks.hook(event, function, matcher, errors=errors))
            return function

        return add

    # -- running ---------------------------------------------------------------

    @overload
    async def run(
        self,
        input: str | Message | Sequence[Message],
        *,
        state: dict[str, Any] | None = None,
        session: str | Session | None = None,
        output_type: None = None,
    ) -> RunResult[OutputT]: ...
    @overload
    async def run(
        self,
        input: str | Message | Sequence[Message],
        *,
        state: dict[str, Any] | None = None,
        session: str | Session | None = None,
        output_type: type[T],
    ) -> RunResult[T]: ...
    @overload
    async def run(
        self,
        input: str | Message | Sequence[Message],
        *,
        state: dict[str, Any] | None = None,
        session: str | Session | None = None,
        output_type: object,
    ) -> RunResult[Any]: ...
    async def run(
        self,
        input: str | Message | Sequence[Message],
        *,
        state: dict[str, Any] | None = None,
        session: str | Session | None = None,
        output_type: Any = None,
    ) -> RunResult[Any]:
        """Run the agent on `input` (a question, a message, or a history to continue).

        With `session` (an id in `agent.store`, or a `Session`) the run starts
        from the session's messages and, when it completes, appends its new
        ones; runs on one session wait for each other. `output_type` replaces
        the agent's for this run.
        """
        chains = self._compiled()
        output_type = self.output_type if output_type is None else output_type
        if session is not None:
            return await run_in_session(self, chains, input, state, output_type, session_of(self, session), None)
        run = Run(self, input, self._first_messages(input), state, output_type)
        if self.store is None:
            return await self._run_chain(chains, run)
        return await self._run(chains, run)

    async def recover(self, run_id: str, *, output_type: Any = None) -> RunResult[Any]:
        """Resume the journaled run `run_id` (its worker died, or it failed) from `agent.store`.

        Recorded model responses are not requested again and finished tool
        calls not run again; a call that started without a recorded result
        is answered as interrupted, unless its tool is idempotent (it runs
        again). Raises `RunBusy` when another worker holds the run or it has
        ended, `RunNotFound` when the store never saw it.
        """
        if self.store is None:
            raise ValueError(
                f"{self.name}: resuming run {run_id!r} needs the store it was journaled in: Agent(store=...)"
            )
        return await resume_from_store(
            self, self.store, run_id, self.output_type if output_type is None else output_type
        )

    @overload
    def run_sync(
        self,
        input: str | Message | Sequence[Message],
        *,
        state: dict[str, Any] | None = None,
        session: str | Session | None = None,
        output_type: None = None,
    ) -> RunResult[OutputT]: ...
    @overload
    def run_sync(
        self,
        input: str | Message | Sequence[Message],
        *,
        state: dict[str, Any] | None = None,
        session: str | Session | None = None,
        output_type: type[T],
    ) -> RunResult[T]: ...
    @overload
    def run_sync(
        self,
        input: str | Message | Sequence[Message],
        *,
        state: dict[str, Any] | None = None,
        session: str | Session | None = None,
        output_type: object,
    ) -> RunResult[Any]: ...
    def run_sync(
        self,
        input: str | Message | Sequence[Message],
        *,
        state: dict[str, Any] | None = None,
        session: str | Session | None = None,
        output_type: Any = None,
    ) -> RunResult[Any]:
        """`run` for code without an event loop."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            raise RuntimeError("run_sync() called inside an event loop: use `await agent.run(...)`")
        return asyncio.run(self.run(input, state=state, session=session, output_type=output_type))

    @overload
    async def resume(
        self, state: RunState | str, *, output_type: None = None, session: Session | None = None
    ) -> RunResult[OutputT]: ...
    @overload
    async def resume(
        self, state: RunState | str, *, output_type: type[T], session: Session | None = None
    ) -> RunResult[T]: ...
    @overload
    async def resume(
        self, state: RunState | str, *, output_type: object, session: Session | None = None
    ) -> RunResult[Any]: ...
    async def resume(
        self, state: RunState | str, *, output_type: Any = None, session: Session | None = None
    ) -> RunResult[Any]:
        """Go on with a paused run whose pending calls are all decided (`state.approve(...)`, ...).

        Approved and edited calls go through the whole tools and tool stacks
        with `ctx.approved` true; rejected ones are answered with an error
        carrying the reason; the batch's results keep call order; then the loop
        goes on. Raises `onion.errors.RunStateError` for a completed run,
        undecided calls, or pending calls of tools this agent does not have.
        A run id (a `str`) resumes that run from `agent.store` (`recover`).
        A state does not carry its output type: the final answer is validated
        as `output_type`, or the agent's.

        The state is untrusted input. With a store, the run the store saved
        goes on, with `state`'s decisions (once: a batch decided already is a
        `RunStateError`); without one, a state this agent must have signed
        (`state_key`) is checked, and any state must fit together. A run that
        paused on a session of a store this agent does not have needs that
        `session` to append its turn to.
        """
        if isinstance(state, str):
            if state.lstrip().startswith("{"):
                raise TypeError("resume() takes a RunState or a run id: load JSON text with RunState.from_json(text)")
            return await self.recover(state, output_type=output_type)
        chains = self._compiled()
        if not isinstance(state, RunState):
            raise TypeError(f"resume() takes a RunState (RunState.from_json(text)), not {type(state).__name__}")
        output_type = self.output_type if output_type is None else output_type
        if self.store is not None:
            return await resume_paused(self, chains, state, output_type, self.store, session)
        check_trusted(state, state_key(self.state_key))
        run = self._resumed_run(state, output_type, await self._known_tools(None))
        if state.session is None:
            return await self._run_chain(chains, run)
        return await resume_in_session(self, chains, run, session)

    @overload
    def resume_sync(
        self, state: RunState | str, *, output_type: None = None, session: Session | None = None
    ) -> RunResult[OutputT]: ...
    @overload
    def resume_sync(
        self, state: RunState | str, *, output_type: type[T], session: Session | None = None
    ) -> RunResult[T]: ...
    @overload
    def resume_sync(
        self, state: RunState | str, *, output_type: object, session: Session | None = None
    ) -> RunResult[Any]: ...
    def resume_sync(
        self, state: RunState | str, *, output_type: Any = None, session: Session | None = None
    ) -> RunResult[Any]:
        """`resume` for code without an event loop."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            raise RuntimeError("resume_sync() called inside an event loop: use `await agent.resume(state)`")
        return asyncio.run(self.resume(state, output_type=output_type, session=session))

    async def stream(
        self,
        input: str | Message | Sequence[Message],
        *,
        state: dict[str, Any] | None = None,
        session: str | Session | None = None,
        output_type: Any = None,
    ) -> AsyncIterator[Event]:
        """Run the agent, yielding events as they happen; the last is `RunFinished`.

        Its `result.output` is the validated output (`output_type`, or the
        agent's). Leaving the loop early cancels the run. `session` as for `run`.
        """
        chains = self._compiled()
        output_type = self.output_type if output_type is None else output_type
        queue = EventQueue()
        conversation = None if session is None else session_of(self, session)

        async def produce() -> RunResult[Any]:
            try:
                if conversation is not None:
                    return await run_in_session(self, chains, input, state, output_type, conversation, queue.put)
                run = Run(self, input, self._first_messages(input), state, output_type)
                run.emit = queue.put
                return await self._run(chains, run)
            finally:
                queue.end()

        task = asyncio.ensure_future(produce())
        try:
            while (event := await queue.get()) is not None:
                yield event
            result = await task
            yield RunPaused(result, result.to_state()) if result.paused else RunFinished(result)
        finally:
            if not task.done():
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
            elif not task.cancelled():
                task.exception()  # the consumer left after the run failed: retrieved, so asyncio logs nothing

    async def _run(self, chains: _Chains, run: Run) -> RunResult[Any]:
        if self.store is not None:
            return await run_in_store(self, chains, run, self.store, None)
        return await self._run_chain(chains, run)

    async def _run_chain(self, chains: _Chains, run: Run) -> RunResult[Any]:
        result = await chains.run(run)
        if not isinstance(result, RunResult):
            raise bad_result(chains.stack, "run", result)
        if run._injected and result.status != "paused":
            run.flush_injected()
        return result

    def _resumed_run(self, state: RunState, output_type: Any, tools: dict[str, Tool]) -> Run:
        """A `Run` going on from `state`, after checking that it can (with `tools`, every tool the agent has)."""
        check_resumable(state, self.name, tools)
        run = Run(self, state.input, list(state.messages), plain_state(state.state), output_type)
        run.id = state.run_id
        run.session, run.session_from = state.session, state.session_from
        run.steps = state.steps
        run.private = json.loads(json.dumps(state.private))
        run.usage.add(state.usage)
        run._injected.extend(state.injected)
        run._resumed = state
        return run

    def _first_messages(self, input: str | Message | Sequence[Message]) -> list[Message]:
        """The run's history to start from: copies, so layers editing it never reach the caller's messages."""
        if isinstance(input, str):
            messages = [Message("user", input)]
        elif isinstance(input, Message):
            messages = [own_message(input)]
        else:
            given = list(input)
            if not all(isinstance(m, Message) for m in given):
                raise TypeError("input must be a str, a Message, or a sequence of Messages")
            messages = [own_message(m) for m in given]
        if self.instructions and not (messages and messages[0].role == "system"):
            messages.insert(0, Message.system(self.instructions))
        return messages

    def _compiled(self) -> _Chains:
        """The chains, built again when the stack changed, tracing was turned on or off, or a profiler (see `bind`)."""
        profiled = profiling()
        if (
            self._chains is None
            or self._version != self.stack.version
            or self._tracing is not tracing.active
            or self._profiled is not profiled
        ):
            stack, checked, switch = self.stack, self.checked, tracing.active
            self._chains = _Chains(
                tracing.compose(stack, "run", self._loop, checked, switch),
                tracing.compose(stack, "model", self._request, checked, switch),
                tracing.compose(stack, "tools", self._run_batch, checked, switch),
                tracing.compose(stack, "tool", self._execute, checked, switch),
                stack,
            )
            self._version, self._tracing, self._profiled = self.stack.version, switch, profiled
        return self._chains

    # -- the loop --------------------------------------------------------------

    async def _loop(self, run: Run) -> RunResult[Any]:
        chains = self._compiled()
        if run.journal is not None:
            await run.journal.begin_now(run)
        recovered = run.journal.recovered if run.journal is not None else None
        answered = None  # a final answer the journal holds: it goes through the run's layers like any
        if recovered is not None and recovered.completed:
            run.journal.recovered = None  # type: ignore[union-attr]
            answered = run.messages[-1]
        elif recovered is not None and await finish_recovered_batch(self, run, chains):
            return _paused_result(run)
        if run._resumed is not None and await self._resume_batch(run, run._resumed, chains):
            return _paused_result(run)
        failures = 0
        if answered is not None:
            if (result := self._answer(run, answered, failures)) is not None:
                return result
            failures += 1
        while True:
            if run._injected:
                run.flush_injected()
            if run.steps >= self.max_steps:
                raise MaxStepsExceeded(
                    f"{self.name} made {run.steps} model calls without a final answer (max_steps={self.max_steps})",
                    messages=run.messages,
                    usage=run.usage,
                )
            run.steps += 1
            offered = await self._offered.now(run) if self.tool_sources else self.tools
            call = ModelCall(run, list(run.messages), list(offered), self.model, self.settings)
            response = await chains.model(call)
            if not isinstance(response, ModelResponse):
                raise bad_result(chains.stack, "model", response)
            message = response.message
            counted = call._counted
            if counted is None or (counted[-1] is not response.usage and call._uncounted(response)):
                run.usage.add(response.usage)
            if run.emit is not None:
                self._emit_response(run, call, response)
            run.messages.append(message)
            if run.journal is not None:
                run.journal.model(run, response)
            requests = message.tool_calls
            if not requests:
                if (result := self._answer(run, message, failures)) is not None:
                    return result
                failures += 1
                continue
            if run.steps >= self.max_steps:
                for request in requests:
                    run.messages.append(Message.tool(request.id, "Not run: the agent reached max_steps.", True))
                continue
            calls = []
            for request in requests:
                tool = self._offered.by_name.get(request.name)
                if tool is None or tool not in call.tools:  # not the agent's own, or a layer changed the offer
                    tool = self._tool_for(call.tools, request.name)
                calls.append(ToolCall(run, request, tool))
            if await self._tool_step(run, response, chains, calls, requests, None):
                return _paused_result(run)

    def _answer(self, run: Run, message: Message, failures: int) -> RunResult[Any] | None:
        """The run's result for its final answer `message`; None when the answer failed validation as the
        output type (the errors are fed back for another), `OutputValidationError` after `output_retries`."""
        if run._output is None:
            output: Any = message.text
        else:
            try:
                output = run._output.validate(message.text)
            except pydantic.ValidationError as error:
                if failures + 1 > self.output_retries:
                    raise _invalid_output(self, run, message.text, error, failures + 1) from None
                run.messages.append(Message.user(run._output.feedback(error)))
                return None
        if run._injected:
            run.flush_injected()
        result = RunResult(output, run.messages, run.usage, run.state, run.id)
        result._run = run
        return result

    async def _resume_batch(self, run: Run, state: RunState, chains: _Chains) -> bool:
        """Finish the batch a run paused in: approved and edited calls run, rejected ones are answered."""
        run._resumed = None
        settled = {message.tool_call_id: message for message in state.answered}
        requests = []
        for pending in state.pending:
            if pending.decision == "rejected":
                text = rejection_text(pending.name, pending.rejection)
                settled[pending.id] = Message.tool(pending.id, text, True)
            else:
                args = pending.edited_args if pending.decision == "edited" else pending.args
                requests.append(ToolRequest(pending.id, pending.name, dict(args or {})))
        tools = await self._known_tools(run)
        calls = [ToolCall(run, request, tools.get(request.name), True) for request in requests]
        response = ModelResponse(run.messages[-1])
        return await self._tool_step(run, response, chains, calls, requests, settled)

    def _tool_for(self, offered: list[Tool], name: str) -> Tool | None:
        """The tool a request names when a layer changed what its model call offered: among those, else the agent's."""
        for tool in offered:
            if tool.name == name:
                return tool
        return self._offered.by_name.get(name)

    async def _known_tools(self, run: Run | None) -> dict[str, Tool]:
        """Every tool the agent has now, by name: its own and its MCP servers' (listed if need be)."""
        if self.tool_sources:
            await self._offered.now(run)
        return self._offered.by_name

    async def _tool_step(
        self,
        run: Run,
        response: ModelResponse,
        chains: _Chains,
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
            results = await chains.tools(ToolBatch(run, calls, response)) if calls else []
            if not isinstance(results, list) or len(results) != len(calls):
                raise bad_result(chains.stack, "tools", results, expected_count=len(calls))
            answers = []
            paused = False
            for call, result in zip(calls, results, strict=True):
                if not isinstance(result, ToolResult):
                    raise bad_result(chains.stack, "tools", results, expected_count=len(calls))
                paused = paused or call.pause_reason is not None
                content = result.content
                if type(content) is str:
                    text = content if content.isascii() else valid_text(content)
                    answers.append(Message("tool", text, [], call.id, result.is_error))
                else:
                    answers.append(Message.tool(call.id, content, result.is_error))
            if settled is not None:
                answers = _in_call_order(response, answers, settled)
        except BaseException as error:
            reason = "the run was cancelled" if isinstance(error, asyncio.CancelledError) else type(error).__name__
            for request in response.tool_calls:
                known = settled.get(request.id) if settled is not None else None
                run.messages.append(
                    known or Message.tool(request.id, f"No result: the batch stopped ({reason}).", True)
                )
            raise
        if paused:
            self._pause(run, calls, requests, answers)
            return True
        run.messages.extend(answers)
        return False

    def _pause(self, run: Run, calls: list[ToolCall], requests: list[ToolRequest], answers: list[Message]) -> None:
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

    def _emit_response(self, run: Run, call: ModelCall, response: ModelResponse) -> None:
        assert run.emit is not None
        if not call.streamed and response.text:
            run.emit(TextDelta(response.text))
        for request in response.tool_calls:
            run.emit(ToolCallStarted(request.id, request.name, own_copy(request.args)))
        run.emit(ModelCallFinished(response, response.usage, response.cached))

    async def _request(self, call: ModelCall) -> ModelResponse:
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
                response = await self._stream_request(call, stream)
            else:
                if call.streamed:  # a model that does not stream replaces a partial stream
                    send_out(call, (StreamReset(),), len(call._edits or ()))
                    call.streamed = False
                response = await model.request(call)
        finally:
            call._entered = False
        if not isinstance(response, ModelResponse):
            raise TypeError(
                f"model {call.model!r} returned {type(response).__name__} {response!r:.80} "
                "where request() must return an onion.ModelResponse"
            )
        call._produced(response)
        return response

    async def _stream_request(
        self, call: ModelCall, stream: Callable[[ModelCall], AsyncIterator[Any]]
    ) -> ModelResponse:
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

    async def _run_batch(self, batch: ToolBatch) -> list[ToolResult]:
        calls, chains = batch.calls, self._compiled()
        if len(calls) <= 1 or not self.parallel_tools:
            return [await self._one(call, chains) for call in calls]
        try:
            async with asyncio.TaskGroup() as group:
                tasks = [group.create_task(self._one(call, chains)) for call in calls[1:]]
                first = await self._one(calls[0], chains)
        except BaseExceptionGroup as failures:
            raise failures.exceptions[0] from None
        results = [first]
        for task in tasks:
            results.append(task.result())
        return results

    async def _one(self, call: ToolCall, chains: _Chains) -> ToolResult:
        """One call through the tool chain; what escapes it becomes an error result.

        Not a hook's failure (`HookFailed`): that stops the run with the hook's own exception.
        """
        try:
            result = await chains.tool(call)
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
        if not isinstance(result, ToolResult):
            raise bad_result(chains.stack, "tool", result)
        if call.pause_reason is not None:
            return result
        if call.run.journal is not None:
            await call.run.journal.finished(call, result)
        if call.run.emit is not None:
            call.run.emit(ToolResultEvent(call.id, call.name, result))
        return result

    async def _execute(self, call: ToolCall) -> ToolResult:
        """The innermost point of the tool chain: validate the arguments, run the tool."""
        tool = call.tool
        if tool is None:
            names = ", ".join(self._offered.by_name) or "none"
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
        try:
            if call.run.journal is not None:
                await call.run.journal.started(call)
            boundary = BOUNDARY.get()
            if boundary is None:
                value = await tool.invoke(args, call, self.tool_threads)
            else:
                value = await boundary.tool(call, lambda: tool.invoke(args, call, self.tool_threads))
        finally:
            call._entered = False
        if isinstance(value, ToolResult):  # the tool answered itself (an MCP server's isError result, ...)
            if not value.call_id:
                value.call_id = call.id
            return value
        return ToolResult(content=render(value), call_id=call.id, value=value)

    def __repr__(self) -> str:
        return f"<Agent {self.name} model={getattr(self.model, 'name', self.model)!s} tools={len(self.tools)}>"


def _invalid_output(
    agent: Agent[Any], run: Run, text: str, error: pydantic.ValidationError, answers: int
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


def _paused_result(run: Run) -> RunResult[Any]:
    result = RunResult("" if run._output is None else None, run.messages, run.usage, run.state, run.id, status="paused")
    result._run = run
    return result


def _in_call_order(
    response: ModelResponse, answers: list[Message], settled: dict[str | None, Message]
) -> list[Message]:
    """The answers of a resumed batch merged with those settled before it, in the order the model asked."""
    fresh = {message.tool_call_id: message for message in answers}
    return [settled.get(request.id) or fresh[request.id] for request in response.tool_calls]
