"""`run.principal`: who a run is for, seen by every layer and by sub-agents; nothing in `state=` sets it, nor the
counters the built-in layers keep."""

from __future__ import annotations

from typing import Any

import pytest

from middleware import budget, cache, limit, retry
from middleware.budget import BudgetExceeded
from middleware.limit import LimitReached
from onion import (
    Agent,
    Decisions,
    Message,
    ModelCall,
    ModelNext,
    ModelResponse,
    Principal,
    Run,
    RunNext,
    RunResult,
    ToolBatch,
    ToolCall,
    ToolNext,
    ToolResult,
    ToolsNext,
    Usage,
    tool,
)
from onion.errors import ServerError
from onion.stores import MemoryStore
from onion.testing import ScriptedModel, call

ALICE = Principal("u-42", tenant="acme", roles={"support"})


class WhoIsAsking:
    """Records, for every call of every kind, the agent and the principal its run is for."""

    def __init__(self, seen: list[tuple[str, str, Principal | None]]) -> None:
        self.seen = seen

    async def wrap_run(self, run: Run, call_next: RunNext) -> RunResult:
        self.seen.append(("run", run.agent.name, run.principal))
        return await call_next(run)

    async def wrap_model(self, call: ModelCall, call_next: ModelNext) -> ModelResponse:
        self.seen.append(("model", call.run.agent.name, call.run.principal))
        return await call_next(call)

    async def wrap_tools(self, batch: ToolBatch, call_next: ToolsNext) -> list[ToolResult]:
        self.seen.append(("tools", batch.run.agent.name, batch.run.principal))
        return await call_next(batch)

    async def wrap_tool(self, call: ToolCall, call_next: ToolNext) -> ToolResult:
        self.seen.append(("tool", call.run.agent.name, call.run.principal))
        return await call_next(call)


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


async def test_the_principal_reaches_every_layer_kind_and_a_sub_agents_layers() -> None:
    """run, model, tools and tool layers of the agent, and those of a sub-agent it calls, see one principal."""
    seen: list[tuple[str, str, Principal | None]] = []
    child = Agent(ScriptedModel([[call("lookup", key="k")], "child done"]), tools=[lookup], name="researcher")
    child.use(WhoIsAsking(seen))
    parent = Agent(ScriptedModel([[call("researcher", task="find k")], "done"]), tools=[child.as_tool()], name="desk")
    parent.use(WhoIsAsking(seen))
    result = await parent.run("go", principal=ALICE)
    assert result.output == "done" and result.principal == ALICE
    kinds = {(kind, agent) for kind, agent, _ in seen}
    assert kinds == {(kind, agent) for kind in ("run", "model", "tools", "tool") for agent in ("desk", "researcher")}
    assert all(principal is ALICE for _, _, principal in seen)


async def test_a_run_without_a_principal_has_none_and_the_principal_is_read_only() -> None:
    """No `principal=`: `run.principal` is None everywhere; a layer cannot set it."""
    seen: list[tuple[str, str, Principal | None]] = []
    refused: list[str] = []

    async def swap(run: Run, call_next: RunNext) -> RunResult:
        try:
            run.principal = ALICE  # type: ignore[misc]
        except AttributeError as error:
            refused.append(str(error))
        return await call_next(run)

    agent = Agent(ScriptedModel([[call("lookup", key="k")], "done"]), tools=[lookup]).use(swap, WhoIsAsking(seen))
    result = await agent.run("go")
    assert result.principal is None and refused and all(principal is None for _, _, principal in seen)


def priced(text: str, tool_call: bool = False) -> ModelResponse:
    """A response of the model "priced" that costs $0.60 at (1.0, 1.0) USD per million tokens."""
    message = Message.assistant("", [call("lookup", key="k")]) if tool_call else Message.assistant(text)
    return ModelResponse(message, Usage(600_000, 0, 1), model="priced")


