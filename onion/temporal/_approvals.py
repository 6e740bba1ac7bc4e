"""Approvals inside a workflow: a paused run waits durably for `decide`, and `pending` says what it waits for.

`run(agent, input)` in workflow code is `agent.run(input)` that, when the run
pauses, waits for decisions (an update, validated against the pending calls)
and resumes in the workflow. Client side, `pending(handle)` is a query and
`decide(handle, ...)` an update: a call decided twice, or not pending, is
refused naming the call id, and nothing runs twice.
"""

from __future__ import annotations

import datetime
from typing import Any

from temporalio import workflow
from temporalio.client import WorkflowHandle

from .._agent import Agent
from .._durable.decisions import Decisions, apply, check
from .._durable.state import PendingCall, RunState
from .._principal import DecisionRecord, Principal
from .._run import OutputT, RunResult
from .._tools import Tool
from ..errors import DecisionRefused

PENDING = "onion.pending"
DECIDE = "onion.decide"


class Waiting:
    """The paused run a workflow waits on, decided one `decide` update at a time through onion's one decide path
    (`onion._durable.decisions`): an update that does not fit is refused by its validator with the same
    `DecisionRefused` text `agent.decide` raises, and changes nothing."""

    def __init__(self) -> None:
        self.state: RunState | None = None
        self.tools: dict[str, Tool] = {}
        """The agent's tools by name: an edit is checked against its tool's schema when the update arrives."""
        self.started = False
        """True once the workflow's code runs. An update can come before (a worker replaying a workflow that
        paused before any activity gets the update in the workflow's first activation): it is checked once the
        replay got back to the pause."""
        self.ended = False
        """True once the workflow's code returned or raised: nothing will pause any more."""

    def pending(self) -> list[dict[str, Any]]:
        state = self.state
        return [] if state is None else [call.to_dict() for call in state.pending if call.decision is None]

    def check(self, decision: dict[str, Any]) -> None:
        state = self.state
        if state is None and not self.started:
            return  # taken by `take` once the replay got back to the pause, and checked there
        given = Decisions.from_json(_decisions_of(decision), "" if state is None else state.run_id)
        if state is None:
            named = ", ".join(given.ids())
            raise DecisionRefused(
                f"no pending call {named}: the workflow's run waits for no decision (it is not paused, or was decided "
                "already)",
                run_id="",
                why="not_pending",
            )
        check(state, given, tools=self.tools, partial=True)

    async def take(self, decision: dict[str, Any]) -> None:
        if self.state is None:  # came before the workflow's code ran (`started`): checked once it paused
            await workflow.wait_condition(lambda: self.state is not None or self.ended)
            self.check(decision)
        state = self.state
        assert state is not None  # the validator (or the check above) refused an update while nothing waits
        given = Decisions.from_json(_decisions_of(decision), state.run_id)
        before = {call.id for call in state.pending if call.decision is not None}
        apply(state, given, tools=self.tools, partial=True)
        by = None if decision.get("by") is None else Principal.from_dict(decision["by"])
        at = workflow.now().astimezone(datetime.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        for call in state.pending:
            if call.decision is not None and call.id not in before:
                args = call.edited_args if call.decision == "edited" else None
                reason = call.rejection if call.decision == "rejected" else None
                state.decisions.append(DecisionRecord(call.id, call.decision, by, at, args, reason))

    def done(self) -> bool:
        state = self.state
        return state is not None and all(call.decision is not None for call in state.pending)


def _decisions_of(update: dict[str, Any]) -> dict[str, Any]:
    """The decisions of a `decide` update: all of it but who decided (`by`)."""
    return {key: value for key, value in update.items() if key != "by"}


async def run(agent: Agent[OutputT], input: Any, **options: Any) -> RunResult[OutputT]:
    """`agent.run(input, **options)` in workflow code: since `agent.run` itself waits for a pause's decisions
    inside a workflow, this is the same call (kept for code written against it)."""
    result: RunResult[OutputT] = await agent.run(input, **options)
    return result


def listen() -> Waiting:
    """Answer `pending` (a query) and `decide` (an update) in this workflow, from its start: `[]` before a pause."""
    waiting = Waiting()
    workflow.set_query_handler(PENDING, waiting.pending)
    workflow.set_update_handler(DECIDE, waiting.take, validator=waiting.check)
    return waiting


async def wait_for_decisions(agent: Agent[Any], result: RunResult[Any], waiting: Waiting) -> RunResult[Any]:
    """Wait durably for the decisions of the paused `result` (`decide`), resume in the workflow, and again at
    each pause, until the run ends: what `agent.run` returns inside a workflow."""
    output_type = result._run.output_type if result._run is not None else None  # the run's own, if it has one
    while result.paused:
        waiting.tools = {tool.name: tool for tool in agent.tools}
        waiting.state = result.to_state()
        try:
            await workflow.wait_condition(waiting.done)
        finally:  # decided, or the workflow cancelled: it waits for nothing now
            state, waiting.state = waiting.state, None
        result = await agent.resume(state, output_type=output_type)
    return result


async def pending(handle: WorkflowHandle[Any, Any]) -> list[PendingCall]:
    """The calls the workflow's run waits on (a query); `[]` before any pause and after the run ended."""
    calls = await handle.query(PENDING)
    return [PendingCall(c["id"], c["name"], c["args"], c["reason"], kind=c.get("kind", "tool")) for c in calls]


async def decide(
    handle: WorkflowHandle[Any, Any],
    *,
    approve: list[str] | tuple[str, ...] = (),
    reject: dict[str, str] | None = None,
    edit: dict[str, dict[str, Any]] | None = None,
    principal: Principal | None = None,
) -> None:
    """Decide pending calls (an update), on record as `principal`'s. Raises
    `temporalio.client.WorkflowUpdateFailedError` with the `DecisionRefused` text `agent.decide` gives (a call
    not pending or decided already, named twice, an edit of a paused model call); the run goes on once every
    pending call is decided."""
    decision: dict[str, Any] = Decisions(tuple(approve), dict(reject or {}), dict(edit or {})).to_json()
    if principal is not None:
        decision["by"] = principal.to_dict()
    await handle.execute_update(DECIDE, decision)
