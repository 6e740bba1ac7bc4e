"""`ToolThreads`: sync tools run on onion's own threads; a thread left running never blocks anything else."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import pytest

from middleware import retry, timeout
from onion import Agent, ToolCall, ToolThreads, tool
from onion.errors import ToolLeftRunning
from onion.testing import ScriptedModel, call


class Gate:
    """A sync tool body that blocks until the test opens the gate (no sleeps, no timings)."""

    def __init__(self) -> None:
        self.entered = threading.Semaphore(0)
        self.opened = threading.Event()
        self.finished = threading.Event()
        self.runs = 0

    def hold(self) -> str:
        self.runs += 1
        self.entered.release()
        self.opened.wait()
        self.finished.set()
        return "charged"


@pytest.fixture
def gate() -> Iterator[Gate]:
    """A gate opened at the end of the test, so no thread outlives it."""
    made = Gate()
    yield made
    made.opened.set()


def charging(gate: Gate) -> object:
    @tool
    def charge_card(amount: int) -> str:
        """Charge the card."""
        return gate.hold()

    return charge_card


async def test_a_timed_out_sync_tool_is_not_retried_and_the_model_is_told_it_may_still_complete(gate: Gate) -> None:
    """retry(tools=True) around timeout(tools=...): one charge, and the model reads the truth, not "failed"."""
    model = ScriptedModel([[call("charge_card", amount=42)], "ok"])
    agent = Agent(model, tools=[charging(gate)]).use(retry(tools=True, initial=0, jitter=0), timeout(tools=0.5))
    result = await agent.run("pay")
    assert gate.runs == 1
    answer = result.messages[-2]
    assert answer.is_error
    assert answer.text.startswith("Tool charge_card gave no result: TimeoutExceeded: tool charge_card timed out")
    assert "may still complete" in answer.text and "failed" not in answer.text


async def test_a_call_left_running_is_never_started_again_by_a_hand_written_retry(gate: Gate) -> None:
    """A layer that calls `call_next` again after a timeout gets `ToolLeftRunning`; the tool ran once."""
    seen: list[BaseException] = []

    async def stubborn(ctx: ToolCall, call_next: object) -> object:
        for _ in range(3):
            try:
                return await call_next(ctx)  # type: ignore[operator]
            except Exception as error:
                seen.append(error)
        raise seen[-1]

    model = ScriptedModel([[call("charge_card", amount=42)], "ok"])
    agent = Agent(model, tools=[charging(gate)]).use(stubborn, timeout(tools=0.5))
    result = await agent.run("pay")
    assert gate.runs == 1
    assert [type(error).__name__ for error in seen] == ["TimeoutExceeded", "ToolLeftRunning", "ToolLeftRunning"]
    assert isinstance(seen[-1], ToolLeftRunning) and "ToolLeftRunning" in result.messages[-2].text


def test_run_sync_returns_when_the_run_ends_without_waiting_for_a_thread_left_running(gate: Gate) -> None:
    """The run is over once the model answered; the tool's thread is still blocked when `run_sync` returns."""
    model = ScriptedModel([[call("charge_card", amount=42)], "ok"])
    result = Agent(model, tools=[charging(gate)]).use(timeout(tools=0.5)).run_sync("pay")
    assert result.output == "ok"
    assert gate.runs == 1 and not gate.finished.is_set()
    gate.opened.set()
    assert gate.finished.wait(5)


async def test_threads_left_running_do_not_starve_other_sync_tools(gate: Gate) -> None:
    """With every thread of the pool hung on a timed-out tool, an instant sync tool still runs."""

    @tool
    def instant() -> str:
        """Answer at once."""
        return "instant"

    threads = ToolThreads(2)
    hung = [call("charge_card", amount=i) for i in range(2)]
    model = ScriptedModel([hung, [call("instant")], "ok"])
    agent = Agent(model, tools=[charging(gate), instant], tool_threads=threads)
    agent.use(timeout(per_tool={"charge_card": 0.5}))
    result = await agent.run("go")
    assert result.messages[-2].text == "instant" and not result.messages[-2].is_error
    assert threads.left_running == 2


async def test_too_many_threads_left_running_fail_a_new_call_at_once_naming_the_hung_tool(gate: Gate) -> None:
    """Past `max_abandoned`, a sync call does not queue behind hung threads: its error names them."""
    threads = ToolThreads(1, max_abandoned=1)
    model = ScriptedModel([[call("charge_card", amount=1)], [call("charge_card", amount=2)], "ok"])
    agent = Agent(model, tools=[charging(gate)], tool_threads=threads).use(timeout(tools=0.5))
    result = await agent.run("go")
    assert gate.runs == 1
    text = result.messages[-2].text
    assert "ToolThreadsExhausted" in text and "(charge_card x1)" in text and "max_abandoned=1" in text


async def test_a_sync_tool_can_see_that_its_call_was_cancelled() -> None:
    """`call.cancelled` is set when onion stops waiting: a cooperative tool stops early."""
    stopped = threading.Event()

    @tool
    def crawl(call: ToolCall) -> str:
        """Crawl until told to stop."""
        call.cancelled.wait()
        stopped.set()
        return "stopped"

    model = ScriptedModel([[call("crawl")], "ok"])
    await Agent(model, tools=[crawl]).use(timeout(tools=0.5)).run("go")
    assert await asyncio.to_thread(stopped.wait, 5)


async def test_a_queued_sync_call_whose_run_is_cancelled_never_starts(gate: Gate) -> None:
    """Only `size` calls run at once; one still waiting for a thread when its run is cancelled never runs."""
    threads = ToolThreads(1)
    model = ScriptedModel([[call("charge_card", amount=1), call("charge_card", amount=2)], "ok"])
    task = asyncio.ensure_future(Agent(model, tools=[charging(gate)], tool_threads=threads).run("go"))
    await asyncio.to_thread(gate.entered.acquire)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    gate.opened.set()
    assert await asyncio.to_thread(gate.finished.wait, 5)
    assert gate.runs == 1


def test_tool_threads_refuse_a_size_that_is_not_a_positive_int() -> None:
    with pytest.raises(ValueError, match="size must be a positive int"):
        ToolThreads(0)
