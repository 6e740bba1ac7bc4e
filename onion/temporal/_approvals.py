"""Approvals inside a workflow: a paused run waits durably for `decide`, and `pending` says what it waits for.

`run(agent, input)` in workflow code is `agent.run(input)` that, when the run
pauses, waits for decisions (an update, validated against the pending calls)
and resumes in the workflow. Client side, `pending(handle)` is a query and
`decide(handle, ...)` an update: a call decided twice, or not pending, is
refused naming the call id, and nothing runs twice.
"""

from __future__ import annotations

from typing import Any

from temporalio import workflow
from temporalio.client import WorkflowHandle

from .._agent import Agent
from .._durable.state import PendingCall
from .._run import OutputT, RunResult

PENDING = "onion.pending"
DECIDE = "onion.decide"


class Decisions:
    """The pending calls of the paused batch and the decisions received for them so far."""

    def __init__(self) -> None:
        self.calls: list[PendingCall] = []
        self.decided: dict[str, dict[str, Any]] = {}

    def pending(self) -> list[dict[str, Any]]:
        waiting = [call for call in self.calls if call.id not in self.decided]
        return [{"id": c.id, "name": c.name, "args": c.args, "reason": c.reason} for c in waiting]

    def check(self, decision: dict[str, Any]) -> None:
        ids = [*decision.get("approve", []), *decision.get("reject", {}), *decision.get("edit", {})]
        if not ids:
            raise ValueError("decide: the decision decides no call (give approve, reject or edit)")
        waiting = {call.id for call in self.calls}
        for call_id in ids:
            if call_id in self.decided:
                raise ValueError(f"decide: call {call_id!r} was already decided")
            if call_id not in waiting:
                raise ValueError(f"decide: call {call_id!r} is not pending")
        if len(set(ids)) < len(ids):
            raise ValueError(f"decide: a call is decided more than once in {ids}")

    def take(self, decision: dict[str, Any]) -> None:
        for call_id in decision.get("approve", []):
            self.decided[call_id] = {"approve": True}
        for call_id, reason in decision.get("reject", {}).items():
            self.decided[call_id] = {"reject": reason}
        for call_id, args in decision.get("edit", {}).items():
            self.decided[call_id] = {"edit": args}

    def done(self) -> bool:
        return all(call.id in self.decided for call in self.calls)


async def run(agent: Agent[OutputT], input: Any, **options: Any) -> RunResult[OutputT]:
    """`agent.run(input, **options)` in workflow code: since `agent.run` itself waits for a pause's decisions
    inside a workflow, this is the same call (kept for code written against it)."""
    result: RunResult[OutputT] = await agent.run(input, **options)
    return result


def listen() -> Decisions:
    """Answer `pending` (a query) and `decide` (an update) in this workflow, from its start: `[]` before a pause."""
    decisions = Decisions()
    workflow.set_query_handler(PENDING, decisions.pending)
    workflow.set_update_handler(DECIDE, decisions.take, validator=decisions.check)
    return decisions


async def wait_for_decisions(agent: Agent[Any], result: RunResult[Any], decisions: Decisions) -> RunResult[Any]:
    """Wait durably for the decisions of the paused `result` (`decide`), resume in the workflow, and again at
    each pause, until the run ends: what `agent.run` returns inside a workflow."""
    while result.paused:
        decisions.calls, decisions.decided = result.pending, {}
        await workflow.wait_condition(decisions.done)
        state = result.to_state()
        for call_id, decided in decisions.decided.items():
            if "reject" in decided:
                state.reject(call_id, reason=decided["reject"])
            elif "edit" in decided:
                state.edit(call_id, decided["edit"])
            else:
                state.approve(call_id)
        decisions.calls = []
        result = await agent.resume(state)
    return result


async def pending(handle: WorkflowHandle[Any, Any]) -> list[PendingCall]:
    """The calls the workflow's run waits on (a query); `[]` before any pause and after the run ended."""
    return [PendingCall(c["id"], c["name"], c["args"], c["reason"]) for c in await handle.query(PENDING)]


async def decide(
    handle: WorkflowHandle[Any, Any],
    *,
    approve: list[str] | tuple[str, ...] = (),
    reject: dict[str, str] | None = None,
    edit: dict[str, dict[str, Any]] | None = None,
) -> None:
    """Decide pending calls (an update). Raises `temporalio.client.WorkflowUpdateFailedError` naming a call
    that is not pending or was already decided; the run goes on once every pending call is decided."""
    decision = {"approve": list(approve), "reject": dict(reject or {}), "edit": dict(edit or {})}
    await handle.execute_update(DECIDE, decision)
