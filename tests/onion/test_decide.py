"""One decide path: `agent.decide` checks decisions once, and the server, the CLI and Temporal refuse the same bad
decisions with the same onion error (each keeping only a table from it to a status, a line, an update failure)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx2
import pytest

from middleware import approve
from onion import Agent, Decisions, Principal, RunState, tool
from onion._runs_actions import decide as cli_decide
from onion._runs_cli import Refused
from onion.errors import DecisionRefused, ForeignRun, RunNotFound
from onion.serve import serve
from onion.stores import MemoryStore, SQLiteStore
from onion.temporal._approvals import Waiting
from onion.testing import ScriptedModel, call

PAID: list[dict[str, Any]] = []


@tool
def pay(order: int, amount: int) -> str:
    """Pay an order."""
    PAID.append({"order": order, "amount": amount})
    return f"paid {amount} for order {order}"


def payer(store: Any, *answers: Any, name: str = "till") -> Agent[str]:
    script = [[call("pay", order=1, amount=10), call("pay", order=2, amount=20)], *answers]
    return Agent(ScriptedModel(script), tools=[pay], name=name, store=store).use(approve("pay"))


async def paused(agent: Agent[str], principal: Principal | None = None) -> tuple[str, list[str]]:
    result = await agent.run("pay both", principal=principal)
    assert result.paused
    return result.run_id, [call.id for call in result.pending]


BAD = [
    ("not_pending", lambda a, b: Decisions([a, b, "call_nope"]), 409),
    ("conflict", lambda a, b: Decisions([a, b], reject={a: "no"}), 422),
    ("undecided", lambda a, b: Decisions([a]), 422),
    ("invalid_edit", lambda a, b: Decisions([b], edit={a: {"order": "one", "amount": 5}}), 422),
]


@pytest.mark.parametrize(("why", "make", "status"), BAD, ids=[case[0] for case in BAD])
async def test_the_server_the_cli_and_temporal_refuse_a_bad_decision_with_the_same_error(
    why: str, make: Any, status: int, tmp_path: Path
) -> None:
    """Each front end answers the core's `DecisionRefused` (same `why`, same text): HTTP its status and the text
    as `error`, the CLI the text as its line, Temporal's update validator the error itself; nothing ran."""
    PAID.clear()
    async with SQLiteStore(tmp_path / "onion.db") as store:
        agent = payer(store, "done")
        run_id, (first, second) = await paused(agent)
        decisions = make(first, second)
        with pytest.raises(DecisionRefused) as core:
            await agent.decide(run_id, decisions)
        assert core.value.why == why

        app = serve(agent)
        async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url="http://127.0.0.1") as client:
            answer = await client.post(f"/runs/{run_id}/decisions", json=decisions.to_json())
        assert (answer.status_code, answer.json()["error"]) == (status, str(core.value))

        with pytest.raises(Refused) as line:
            await cli_decide(agent, run_id, decisions, by="ops")
        assert str(core.value) in str(line.value)

        waiting = Waiting()
        waiting.states, waiting.tools = {run_id: await store.load(run_id)}, {run_id: {"pay": pay}}
        waiting.started = True
        if why != "undecided":  # updates arrive one at a time on Temporal: a partial batch is not refused there
            with pytest.raises(DecisionRefused) as update:
                waiting.check(decisions.to_json())
            assert (update.value.why, str(update.value)) == (why, str(core.value))
        assert (await store.run_record(run_id)).status == "paused"  # type: ignore[union-attr]
    assert PAID == []


async def test_decide_refuses_another_agents_run_and_another_tenants_as_if_it_did_not_exist() -> None:
    """On a shared store, another agent's `decide` names both agents; another tenant's principal gets
    `ForeignRun` naming nothing of the run but its id, over HTTP a 404 like an unknown run."""
    store = MemoryStore()
    till = payer(store, "done")
    run_id, ids = await paused(till, Principal("u-1", tenant="acme"))
    with pytest.raises(ForeignRun, match="belongs to agent 'till', not 'helpdesk'"):
        await payer(store, name="helpdesk").decide(run_id, Decisions(ids))
    with pytest.raises(ForeignRun) as foreign:
        await till.decide(run_id, Decisions(ids), principal=Principal("u-9", tenant="globex"))
    assert "acme" not in str(foreign.value) and "u-1" not in str(foreign.value)
    with pytest.raises(RunNotFound):
        await till.decide("run-missing", Decisions(ids))
    state = await till.decide(run_id, Decisions(ids), principal=Principal("u-2", tenant="acme"))
    assert [call.decision for call in state.pending] == ["approved", "approved"]


