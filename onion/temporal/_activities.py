"""The activities of one agent: its model calls and each of its tools, under stable names.

`<agent>.model` asks a model of the agent; `<agent>.tool.<tool>` runs one
tool. Both run in the worker's ordinary Python (no sandbox), so models and
tools do their I/O as they do outside Temporal.
"""

from __future__ import annotations

import asyncio
import collections
import importlib
import inspect
import json
from collections.abc import Callable
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from .._agent import Agent
from .._calls import ToolCall
from .._messages import ToolRequest
from .._output import output_schema
from .._principal import Principal
from .._results import ToolResult
from .._run import Run
from .._tools import Tool, render, valid_text
from ..errors import ModelError, ToolArgumentsError
from ._options import ActivityOptions
from ._wire import call_from, model_failure, response_data, result_data

MISSING = "ConversationMissing"
"""The type of a model activity's failure when its worker does not keep the conversation it goes on from."""


def model_activity_name(agent: str) -> str:
    return f"{agent}.model"


def tool_activity_name(agent: str, tool: str) -> str:
    return f"{agent}.tool.{tool}"


def reconcile_activity_name(agent: str, tool: str) -> str:
    return f"{agent}.reconcile.{tool}"


def agent_activities(agent: Agent[Any], options: ActivityOptions) -> list[Callable[..., Any]]:
    """The model activity of `agent`, one activity per tool in `agent.tools`, and one per tool's `reconcile`."""
    made: list[Callable[..., Any]] = [_model_activity(agent, options)]
    made.extend(_tool_activity(agent, tool, options) for tool in agent.tools)
    made.extend(_reconcile_activity(agent, tool) for tool in agent.tools if tool.reconcile is not None)
    return made


def _model_activity(agent: Agent[Any], options: ActivityOptions) -> Callable[..., Any]:
    models = {getattr(model, "name", None): model for model in (agent.model, *options.models)}

    async def ask_model(data: dict[str, Any]) -> dict[str, Any]:
        model = models.get(data["model"])
        if model is None:
            known = ", ".join(repr(name) for name in models)
            raise ValueError(
                f"agent {agent.name}: no model {data['model']!r} on this worker (known: {known}); "
                "pass it to OnionPlugin(options=ActivityOptions(models=[...]))"
            )
        output_type = _output_type(agent, data["output"])
        run = Run(agent, "", [], output_type=output_type)
        call = call_from({**data, "messages": _conversation(data)}, run, model, output_type)
        try:
            async with _heartbeats(options.heartbeat_every):
                response = await model.request(call)
        except ModelError as error:
            raise model_failure(error) from error
        return response_data(response)

    return activity.defn(name=model_activity_name(agent.name))(ask_model)


class _Conversations:
    """The conversations this worker's model activities were sent, each by its run and digest, the latest first
    to go when more than `budget` bytes of messages are kept: a model call's activity is sent only the messages
    added since (`ConversationMissing` when this worker does not have the rest, and the workflow sends it whole).
    """

    def __init__(self, budget: int = 256_000_000) -> None:
        self.budget = budget
        self.kept: collections.OrderedDict[tuple[str, str], tuple[list[dict[str, Any]], int]] = (
            collections.OrderedDict()
        )
        self.latest: dict[str, list[str]] = {}
        """Each run's kept digests, oldest first."""
        self.size = 0

    def get(self, run_id: str, digest: str) -> list[dict[str, Any]] | None:
        found = self.kept.get((run_id, digest))
        if found is None:
            return None
        self.kept.move_to_end((run_id, digest))
        return found[0]

    def put(self, run_id: str, digest: str, messages: list[dict[str, Any]], added: int) -> None:
        """Keeps `messages` (`added` bytes more than the run's last) as run `run_id`'s latest two conversations
        (the last one sent, and the one before for a call tried again)."""
        if (run_id, digest) in self.kept:
            return
        self.kept[(run_id, digest)] = (messages, added)
        self.size += added
        latest = self.latest.setdefault(run_id, [])
        latest.append(digest)
        if len(latest) > 2:
            self._drop(run_id, latest[0])
        while self.size > self.budget and len(self.kept) > 1:
            gone_run, gone = next(iter(self.kept))
            self._drop(gone_run, gone)

    def _drop(self, run_id: str, digest: str) -> None:
        found = self.kept.pop((run_id, digest), None)
        if found is not None:
            self.size -= found[1]
        latest = self.latest.get(run_id)
        if latest is not None and digest in latest:
            latest.remove(digest)
            if not latest:
                del self.latest[run_id]

    def clear(self) -> None:
        self.kept.clear()
        self.latest.clear()
        self.size = 0


_CONVERSATIONS = _Conversations()


def forget_conversations() -> None:
    """Forgets the conversations this worker keeps (as a new worker has none): the next model calls are sent
    whole."""
    _CONVERSATIONS.clear()


def _conversation(data: dict[str, Any]) -> list[dict[str, Any]]:
    """The whole conversation of a model call: its messages, after those of the conversation it names (`since`:
    the run and the digest of what was sent before, kept by this worker); kept for the next call."""
    messages: list[dict[str, Any]] = data["messages"]
    since = data.get("since")
    if since is not None:
        before = _CONVERSATIONS.get(since["run"], since["digest"])
        if before is None:
            raise ApplicationError(
                "this worker does not keep the conversation the model call goes on from",
                type=MISSING,
                non_retryable=True,
            )
        messages = [*before, *messages]
    keep = data.get("keep")
    if keep is not None:
        added = sum(len(json.dumps(m)) for m in data["messages"])
        _CONVERSATIONS.put(keep["run"], keep["digest"], messages, added)
    return messages


