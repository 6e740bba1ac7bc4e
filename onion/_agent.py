"""The agent: its settings and its entry points; the loop itself is `onion._loop`."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable, Coroutine, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar, overload

from . import _chains
from ._boundary import admitted, decided_in_place, watched
from ._calls import Model
from ._durable import Decisions, decide, journaled, recover, resume_run, run_in_session, session_of
from ._durable.state import RunState
from ._durable.trust import signing_keys
from ._events import Event
from ._loop import Loop, first_messages
from ._messages import Message
from ._model import resolve_model
from ._output import output_schema
from ._principal import checked
from ._run import OutputT, Run, RunResult
from ._stack import Stack, check_model, checked_by_default, profiling
from ._streaming import EventStream
from ._threads import ToolThreads, default_tool_threads
from ._tool_sources import OfferedTools, ToolSource
from ._tools import Tool, as_tool

if TYPE_CHECKING:
    from typing import Self

    from ._principal import Principal
    from .stores import Session, Store
    from .types import StateKey

    Input = str | Message | Sequence[Message]
    JSON = dict[str, Any] | None
    On = str | Session | None
    Paused = RunState | str
    Where = Session | None
    Who = Principal | None

T = TypeVar("T")


class Agent(Generic[OutputT]):
    """An LLM agent whose every call flows through its stack of middleware.

    `await agent.run(input)` asks the model and runs the tools it asks for until an answer without tools
    (`max_steps` model calls at most), validated as `output_type` (`output_retries` more tries).
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
        state_key: StateKey = None,
        state_ttl: float | None = 86400.0,
    ) -> None:
        self.model = resolve_model(model)
        self._owns_model = isinstance(model, str)
        given = list(tools)
        self.tools = [as_tool(item) for item in given if not isinstance(item, ToolSource)]
        """The agent's own tools (functions); MCP servers' tools are listed when a run needs them."""
        self.tool_sources = [item for item in given if isinstance(item, ToolSource)]
        """MCP servers (`onion.mcp.MCPServer`) given in `tools`: connected on first use, closed by `aclose()`."""
        self._offered = OfferedTools(self.tools, self.tool_sources)  # two tools of one name: ValueError
        self.instructions = instructions
        self.name = name or "agent"
        self.max_steps = max_steps
        self.parallel_tools = parallel_tools
        self.settings = dict(settings or {})
        self.checked = checked_by_default() if checked is None else checked
        self.stack = Stack(*middleware, name=self.name)
        check_model(self.stack.layers(), self.model)
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
        try:
            signing_keys(state_key)  # ONION_STATE_KEY is read again each time it is used
        except (TypeError, ValueError) as error:
            raise type(error)(f"{self.name}: {error}") from None
        self.state_key = state_key
        """Signs paused runs (`to_state()`) and checks the states `resume` is given: a key of 16 bytes or more, or
        `[new, old]` while rolling keys (the first signs, each is believed); None: `ONION_STATE_KEY`, else none."""
        if state_ttl is not None and (isinstance(state_ttl, bool) or not state_ttl > 0):
            raise ValueError(f"{self.name}: state_ttl must be positive seconds or None (any age), got {state_ttl!r}")
        self.state_ttl = state_ttl
        """Seconds a signed state is believed after it was signed (`docs/durable.md`, "What a resume trusts")."""
        self._chains: Loop | None = None

    async def aclose(self) -> None:
        """Close the MCP servers in `tools`, and the model's client if onion built it (idempotent)."""
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
        """Append middleware (innermost so far); returns the agent. A layer that refuses the agent's model
        (`check_model`) raises here, and is not added."""
        check_model(middleware, self.model)
        self.stack.use(*middleware)
        return self

    def as_tool(self, name: str | None = None, description: str | None = None, *, inherit: bool = False) -> Tool:
        """This agent as a tool of another: it takes a `task` and answers with this agent's output.

        A child of the calling run; `inherit=True` runs it through the caller's stack too (its privacy layers,
        `covers_sub_agents = True`, wrap it anyway).
        """
        from ._subagent import agent_tool

        return agent_tool(self, name, description, inherit)

    def _restacked(self, *middleware: Any) -> Self:
        """This agent with `middleware` as its stack, every other setting kept (a copy that never closes the model)."""
        derived = copy.copy(self)
        derived.stack = Stack(*middleware, name=self.name)
        derived._chains = None
        derived._owns_model = False
        return derived

    def _kept_in(self, store: Store) -> Self:
        """This agent with `store` as its store, every other setting kept (a copy that never closes the model):
        what `python -m onion runs` and `serve` build beside the agent they are given, never changing it."""
        derived = copy.copy(self)
        derived.store = store
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

    @overload
    async def run(
        self, input: Input, *, state: JSON = None, session: On = None, principal: Who = None, output_type: None = None
    ) -> RunResult[OutputT]: ...
    @overload
    async def run(
        self, input: Input, *, state: JSON = None, session: On = None, principal: Who = None, output_type: type[T]
    ) -> RunResult[T]: ...
    @overload
    async def run(
        self, input: Input, *, state: JSON = None, session: On = None, principal: Who = None, output_type: object
    ) -> RunResult[Any]: ...
    async def run(
        self, input: Input, *, state: JSON = None, session: On = None, principal: Who = None, output_type: Any = None
    ) -> RunResult[Any]:
        """Run the agent on `input` (a question, a message, or a history to continue).

        With `session` (an id in `agent.store`, or a `Session`) the run starts
        from the session's messages and, when it completes, appends its own;
        runs on one session wait for each other. `output_type` replaces the
        agent's for this run. `principal` is who the run is for (`run.principal`, journaled with it; a run for a
        tenant is that tenant's: docs/security.md).
        """
        admitted(self, session)
        loop = self._compiled()
        output_type = self.output_type if output_type is None else output_type
        watching = False
        if session is not None:
            conversation = session_of(self, session)
            result = await run_in_session(loop, input, state, output_type, conversation, None, principal)
        else:
            run = Run(self, input, first_messages(self, input), state, output_type, principal)
            watching = watched(run)
            if self.store is None:
                result = loop.finish(run, await loop.start(run))
            else:
                result = await journaled(loop, run, self.store)
        return await decided_in_place(self, result) if result.paused or watching else result

    async def recover(self, run_id: str, *, output_type: Any = None, principal: Who = None) -> RunResult[Any]:
        """Go on with the journaled run `run_id` from `agent.store` (its worker died, or it failed).

        Nothing recorded is asked or run again; a call that started with no result recorded is answered as
        interrupted (an idempotent tool's runs again). `RunBusy`: another worker holds it, or it ended;
        `ForeignRun`: it is another agent's, or another tenant's than `principal`'s.
        """
        return await self._recover(run_id, output_type, None, checked(principal))

    async def _recover(
        self, run_id: str, output_type: Any, emit: Callable[[Event], None] | None, by: Principal | None
    ) -> RunResult[Any]:
        if self.store is None:
            raise ValueError(
                f"{self.name}: resuming run {run_id!r} needs the store it was journaled in: Agent(store=...)"
            )
        output_type = self.output_type if output_type is None else output_type
        return await recover(self._compiled(), self.store, run_id, output_type, emit, by)

    @overload
    def run_sync(
        self, input: Input, *, state: JSON = None, session: On = None, principal: Who = None, output_type: None = None
    ) -> RunResult[OutputT]: ...
    @overload
    def run_sync(
        self, input: Input, *, state: JSON = None, session: On = None, principal: Who = None, output_type: type[T]
    ) -> RunResult[T]: ...
    @overload
    def run_sync(
        self, input: Input, *, state: JSON = None, session: On = None, principal: Who = None, output_type: object
    ) -> RunResult[Any]: ...
    def run_sync(
        self, input: Input, *, state: JSON = None, session: On = None, principal: Who = None, output_type: Any = None
    ) -> RunResult[Any]:
        """`run` for code without an event loop."""
        run = self.run(input, state=state, session=session, principal=principal, output_type=output_type)
        return _sync(run, "run_sync", "agent.run(...)")

    @overload
    async def resume(
        self, state: Paused, *, output_type: None = None, session: Where = None, principal: Who = None
    ) -> RunResult[OutputT]: ...
    @overload
    async def resume(
        self, state: Paused, *, output_type: type[T], session: Where = None, principal: Who = None
    ) -> RunResult[T]: ...
    @overload
    async def resume(
        self, state: Paused, *, output_type: object, session: Where = None, principal: Who = None
    ) -> RunResult[Any]: ...
    async def resume(
        self, state: Paused, *, output_type: Any = None, session: Where = None, principal: Who = None
    ) -> RunResult[Any]:
        """Go on with a paused run whose pending calls are all decided (`state.approve(...)`, ...); a run id (a
        `str`) recovers that run from `agent.store`.

        Approved and edited calls go through the tools and tool stacks with `ctx.approved` true, rejected ones
        are answered with the reason, then the loop goes on (the answer validated as `output_type`, or the
        agent's). The state is untrusted: see docs/durable.md, "What a resume trusts". The decisions are on
        record as `principal`'s (`RunResult.decisions`); a principal of another tenant than the run's is
        refused (`ForeignRun`).
        """
        return await self._resume(state, output_type, session, None, principal)

    async def _resume(
        self,
        state: Paused,
        output_type: Any,
        session: Where,
        emit: Callable[[Event], None] | None,
        by: Principal | None,
    ) -> RunResult[Any]:
        by = checked(by)
        if isinstance(state, str):
            if state.lstrip().startswith("{"):
                raise TypeError("resume() takes a RunState or a run id: load JSON text with RunState.from_json(text)")
            return await self._recover(state, output_type, emit, by)
        loop = self._compiled()
        if not isinstance(state, RunState):
            raise TypeError(f"resume() takes a RunState (RunState.from_json(text)), not {type(state).__name__}")
        output_type = self.output_type if output_type is None else output_type
        return await resume_run(loop, state, output_type, session, emit, by)

    async def decide(self, run_id: str, decisions: Decisions, *, principal: Who = None) -> RunState:
        """The paused run `run_id` of `agent.store`, its pending calls decided as `decisions` says;
        `await agent.resume(state, principal=...)` goes on with it.

        The one way onion decides (the server, `python -m onion runs` and Temporal call it). Raises
        `RunNotFound`, `ForeignRun` (another agent's run, or another tenant's than `principal`'s) and
        `DecisionRefused` (its `why` names the check: not paused, a call not pending or decided twice, one left
        undecided, an edit the tool refuses).
        """
        return await decide(self._compiled(), run_id, decisions, principal=checked(principal))

    @overload
    def resume_sync(
        self, state: Paused, *, output_type: None = None, session: Where = None, principal: Who = None
    ) -> RunResult[OutputT]: ...
    @overload
    def resume_sync(
        self, state: Paused, *, output_type: type[T], session: Where = None, principal: Who = None
    ) -> RunResult[T]: ...
    @overload
    def resume_sync(
        self, state: Paused, *, output_type: object, session: Where = None, principal: Who = None
    ) -> RunResult[Any]: ...
    def resume_sync(
        self, state: Paused, *, output_type: Any = None, session: Where = None, principal: Who = None
    ) -> RunResult[Any]:
        """`resume` for code without an event loop."""
        resumed = self.resume(state, output_type=output_type, session=session, principal=principal)
        return _sync(resumed, "resume_sync", "agent.resume(state)")

    @overload
    def stream(
        self, input: Input, *, state: JSON = None, session: On = None, principal: Who = None, output_type: None = None
    ) -> EventStream[OutputT]: ...
    @overload
    def stream(
        self, input: Input, *, state: JSON = None, session: On = None, principal: Who = None, output_type: type[T]
    ) -> EventStream[T]: ...
    @overload
    def stream(
        self, input: Input, *, state: JSON = None, session: On = None, principal: Who = None, output_type: object
    ) -> EventStream[Any]: ...
    def stream(
        self, input: Input, *, state: JSON = None, session: On = None, principal: Who = None, output_type: Any = None
    ) -> EventStream[Any]:
        """Run the agent (as `run`), yielding its events as they happen, `RunFinished` or `RunPaused` last.

        Leaving the stream cancels the run: `break` out of `async for`, `await stream.aclose()`, or the end of
        `async with agent.stream(...) as events:`.
        """

        async def produce(emit: Callable[[Event], None]) -> RunResult[Any]:
            loop, output = self._compiled(), self.output_type if output_type is None else output_type
            if session is not None:
                return await run_in_session(loop, input, state, output, session_of(self, session), emit, principal)
            run = Run(self, input, first_messages(self, input), state, output, principal)
            run.emit = emit
            return await (loop.run_through(run) if self.store is None else journaled(loop, run, self.store))

        return EventStream(produce, self.output_type if output_type is None else output_type)

    @overload
    def resume_stream(
        self, state: Paused, *, output_type: None = None, session: Where = None, principal: Who = None
    ) -> EventStream[OutputT]: ...
    @overload
    def resume_stream(
        self, state: Paused, *, output_type: type[T], session: Where = None, principal: Who = None
    ) -> EventStream[T]: ...
    @overload
    def resume_stream(
        self, state: Paused, *, output_type: object, session: Where = None, principal: Who = None
    ) -> EventStream[Any]: ...
    def resume_stream(
        self, state: Paused, *, output_type: Any = None, session: Where = None, principal: Who = None
    ) -> EventStream[Any]:
        """Resume (as `resume`: a decided `RunState`, or a run id to recover), yielding its events as they
        happen, `RunFinished` or `RunPaused` last. Leaving the stream cancels the run, as for `stream`."""
        output = self.output_type if output_type is None else output_type
        return EventStream(lambda emit: self._resume(state, output_type, session, emit, principal), output)

    def _compiled(self) -> Loop:
        """The chains, built again when the stack changed, tracing was turned on or off, or a profiler started."""
        loop, tracer, profiled = self._chains, _chains.active, profiling()
        if loop is None or loop.stale(self.stack, tracer, profiled):
            loop = self._chains = Loop(self, self._offered, self.stack, self.checked, tracer, profiled)
        return loop

    def __repr__(self) -> str:
        return f"<Agent {self.name} model={getattr(self.model, 'name', self.model)!s} tools={len(self.tools)}>"


def _sync(coroutine: Coroutine[Any, Any, T], name: str, instead: str) -> T:
    """Run `coroutine` to its end for code without an event loop (the sync entry points)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    coroutine.close()
    raise RuntimeError(f"{name}() called inside an event loop: use `await {instead}`")
