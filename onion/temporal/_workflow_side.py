"""Inside a workflow: each model call and each tool call of `agent.run` becomes an activity.

The run's layers (run, model, tools and tool chains) run in the workflow,
deterministically; only the innermost points, the model's answer and the
tool's own work, leave it. A model response or a tool result received is in
the workflow's history, so a replacement worker never asks for it again.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, CancelledError, TimeoutError
from temporalio.workflow import ActivityCancellationType

from .._calls import ModelCall, ToolCall
from .._in_doubt import MAY_HAVE_RUN
from .._results import ModelResponse, ToolResult
from .._text import valid_text
from .._tools import Tool
from ._activities import MISSING, model_activity_name, reconcile_activity_name, tool_activity_name, tool_call_data
from ._approvals import listen, wait_for_decisions
from ._determinism import NotDeterministic, refuse_nondeterministic, unregistered
from ._events import EventLog
from ._options import ActivityOptions
from ._wire import call_data, model_error_from, response_from, result_from

_ONCE = RetryPolicy(maximum_attempts=1)
_WAIT = ActivityCancellationType.WAIT_CANCELLATION_COMPLETED
"""A cancelled call's activity is waited for until it stopped (its heartbeat saw the cancellation)."""


def cancelled(failure: ActivityError) -> asyncio.CancelledError | None:
    """The `CancelledError` a run outside a workflow sees where the activity of its call was cancelled (the
    workflow cancelled, a `timeout` layer's deadline, a failed call of the same batch), else None."""
    if not isinstance(failure.cause, CancelledError):
        return None
    return asyncio.CancelledError(str(failure.cause))


class ActivityModel:
    """A workflow's stand-in for a model: `request(call)` asks the real model in the agent's model activity.

    The activity is sent only the messages added since the run's last model call, and the digest of those
    before (`sent`), so the history records a conversation about once, not once a step; a worker that does
    not keep the rest answers `ConversationMissing`, and the call is sent whole.
    """

    def __init__(self, model: Any, options: ActivityOptions, sent: dict[str, list[str]]) -> None:
        self.model = model
        self.name = str(getattr(model, "name", type(model).__name__))
        self.options = options
        self.sent = sent

    async def request(self, call: ModelCall) -> ModelResponse:
        data = call_data(call, self.name)
        output = data["output"]
        if output is not None:  # where the worker finds the type: a run's own output_type is not the agent's
            kind = call.output_type
            output["type"] = f"{getattr(kind, '__module__', '')}:{getattr(kind, '__qualname__', '')}"
        run_id, messages = call.run.id, data["messages"]
        digests = [_digest(message) for message in messages]
        before = self.sent.get(run_id)
        data["keep"] = {"run": run_id, "digest": _chain(digests)}
        if before and digests[: len(before)] == before:
            try:
                return await self._asked(
                    call,
                    {**data, "messages": messages[len(before) :], "since": {"run": run_id, "digest": _chain(before)}},
                    digests,
                )
            except ActivityError as failure:
                if not _missing(failure):
                    raise
        return await self._asked(call, data, digests)

    async def _asked(self, call: ModelCall, data: dict[str, Any], digests: list[str]) -> ModelResponse:
        options = self.options
        try:
            answer = await workflow.execute_activity(
                model_activity_name(call.run.agent.name),
                data,
                start_to_close_timeout=options.start_to_close_timeout,
                heartbeat_timeout=options.heartbeat_timeout,
                retry_policy=options.retry,
                cancellation_type=_WAIT,
                result_type=dict,
            )
        except ActivityError as failure:
            if _missing(failure):
                raise
            self.sent[call.run.id] = digests  # the worker kept it before it asked the model
            if (stopped := cancelled(failure)) is not None:
                raise stopped from failure
            raise model_error_from(failure) from failure
        self.sent[call.run.id] = digests
        return response_from(answer)


def _digest(message: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(message, sort_keys=True).encode()).hexdigest()[:32]


def _chain(digests: list[str]) -> str:
    """One digest for a conversation: its messages' digests, in order."""
    return hashlib.sha256("".join(digests).encode()).hexdigest()[:32]


def _missing(failure: ActivityError) -> bool:
    cause = failure.cause
    return isinstance(cause, ApplicationError) and cause.type == MISSING


class WorkflowClock:
    """The workflow's time, ids and random numbers (`onion.clock` in workflow code): the same when it replays."""

    def time(self) -> float:
        return workflow.time()

    def monotonic(self) -> float:
        return workflow.time()

    def uuid4(self) -> uuid.UUID:
        return workflow.uuid4()

    def random(self) -> float:
        return workflow.random().random()

    def replaying(self) -> bool:
        return workflow.unsafe.is_replaying()


