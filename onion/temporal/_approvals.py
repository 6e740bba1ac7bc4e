"""Approvals inside a workflow: a paused run waits durably for `decide`, and `pending` says what it waits for.

`run(agent, input)` in workflow code is `agent.run(input)` that, when the run
pauses, waits for decisions (an update, validated against the pending calls)
and resumes in the workflow. Client side, `pending(handle)` is a query and
`decide(handle, ...)` an update: a call decided twice, or not pending, is
refused naming the call id, and nothing runs twice.
"""

from __future__ import annotations

import datetime
import functools
from dataclasses import dataclass
from typing import Any

from temporalio import workflow
from temporalio.client import WorkflowHandle
from temporalio.common import SearchAttributeKey

from .._agent import Agent
from .._durable.decisions import Decisions, apply, check
from .._durable.state import PendingCall, RunState
from .._principal import DecisionRecord, Principal
from .._run import OutputT, RunResult
from .._tools import Tool
from ..errors import DecisionRefused
from ._events import EventLog

PENDING = "onion.pending"
DECIDE = "onion.decide"


@dataclass(slots=True)
class WaitingCall(PendingCall):
    """A call a workflow's run waits on (`onion.temporal.pending`): a `PendingCall`, with the id of its run (a
    workflow may run several at once)."""

    run_id: str = ""


