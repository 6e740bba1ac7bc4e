"""`concurrency`: caps on tool calls and model calls in flight."""

from __future__ import annotations

import asyncio

import pytest

from middleware import concurrency
from onion import Agent, check_history, tool
from onion.testing import FunctionModel, ScriptedModel, call


class Gauge:
    """Counts how many calls are in flight, and the most at once."""

    def __init__(self) -> None:
        self.now = 0
        self.peak = 0

    async def hold(self, seconds: float = 0.01) -> None:
        self.now += 1
        self.peak = max(self.peak, self.now)
        try:
            await asyncio.sleep(seconds)
        finally:
            self.now -= 1


def agent_with(layer: concurrency, gauges: dict[str, Gauge], calls: list[str]) -> Agent:
    @tool
    async def browser(url: str) -> str:
        """Browse."""
        await gauges["browser"].hold()
        await gauges["all"].hold(0)
        return url

    @tool
    async def search(query: str) -> str:
        """Search."""
        await gauges["all"].hold()
        return query

    model = ScriptedModel(
        [[call(name, url="u") if name == "browser" else call(name, query="q") for name in calls], "x"]
    )
    return Agent(model, tools=[browser, search]).use(layer)


async def test_at_most_limit_tool_calls_run_at_once() -> None:
    gauges = {"all": Gauge(), "browser": Gauge()}
    result = await agent_with(concurrency(limit=2), gauges, ["search"] * 6).run("q")
    assert gauges["all"].peak == 2
    check_history(result.messages)


async def test_bare_concurrency_caps_at_eight() -> None:
    gauges = {"all": Gauge(), "browser": Gauge()}
    await agent_with(concurrency(), gauges, ["search"] * 12).run("q")
    assert gauges["all"].peak == 8
    assert Agent(ScriptedModel(["x"])).use(concurrency).stack.layers()[0].name == "concurrency"


async def test_per_tool_cap_applies_to_that_tool_only() -> None:
    gauges = {"all": Gauge(), "browser": Gauge()}
    layer = concurrency(limit=None, per_tool={"browser": 1})
    await agent_with(layer, gauges, ["browser"] * 3 + ["search"] * 3).run("q")
    assert gauges["browser"].peak == 1
    assert gauges["all"].peak >= 3


async def test_the_cap_is_shared_by_concurrent_runs_of_agents_sharing_the_layer() -> None:
    gauges = {"all": Gauge(), "browser": Gauge()}
    layer = concurrency(limit=3)
    agents = [agent_with(layer, gauges, ["search"] * 4) for _ in range(3)]
    await asyncio.gather(*(agent.run("q") for agent in agents))
    assert gauges["all"].peak == 3


async def test_models_caps_concurrent_model_calls() -> None:
    gauge = Gauge()

    async def answer(_: object) -> str:
        await gauge.hold()
        return "ok"

    agent = Agent(FunctionModel(answer)).use(concurrency(models=2))
    await asyncio.gather(*(agent.run("q") for _ in range(5)))
    assert gauge.peak == 2


async def test_cancelled_waiters_give_back_no_slot_and_holders_release_theirs() -> None:
    release = asyncio.Event()

    @tool
    async def slow() -> str:
        """Wait."""
        await release.wait()
        return "done"

    layer = concurrency(limit=1)
    agent = Agent(ScriptedModel([[call("slow"), call("slow")], "x"]), tools=[slow]).use(layer)
    task = asyncio.ensure_future(agent.run("q"))
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    release.set()
    again = Agent(ScriptedModel([[call("slow")], "x"]), tools=[slow]).use(layer)
    result = await asyncio.wait_for(again.run("q"), timeout=2)
    assert result.output == "x"


def test_a_layer_reused_on_a_new_event_loop_works() -> None:
    gauges = {"all": Gauge(), "browser": Gauge()}
    layer = concurrency(limit=1)
    for _ in range(2):
        assert agent_with(layer, gauges, ["search"] * 2).run_sync("q").output == "x"
    assert gauges["all"].peak == 1


@pytest.mark.parametrize("kwargs", [{"limit": 0}, {"models": -1}, {"per_tool": {"browser": 0}}, {"limit": 2.5}])
def test_caps_below_one_are_rejected(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError, match="at least 1"):
        concurrency(**kwargs)  # type: ignore[arg-type]
