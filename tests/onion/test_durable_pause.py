"""Paused runs on an agent with a store: saved, loaded by id, claimed once, journaled across the pause."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from middleware import approve
from onion import Agent, ModelCall, ToolCall, ToolRequest, check_history, tool
from onion.errors import RunBusy, RunStateError
from onion.stores import MemoryStore
from onion.testing import FunctionModel, ScriptedModel


class Crash(BaseException):
    """The worker dies."""


def batch() -> list[ToolRequest]:
    return [ToolRequest("a", "pay", {"amount": 1}), ToolRequest("b", "pay", {"amount": 2})]


def tools_and_log() -> tuple[list[Any], list[int]]:
    paid: list[int] = []

    @tool
    def pay(amount: int) -> str:
        paid.append(amount)
        return f"paid {amount}"

    return [pay], paid


def answer_with_tool_texts(call: ModelCall) -> Any:
    if call.messages[-1].role == "user":
        return batch()
    check_history(call.messages)
    return " / ".join(m.text for m in call.messages if m.role == "tool")


async def test_a_paused_run_is_kept_in_the_store_and_loaded_by_its_id() -> None:
    """The pause is saved (status paused, pending calls); store.load gives the state to decide and resume."""
    store = MemoryStore()
    tools, paid = tools_and_log()
    agent = Agent(FunctionModel(answer_with_tool_texts), tools=tools, store=store).use(approve("pay"))
    result = await agent.run("pay both")
    assert result.paused
    record = await store.run_record(result.run_id)
    assert record is not None and (record.status, record.pending) == ("paused", 2)
    state = await store.load(result.run_id)
    assert [c.id for c in state.pending] == ["a", "b"]
    state.approve("a")
    state.reject("b", reason="too much")
    done = await agent.resume(state)
    assert done.output == "paid 1 / Tool call pay was rejected: too much" and paid == [1]
    assert (await store.run_record(result.run_id)).status == "completed"  # type: ignore[union-attr]
    assert (await store.load(result.run_id)).output == done.output


async def test_resuming_a_paused_run_by_id_without_decisions_says_how_to_decide() -> None:
    """agent.resume(run_id) on a paused run is a RunStateError pointing at store.load and the decisions."""
    store = MemoryStore()
    tools, paid = tools_and_log()
    agent = Agent(FunctionModel(answer_with_tool_texts), tools=tools, store=store).use(approve("pay"))
    result = await agent.run("pay both")
    with pytest.raises(RunStateError, match=r"store\.load"):
        await agent.resume(result.run_id)
    assert paid == []


async def test_one_state_resumed_twice_runs_once_the_second_gets_run_busy() -> None:
    """Two resumes of one paused run: the first wins, the second raises RunBusy and runs nothing."""
    store = MemoryStore()
    tools, paid = tools_and_log()
    agent = Agent(FunctionModel(answer_with_tool_texts), tools=tools, store=store).use(approve("pay"))
    result = await agent.run("pay both")
    first, second = await store.load(result.run_id), await store.load(result.run_id)
    first.approve_all()
    second.approve_all()
    await agent.resume(first)
    with pytest.raises(RunBusy, match="no longer paused"):
        await agent.resume(second)
    assert paid == [1, 2]


async def test_a_crash_after_the_resume_never_runs_a_rejected_call() -> None:
    """The resuming worker dies in the approved call: recovery reports it interrupted, never runs the rejected one."""
    store = MemoryStore()
    tools, paid = tools_and_log()

    async def crash_after_pay(call: ToolCall, call_next: Any) -> Any:
        result = await call_next(call)
        if call.approved:
            raise Crash
        return result

    agent = Agent(FunctionModel(answer_with_tool_texts), tools=tools, store=store).use(approve("pay"))
    result = await agent.run("pay both")
    state = await store.load(result.run_id)
    state.approve("a")
    state.reject("b", reason="no")
    with pytest.raises(Crash):
        await Agent(ScriptedModel([]), tools=tools, store=store).use(approve("pay"), crash_after_pay).resume(state)
    assert paid == [1]
    recovered = await agent.resume(result.run_id)
    assert paid == [1]
    assert "pay was interrupted" in recovered.output and "Tool call pay was rejected: no" in recovered.output


async def test_a_state_paused_without_a_store_is_journaled_when_resumed_with_one() -> None:
    """A RunState signed by an agent without a store resumes on one with a store (and the same key): journaled
    from there on. Unsigned, the store has no run to go on with and refuses it."""
    tools, paid = tools_and_log()
    key = b"shared by both agents"
    pausing = Agent(FunctionModel(answer_with_tool_texts), tools=tools, state_key=key).use(approve("pay"))
    paused = await pausing.run("pay both")
    state = paused.to_state()
    state.approve_all()
    store = MemoryStore()
    with pytest.raises(RunStateError, match="not in this agent's store"):
        await Agent(FunctionModel(answer_with_tool_texts), tools=tools, store=store).resume(state)
    assert paid == []
    done = await Agent(FunctionModel(answer_with_tool_texts), tools=tools, store=store, state_key=key).resume(state)
    assert done.output == "paid 1 / paid 2" and paid == [1, 2]
    record = await store.run_record(paused.run_id)
    assert record is not None and record.status == "completed"


async def test_a_paused_run_on_a_session_is_appended_when_it_completes_after_resume() -> None:
    """Paused: the session is unchanged. Completed after resume: the whole run is appended."""
    store = MemoryStore()
    tools, _ = tools_and_log()
    agent = Agent(FunctionModel(answer_with_tool_texts), tools=tools, store=store).use(approve("pay"))
    paused = await agent.run("pay both", session="s")
    assert await store.session("s").messages() == []
    state = await store.load(paused.run_id)
    state.approve_all()
    done = await agent.resume(state)
    kept = await store.session("s").messages()
    assert [m.role for m in kept] == ["user", "assistant", "tool", "tool", "assistant"]
    assert kept[-1].text == done.output


async def test_a_streamed_run_is_journaled_and_its_pause_saved() -> None:
    """agent.stream on an agent with a store: the paused run is in the store, and resumes from it."""
    from onion import RunPaused

    store = MemoryStore()
    tools, paid = tools_and_log()
    agent = Agent(FunctionModel(answer_with_tool_texts), tools=tools, store=store).use(approve("pay"))
    events = [event async for event in agent.stream("pay both")]
    assert isinstance(events[-1], RunPaused)
    run_id = events[-1].result.run_id
    state = await store.load(run_id)
    state.approve_all()
    assert (await agent.resume(state)).output == "paid 1 / paid 2" and paid == [1, 2]


async def test_a_recovered_call_that_never_started_can_still_pause_for_approval() -> None:
    """The worker died before reaching a call that needs approval: on recovery it pauses, saved in the store."""
    store = MemoryStore()
    tools, paid = tools_and_log()

    @tool
    def note() -> str:
        return "noted"

    async def crash_after_note(call: ToolCall, call_next: Any) -> Any:
        result = await call_next(call)
        if call.name == "note":
            raise Crash
        return result

    requests = [ToolRequest("n", "note", {}), ToolRequest("a", "pay", {"amount": 1})]
    worker = Agent(FunctionModel(lambda call: requests), tools=[note, *tools], store=store, parallel_tools=False)
    with pytest.raises(Crash):
        await worker.use(crash_after_note).run("note, then pay")
    (record,) = await store.runs()
    agent = Agent(FunctionModel(answer_with_tool_texts), tools=[note, *tools], store=store).use(approve("pay"))
    paused = await agent.resume(record.run_id)
    assert paused.paused and [c.id for c in paused.pending] == ["a"] and paid == []
    state = await store.load(record.run_id)
    state.approve("a")
    done = await agent.resume(state)
    assert "note was interrupted" in done.output and done.output.endswith("paid 1") and paid == [1]


async def test_a_resume_cancelled_while_it_waits_for_its_sessions_lock_leaves_the_run_paused_as_it_was() -> None:
    """Claimed, then cancelled before it went on (another holder keeps the session): the run waits as it was,
    its decisions not consumed, and a later resume runs it."""
    store = MemoryStore()
    tools, paid = tools_and_log()
    agent = Agent(FunctionModel(answer_with_tool_texts), tools=tools, store=store).use(approve("pay"))
    result = await agent.run("pay both", session="s")
    assert result.paused
    assert await store.lock_session("s", "someone else", 60)  # the session is busy
    state = await store.load(result.run_id)
    state.approve("a")
    state.approve("b")
    resuming = asyncio.create_task(agent.resume(state))
    while (await store.run_record(result.run_id)).status != "running":  # type: ignore[union-attr]
        await asyncio.sleep(0)
    resuming.cancel()
    with pytest.raises(asyncio.CancelledError):
        await resuming
    record = await store.run_record(result.run_id)
    assert record is not None and (record.status, record.pending, record.owner) == ("paused", 2, None)
    assert paid == []
    await store.unlock_session("s", "someone else")
    again = await store.load(result.run_id)
    again.approve("a")
    again.approve("b")
    assert (await agent.resume(again)).output == "paid 1 / paid 2" and paid == [1, 2]