async def test_nothing_in_state_sets_the_principal_or_lifts_budget_and_limit() -> None:
    """A caller's `state=` holding every key the layers kept in `run.state` before (and their `run.private`
    keys) changes nothing: no principal, `budget` stops the second $0.60 call of $1, `limit` the third call."""
    spend = budget(max_cost=1.0, prices={"priced": (1.0, 1.0)})
    cap = limit(model_calls=2)
    lifted = {"model": -100, "tools": -100, "per_tool": {}, "spent": [], "over": None}
    state: dict[str, Any] = {
        "principal": ALICE.to_dict(),
        "_principal": ALICE.to_dict(),
        "private": {spend.key: -1000.0, cap.key: lifted},
        "cost": -1000.0,
        spend.key: -1000.0,
        cap.key: lifted,
        "retries": -5,
        "retry": -5,
        "cache": {"hits": 0, "misses": -5},
    }

    spending = Agent(ScriptedModel([priced("", tool_call=True), priced("done")], name="priced"), tools=[lookup])
    spending.use(spend)
    with pytest.raises(BudgetExceeded) as over:
        await spending.run("go", state=dict(state))
    assert over.value.cost == pytest.approx(1.2)

    model = ScriptedModel([[call("lookup", key=str(n))] for n in range(5)])
    capped = Agent(model, tools=[lookup]).use(cap)
    with pytest.raises(LimitReached, match="model_calls"):
        await capped.run("go", state=dict(state))
    assert len(model.requests) == 2

    seen: list[tuple[str, str, Principal | None]] = []
    plain = Agent(ScriptedModel(["done"])).use(WhoIsAsking(seen))
    result = await plain.run("go", state=dict(state))
    assert result.principal is None and {principal for _, _, principal in seen} == {None}


async def test_a_callers_state_cannot_spend_a_runs_budget_for_it() -> None:
    """The other way round: `state={"cost": 999}` does not stop a run within its budget."""
    spend = budget(max_cost=1.0, prices={"priced": (1.0, 1.0)})
    agent = Agent(ScriptedModel([priced("done")], name="priced")).use(spend)
    result = await agent.run("go", state={"cost": 999.0, spend.key: 999.0})
    assert result.output == "done" and result.state["cost"] == pytest.approx(0.6)


async def test_the_reported_retry_and_cache_counts_start_from_the_run_not_from_state() -> None:
    """`retry` and `cache` count in `run.private` and report there in `run.state`: a caller's numbers are replaced."""
    model = ScriptedModel([ServerError("boom"), "ok"])
    agent = Agent(model).use(cache, retry(initial=0.001, jitter=0.0))
    result = await agent.run("hi", state={"retries": 100, "retry": 100, "cache": {"hits": 100, "misses": 100}})
    assert result.state["retries"] == 1 and result.state["cache"] == {"hits": 0, "misses": 1}


@pytest.mark.parametrize("given", [{"id": "u-1"}, "u-1"])
async def test_a_principal_that_is_not_a_principal_is_refused_naming_what_principal_takes(given: Any) -> None:
    """A dict or a string where a `Principal` belongs fails at once (run, stream, resume, decide, recover), never
    later inside a layer or when the run is journaled."""
    agent = Agent(ScriptedModel(["hi"]), store=MemoryStore())
    says = r"principal= takes an onion.Principal \(Principal\('u-42', tenant='acme'\)\) or None, not"
    with pytest.raises(TypeError, match=says):
        await agent.run("hi", principal=given)
    with pytest.raises(TypeError, match=says):
        async for _ in agent.stream("hi", principal=given):
            pass
    with pytest.raises(TypeError, match=says):
        await agent.resume("run-x", principal=given)
    with pytest.raises(TypeError, match=says):
        await agent.decide("run-x", Decisions(approve=["c1"]), principal=given)


def test_principal_attrs_must_be_json_data() -> None:
    """`attrs` is journaled and kept in a RunState: a date there is refused when the principal is made."""
    import datetime

    with pytest.raises(ValueError, match="Principal 'u-1': attrs must be JSON data"):
        Principal("u-1", attrs={"since": datetime.date(2026, 1, 1)})
