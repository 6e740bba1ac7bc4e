"""`concurrency`: caps on tool calls and model calls in flight."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable

import pytest

from middleware import concurrency
from middleware.concurrency import Slots
from onion import Agent, ModelCall, check_history, tool
from onion.testing import FunctionModel, ScriptedModel, ScriptItem, call


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
    await until(lambda: layer.waiting == 1)  # one call holds the slot, the other waits for it
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


class ThreadGauge:
    """Counts calls in flight across threads, the most at once, and the calls finished."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.now = self.peak = self.done = 0

    def enter(self) -> None:
        with self.lock:
            self.now += 1
            self.peak = max(self.peak, self.now)

    def leave(self) -> None:
        with self.lock:
            self.now -= 1
            self.done += 1


async def until(condition: Callable[[], bool], seconds: float = 10.0) -> None:
    """Wait (without blocking the loop) until `condition()` holds; fail after `seconds`."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "condition never held"
        await asyncio.sleep(0.001)


def in_threads(n: int, work: Callable[[], object]) -> None:
    """Run `work` in `n` threads at once (each `run_sync` starts its own event loop) and join them."""
    errors: list[BaseException] = []

    def guarded() -> None:
        try:
            work()
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=guarded) for _ in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []


@pytest.mark.parametrize(
    "layer",
    [concurrency(limit=1), concurrency(limit=None, per_tool={"hold": 1}), concurrency(limit=None, models=1)],
    ids=["limit", "per_tool", "models"],
)
def test_the_cap_holds_across_threads_each_running_its_own_event_loop(layer: concurrency) -> None:
    """A layer shared by agents run in 4 threads (4 event loops) lets one call at a time through a cap of 1.

    Each call holds its slot until every call not yet finished is queued behind it, or one got past the cap.
    """
    gauge = ThreadGauge()

    async def hold() -> None:
        gauge.enter()
        try:
            await until(lambda: gauge.peak > 1 or layer.waiting == 4 - gauge.done - 1)
        finally:
            gauge.leave()

    if layer.models is not None:

        async def answer(_: ModelCall) -> str:
            await hold()
            return "x"

        agent = Agent(FunctionModel(answer)).use(layer)
    else:

        def answer(model_call: ModelCall) -> ScriptItem:
            return "x" if model_call.messages[-1].role == "tool" else [call("hold")]

        agent = Agent(FunctionModel(answer), tools=[tool(description="Hold.")(hold)]).use(layer)

    def run_one() -> None:
        assert not any(message.is_error for message in agent.run_sync("q").messages)

    in_threads(4, run_one)
    assert gauge.done == 4 and gauge.peak == 1


async def test_a_slot_handed_to_a_waiter_cancelled_meanwhile_is_passed_on_not_lost() -> None:
    slots = Slots(1)
    await slots.acquire()
    waiter = asyncio.ensure_future(slots.acquire())
    await until(lambda: slots.waiting == 1)
    slots.release()  # handed to the waiter, which is cancelled before it wakes
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    await asyncio.wait_for(slots.acquire(), timeout=1)
    assert slots.waiting == 0


async def test_a_slot_released_from_a_thread_without_a_loop_wakes_the_waiter() -> None:
    slots = Slots(1)
    await slots.acquire()
    waiter = asyncio.ensure_future(slots.acquire())
    await until(lambda: slots.waiting == 1)
    await asyncio.to_thread(slots.release)
    await asyncio.wait_for(waiter, timeout=10)
    assert slots.waiting == 0


@pytest.mark.parametrize("kwargs", [{"limit": 0}, {"models": -1}, {"per_tool": {"browser": 0}}, {"limit": 2.5}])
def test_caps_below_one_are_rejected(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError, match="at least 1"):
        concurrency(**kwargs)  # type: ignore[arg-type]