def _tool_activity(agent: Agent[Any], tool: Tool, options: ActivityOptions) -> Callable[..., Any]:
    async def run_tool(args: dict[str, Any], call: dict[str, Any] | None = None) -> dict[str, Any]:
        try:
            valid = tool.validate(args)
        except ToolArgumentsError as error:
            return result_data(ToolResult(f"{error}. Fix the arguments and call {tool.name} again.", is_error=True))
        try:
            async with _heartbeats(options.heartbeat_every):
                value = await tool.invoke(valid, _tool_call(agent, tool, args, call), agent.tool_threads)
        except Exception as error:
            text = valid_text(f"Tool {tool.name} failed: {type(error).__name__}: {error}")
            return result_data(ToolResult(text, is_error=True))
        return _within(tool.name, result_data(value if isinstance(value, ToolResult) else ToolResult(render(value))))

    def _within(name: str, data: dict[str, Any]) -> dict[str, Any]:
        """`data`, or an error result saying it was too large when it is over `options.max_result_bytes` as JSON
        (Temporal refuses a payload over its limit: the activity would fail, and be retried for nothing)."""
        limit = options.max_result_bytes
        if limit is None:
            return data
        size = len(json.dumps(data, ensure_ascii=False).encode())
        if size <= limit:
            return data
        return result_data(
            ToolResult(
                f"Tool {name}'s result was too large to keep in the workflow's history: {size:,} bytes, over the "
                f"limit of {limit:,} bytes. It was not kept; ask for less at a time (a page, a summary, a filter).",
                is_error=True,
            )
        )

    return activity.defn(name=tool_activity_name(agent.name, tool.name))(run_tool)


def _reconcile_activity(agent: Agent[Any], tool: Tool) -> Callable[..., Any]:
    """`tool.reconcile(call)` for a call whose activity's worker stopped mid-call: what happened (a result), or None
    (it did not happen: run it again). A reconcile that raises fails the activity, with Temporal's retries."""

    async def reconcile(args: dict[str, Any], call: dict[str, Any]) -> dict[str, Any] | None:
        check = tool.reconcile
        assert check is not None
        asked = _tool_call(agent, tool, args, call)
        found = await check(asked) if inspect.iscoroutinefunction(check) else await asyncio.to_thread(check, asked)
        if inspect.isawaitable(found):
            found = await found
        if found is not None and not isinstance(found, ToolResult):
            raise ApplicationError(
                f"tool {tool.name}: reconcile returned {type(found).__name__}, not a ToolResult or None",
                type="TypeError",
                non_retryable=True,
            )
        return None if found is None else result_data(found)

    return activity.defn(name=reconcile_activity_name(agent.name, tool.name))(reconcile)


def tool_call_data(call: ToolCall) -> dict[str, Any]:
    """What the tool activity needs to give its tool the `ToolCall` of the workflow's run: the call's id, the run's
    id, its step and principal (so `call.idempotency_key` and `call.run.principal` are the workflow's)."""
    principal = call.run.principal
    return {
        "id": call.id,
        "run_id": call.run.id,
        "step": call.run.steps,
        "principal": None if principal is None else principal.to_dict(),
    }


def _tool_call(agent: Agent[Any], tool: Tool, args: dict[str, Any], data: dict[str, Any] | None) -> ToolCall | None:
    """The `ToolCall` `tool_call_data` describes, on a run standing in for the workflow's; None from a workflow
    that scheduled the activity before onion sent it."""
    if data is None:
        return None
    principal = None if data["principal"] is None else Principal.from_dict(data["principal"])
    run = Run(agent, "", [], principal=principal)
    run.id, run.steps = data["run_id"], data["step"]
    return ToolCall(run, ToolRequest(data["id"], tool.name, args), tool)


def _output_type(agent: Agent[Any], output: dict[str, Any] | None) -> Any:
    """The output type a model call asks for: the agent's, or the run's own (`agent.run(..., output_type=)`),
    imported on this worker from where the workflow's is defined; its schema must be the workflow's."""
    if output is None:
        return str
    candidates = [agent.output_type]
    module, _, qualname = str(output.get("type", "")).partition(":")
    if module and qualname:
        try:
            found: Any = importlib.import_module(module)
            for part in qualname.split("."):
                found = getattr(found, part)
            candidates.append(found)
        except (ImportError, AttributeError):
            pass
    for kind in candidates:
        if (
            kind is not str
            and output_schema(kind).name == output["name"]
            and output_schema(kind).schema == output["schema"]
        ):
            return kind
    raise ApplicationError(
        f"agent {agent.name}: output type {output['name']!r} ({output.get('type')}) is neither the agent's "
        "output_type nor a type this worker imports with the same schema: define it at the top level of a module "
        "the worker imports, the same on every worker",
        type="ValueError",
        non_retryable=True,
    )


class _heartbeats:
    """Heartbeats every `every` seconds while the block runs, so Temporal sees a worker that died within its timeout."""

    def __init__(self, every: float) -> None:
        self.every = every
        self.task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> None:
        self.task = asyncio.create_task(self._beat())

    async def __aexit__(self, *exc: object) -> None:
        assert self.task is not None
        self.task.cancel()

    async def _beat(self) -> None:
        while True:
            activity.heartbeat()
            await asyncio.sleep(self.every)