class Waiting:
    """The paused runs a workflow waits on, by run id, decided one `decide` update at a time through onion's one
    decide path (`onion._durable.decisions`): an update that does not fit is refused by its validator with the
    same `DecisionRefused` text `agent.decide` raises, and changes nothing."""

    def __init__(self, attribute: str | None = None) -> None:
        self.attribute = None if attribute is None else SearchAttributeKey.for_bool(attribute)
        """The search attribute that says whether a run of the workflow waits for a person, if any."""
        self.states: dict[str, RunState] = {}
        """Each paused run's state, by run id, until every one of its calls is decided."""
        self.tools: dict[str, dict[str, Tool]] = {}
        """Each paused run's agent's tools by name: an edit is checked against its tool's schema."""
        self.started = False
        """True once the workflow's code runs. An update can come before (a worker replaying a workflow that
        paused before any activity gets the update in the workflow's first activation): it is checked once the
        replay got back to the pause."""
        self.ended = False
        """True once the workflow's code returned or raised: nothing will pause any more."""
        self.in_doubt: set[tuple[str, str]] = set()
        """The calls (run id, call id) paused because they may have run: their activity's worker stopped mid-call."""

    def pending(self) -> list[dict[str, Any]]:
        return [
            {**call.to_dict(), "run_id": run_id}
            for run_id, state in self.states.items()
            for call in state.pending
            if call.decision is None
        ]

    def check(self, decision: dict[str, Any]) -> None:
        if not self.states and not self.started:
            return  # taken by `take` once the replay got back to the pause, and checked there
        state = self._state_for(decision)
        check(
            state,
            Decisions.from_json(_decisions_of(decision), state.run_id),
            tools=self.tools[state.run_id],
            partial=True,
        )

    def _state_for(self, decision: dict[str, Any]) -> RunState:
        """The paused run `decision` decides: the one its `run_id` names, else the one run whose pending calls
        it names; `DecisionRefused` naming the calls when none waits, or when several runs have such calls."""
        given = Decisions.from_json(_decisions_of(decision), "")
        named = set(given.ids())
        run_id = decision.get("run_id")
        if run_id is not None:
            chosen = [self.states[run_id]] if run_id in self.states else []
        else:
            chosen = [s for s in self.states.values() if named & {call.id for call in s.pending}] or list(
                self.states.values()
            )[:1]
        if not chosen:
            which = f"run {run_id!r} of the workflow waits" if run_id is not None else "the workflow's runs wait"
            raise DecisionRefused(
                f"no pending call {', '.join(sorted(named))}: {which} for no decision (not paused, or decided already)",
                run_id=run_id or "",
                why="not_pending",
            )
        if len(chosen) > 1:
            runs = ", ".join(state.run_id for state in chosen)
            raise DecisionRefused(
                f"calls {', '.join(sorted(named))} are pending in several runs of the workflow ({runs}): decide "
                "one run's at a time, with decide(..., run_id=...)",
                run_id="",
                why="not_pending",
            )
        return chosen[0]

    async def take(self, decision: dict[str, Any]) -> None:
        if not self.states:  # came before the workflow's code ran (`started`): checked once it paused
            await workflow.wait_condition(lambda: bool(self.states) or self.ended)
            self.check(decision)
        state = self._state_for(decision)
        given = Decisions.from_json(_decisions_of(decision), state.run_id)
        before = {call.id for call in state.pending if call.decision is not None}
        apply(state, given, tools=self.tools[state.run_id], partial=True)
        by = None if decision.get("by") is None else Principal.from_dict(decision["by"])
        at = workflow.now().astimezone(datetime.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        for call in state.pending:
            if call.decision is not None and call.id not in before:
                args = call.edited_args if call.decision == "edited" else None
                reason = call.rejection if call.decision == "rejected" else None
                result = call.result if call.decision == "resolved" else None
                record = DecisionRecord(call.id, call.decision, by, at, args, reason, result, call.reason)
                state.decisions.append(record)

    def say_whether_waiting(self) -> None:
        """Sets the workflow's waiting attribute (if it has one): whether any of its runs waits for a person. A
        workflow that began before the plugin had one replays without it (`workflow.patched`)."""
        if self.attribute is not None and workflow.patched("onion.waiting_attribute"):  # a workflow that waited
            workflow.upsert_search_attributes([self.attribute.value_set(bool(self.states))])  # before, not again

    def done(self, run_id: str) -> bool:
        state = self.states.get(run_id)
        return state is not None and all(call.decision is not None for call in state.pending)


def _decisions_of(update: dict[str, Any]) -> dict[str, Any]:
    """The decisions of a `decide` update: all of it but who decided (`by`) and which run (`run_id`)."""
    return {key: value for key, value in update.items() if key not in ("by", "run_id")}


async def run(agent: Agent[OutputT], input: Any, **options: Any) -> RunResult[OutputT]:
    """`agent.run(input, **options)` in workflow code: since `agent.run` itself waits for a pause's decisions
    inside a workflow, this is the same call (kept for code written against it)."""
    result: RunResult[OutputT] = await agent.run(input, **options)
    return result


def listen(attribute: str | None = None) -> Waiting:
    """Answer `pending` (a query) and `decide` (an update) in this workflow, from its start: `[]` before a pause;
    with `attribute`, the workflow says whether a run of it waits (a Bool search attribute)."""
    waiting = Waiting(attribute)
    workflow.set_query_handler(PENDING, waiting.pending)
    workflow.set_update_handler(DECIDE, waiting.take, validator=waiting.check)
    return waiting


async def wait_for_decisions(
    agent: Agent[Any], result: RunResult[Any], waiting: Waiting, log: EventLog
) -> RunResult[Any]:
    """Wait durably for the decisions of the paused `result` (`decide`), resume in the workflow, and again at
    each pause, until the run ends: what `agent.run` returns inside a workflow. Each pause and the end go into
    the workflow's event `log`, and the resumed run's events."""
    output_type = result._run.output_type if result._run is not None else None  # the run's own, if it has one
    while result.paused:
        run_id = result.run_id
        for call in result.pending:  # the kind the run's pause gives them outside a workflow: "may have run"
            if (run_id, call.id) in waiting.in_doubt:
                waiting.in_doubt.discard((run_id, call.id))
                call.kind = "in_doubt"
        log.paused(result)
        waiting.tools[run_id] = {tool.name: tool for tool in agent.tools}
        waiting.states[run_id] = result.to_state()
        waiting.say_whether_waiting()
        try:
            await workflow.wait_condition(functools.partial(waiting.done, run_id))
        finally:  # decided, or the workflow cancelled: it waits for nothing now
            state = waiting.states.pop(run_id)
            del waiting.tools[run_id]
        waiting.say_whether_waiting()
        result = await agent._resume(state, output_type, None, log.events_of(state.run_id), None)
    log.finished(result)
    return result


async def pending(handle: WorkflowHandle[Any, Any]) -> list[WaitingCall]:
    """The calls the workflow's runs wait on (a query), each with its `run_id`; `[]` before any pause and after
    the runs ended."""
    calls = await handle.query(PENDING)
    return [
        WaitingCall(c["id"], c["name"], c["args"], c["reason"], kind=c.get("kind", "tool"), run_id=c.get("run_id", ""))
        for c in calls
    ]


async def decide(
    handle: WorkflowHandle[Any, Any],
    *,
    approve: list[str] | tuple[str, ...] = (),
    reject: dict[str, str] | None = None,
    edit: dict[str, dict[str, Any]] | None = None,
    principal: Principal | None = None,
    run_id: str | None = None,
    resolve: dict[str, str] | None = None,
) -> None:
    """Decide pending calls (an update), on record as `principal`'s. Raises
    `temporalio.client.WorkflowUpdateFailedError` with the `DecisionRefused` text `agent.decide` gives (a call
    not pending or decided already, named twice, an edit of a paused model call); the run goes on once every
    pending call is decided. `run_id` names the run, for a workflow whose runs have calls of the same id.
    `resolve` records what a person checked a call that may have run did (kind `"in_doubt"`): nothing runs.
    """
    decision: dict[str, Any] = Decisions(
        tuple(approve), dict(reject or {}), dict(edit or {}), resolve=dict(resolve or {})
    ).to_json()
    if principal is not None:
        decision["by"] = principal.to_dict()
    if run_id is not None:
        decision["run_id"] = run_id
    await handle.execute_update(DECIDE, decision)