async def test_a_decision_is_on_record_with_who_and_when_through_every_front_end(tmp_path: Path) -> None:
    """`resume(state, principal=)` records each call's decision as that principal's; the CLI records `--as`
    (acting in the run's own tenant); both land in `RunResult.decisions` and the journal."""
    PAID.clear()
    async with SQLiteStore(tmp_path / "onion.db") as store:
        agent = payer(store, [call("pay", order=3, amount=30)], "done")
        run_id, (first, second) = await paused(agent, Principal("u-42", tenant="acme"))
        state = await agent.decide(run_id, Decisions([first], reject={second: "too much"}))
        approver = Principal("u-17", tenant="acme", roles={"approver"})
        again = await agent.resume(state, principal=approver)
        assert again.paused and [(r.call_id, r.decision, r.by, r.reason) for r in again.decisions] == [
            (first, "approved", approver, None),
            (second, "rejected", approver, "too much"),
        ]
        printed = await cli_decide(agent, run_id, Decisions(approve_rest=True), by="ops-anna")
        assert printed.startswith(f"run {run_id} completed")
        done = await store.load(run_id)
        records = [entry for entry in await store.journal(run_id) if '"k":"decision"' in entry]
    assert len(records) == 3 and '"by":{"id":"ops-anna","tenant":"acme"}' in records[2]
    assert PAID == [{"order": 1, "amount": 10}, {"order": 3, "amount": 30}]
    assert done.status == "completed"


def test_decisions_from_json_name_the_field_that_does_not_fit() -> None:
    """A body of decisions is checked field by field; one that decides nothing is refused too."""
    for body, says in [
        ([], "a JSON object"),
        ({"approve": "a"}, "'approve' must be a list"),
        ({"reject": {"a": 1}}, "'reject' must be an object"),
        ({"edit": {"a": []}}, "'edit' must be an object"),
        ({"colour": 1}, "unknown field 'colour'"),
        ({}, "decides nothing"),
    ]:
        with pytest.raises(DecisionRefused, match=says) as refused:
            Decisions.from_json(body)
        assert refused.value.why == "malformed"
    decisions = Decisions.from_json({"approve": ["a"], "reject": {"b": "no"}, "edit": {"c": {"x": 1}}})
    assert Decisions.from_json(decisions.to_json()) == decisions


def test_a_paused_model_call_cannot_be_edited_and_a_decided_call_not_decided_again() -> None:
    """`apply` refuses an edit of a paused model call (`not_editable`) and a second decision for a call decided by
    an earlier update (`not_pending`), changing nothing."""
    from onion._durable.decisions import apply

    state = RunState.from_dict(
        {
            "version": 1,
            "run_id": "run-1",
            "agent": "a",
            "status": "paused",
            "messages": [{"role": "user", "text": "hi"}],
            "answered": [],
            "pending": [{"id": "model-1", "name": "m", "args": {}, "reason": "costly", "kind": "model"}],
            "injected": [],
            "steps": 0,
            "usage": {},
            "state": {},
            "output": "",
        }
    )
    with pytest.raises(DecisionRefused) as refused:
        apply(state, Decisions(edit={"model-1": {"x": 1}}))
    assert refused.value.why == "not_editable" and state.pending[0].decision is None
    apply(state, Decisions(["model-1"]), partial=True)
    with pytest.raises(DecisionRefused, match="was decided already") as twice:
        apply(state, Decisions(reject={"model-1": "no"}), partial=True)
    assert twice.value.why == "not_pending" and state.pending[0].decision == "approved"