class WorkflowBoundary:
    """onion's model and tool boundary while a workflow runs: models and tools answer from activities."""

    def __init__(self, options: ActivityOptions, tools: dict[str, set[str]], waiting_attribute: str | None) -> None:
        self.options = options
        self.tools = tools
        """The tools that have an activity, by agent name."""
        self.decisions = listen(waiting_attribute)
        self.sent: dict[str, list[str]] = {}
        """The digests of the messages each run's last model activity was sent (`ActivityModel`)."""
        self.log = EventLog()
        """Every run's events, numbered (`onion.temporal.events` and `follow` read it)."""
        """The pause's calls and the decisions `decide` sent (`pending` answers from them)."""

    def admit(self, agent: Any, session: Any) -> None:
        """Refuses, before anything runs, what a run in workflow code cannot use: an agent with no activities on
        this worker, a layer that cannot replay (`refuse_nondeterministic`), a store, a session."""
        if agent.name not in self.tools:
            raise NotDeterministic(f"a run of agent {agent.name!r} in workflow code: {unregistered(agent.name)}")
        refuse_nondeterministic(agent, self.tools)
        if agent.store is not None:
            raise NotDeterministic(
                f"agent {agent.name} has a store ({agent.store!r}): inside a Temporal workflow, Temporal's history is "
                "the run's journal, and a store's reads and writes cannot run in workflow code. Run an agent without "
                "store= in the workflow"
            )
        if session is not None:
            raise NotDeterministic(
                f"agent {agent.name}: session {getattr(session, 'session_id', session)!r} cannot be used inside a "
                "Temporal workflow (a session is kept in a store, read and written outside the workflow's history). "
                "Keep the conversation in the workflow: pass the earlier messages as the run's input"
            )

    async def paused(self, agent: Any, result: Any) -> Any:
        """A run of the workflow ended or paused: a paused one waits here for its decisions
        (`onion.temporal.decide`), then goes on; its pauses and its end go into the event log."""
        return await wait_for_decisions(agent, result, self.decisions, self.log)

    def events_of(self, run_id: str) -> Callable[[Any], None]:
        """Where run `run_id`'s events go: the workflow's event log (`onion.temporal.follow`)."""
        return self.log.events_of(run_id)

    def model(self, call: ModelCall) -> ActivityModel:
        return ActivityModel(call.model, self.options, self.sent)

    async def tool(self, call: ToolCall, invoke: Callable[[], Awaitable[Any]]) -> ToolResult:
        tool, options = call.tool, self.options
        agent = call.run.agent.name
        if tool is None or tool.name not in self.tools.get(agent, ()):
            raise RuntimeError(
                f"tool {call.name} is not one of agent {agent}'s tools, so it has no activity: "
                "a tool a layer or an MCP server adds cannot run inside a workflow yet"
            )
        while True:
            try:
                data = await workflow.execute_activity(
                    tool_activity_name(agent, tool.name),
                    args=[call.args, tool_call_data(call)],
                    start_to_close_timeout=options.start_to_close_timeout,
                    heartbeat_timeout=options.heartbeat_timeout,
                    retry_policy=options.retry if tool.idempotent else _ONCE,
                    cancellation_type=_WAIT,
                    result_type=dict,
                )
            except ActivityError as failure:
                if (stopped := cancelled(failure)) is not None:
                    raise stopped from failure
                if tool.idempotent or not isinstance(failure.cause, TimeoutError):
                    raise
                settled = await self._in_doubt(call, tool)
                if settled is None:
                    continue  # its reconcile found it did not happen: it runs again
                return settled
            return result_from(data, call.id)

    async def _in_doubt(self, call: ToolCall, tool: Tool) -> ToolResult | None:
        """What a call whose activity's worker stopped mid-call comes to, as in a recovered run outside: what its
        tool's `reconcile` found happened (None: it did not, run it again), a pause for a person (`in_doubt="ask"`,
        also when `reconcile` failed), else an error result saying it was interrupted. A `reconcile` that fails
        for a tool that does not ask fails the run."""
        reason = MAY_HAVE_RUN
        if tool.reconcile is not None:
            try:
                found = await workflow.execute_activity(
                    reconcile_activity_name(call.run.agent.name, tool.name),
                    args=[call.args, tool_call_data(call)],
                    start_to_close_timeout=self.options.start_to_close_timeout,
                    retry_policy=self.options.retry,
                    cancellation_type=_WAIT,
                )
            except ActivityError as failure:
                if (stopped := cancelled(failure)) is not None:
                    raise stopped from failure
                if tool.in_doubt != "ask":
                    raise
                cause = failure.cause
                why = f"{cause.type}: {cause.message}" if isinstance(cause, ApplicationError) else str(cause)
                reason = valid_text(f"{MAY_HAVE_RUN}; its reconcile failed: {why}")
            else:
                return None if found is None else result_from(found, call.id)
        if tool.in_doubt == "ask":  # a person says whether it ran: the run pauses, the call "may have run"
            call.pause_reason = reason
            self.decisions.in_doubt.add((call.run.id, call.id))
            return ToolResult("", call_id=call.id)
        return ToolResult(
            f"Tool {tool.name} was interrupted: the worker running it stopped, and it is not idempotent, "
            "so it was not run again. It may or may not have taken effect.",
            is_error=True,
            call_id=call.id,
        )
