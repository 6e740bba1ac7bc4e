"""`ctx.pause(reason)` from every kind of layer: run, model, tools (a batch) and tool, with a paused tool call's
durability (`to_state()`, decisions, resume in another process, journaled)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from onion import Agent, ModelCall, Run, RunState, ToolBatch, ToolRequest, tool
from onion.errors import BatchDecided, CallRejected, RunStateError
from onion.stores import MemoryStore, SQLiteStore
from onion.testing import FunctionModel, ScriptedModel

ROOT = Path(__file__).parents[2]
WORKER = Path(__file__).with_name("pause_anywhere_worker.py")


async def expensive(call: ModelCall, call_next: Any) -> Any:
    """A model layer: a person approves each model call."""
    if not call.approved:
        return call.pause("the big model costs money")
    return await call_next(call)


def counting() -> tuple[FunctionModel, list[int]]:
    asked: list[int] = []

    def answer(call: ModelCall) -> str:
        asked.append(len(call.messages))
        return f"answer {len(asked)}"

    return FunctionModel(answer), asked


async def test_a_model_layer_pauses_the_model_call_and_approving_lets_it_go_ahead() -> None:
    model, asked = counting()
    agent = Agent(model, name="pricey").use(expensive)
    paused = await agent.run("hi")
    assert paused.paused and asked == [] and paused.messages[-1].role == "user"
    (pending,) = paused.pending
    assert pending.kind == "model" and pending.reason == "the big model costs money" and pending.args == {}
    state = RunState.from_json(paused.to_state().to_json())
    assert state.steps == 0
    state.approve(pending.id)
    done = await agent.resume(state)
    assert done.output == "answer 1" and asked == [1] and done.usage.requests == 1


async def test_rejecting_a_paused_model_call_ends_the_run_with_call_rejected_and_asks_no_model() -> None:
    model, asked = counting()
    agent = Agent(model).use(expensive)
    state = (await agent.run("hi")).to_state()
    state.reject(state.pending[0].id, reason="too dear")
    with pytest.raises(CallRejected, match="too dear") as raised:
        await agent.resume(state)
    assert raised.value.kind == "model" and raised.value.reason == "too dear" and asked == []


async def test_a_paused_model_call_cannot_be_edited() -> None:
    state = (await Agent(counting()[0]).use(expensive).run("hi")).to_state()
    with pytest.raises(RunStateError, match="no arguments to edit"):
        state.edit(state.pending[0].id, {"x": 1})


async def test_a_model_call_paused_after_a_tool_batch_resumes_with_the_results_in_its_history() -> None:
    @tool
    def look(q: str) -> str:
        """Look something up."""
        return f"found {q}"

    seen: list[list[str]] = []

    async def second_call_needs_a_person(call: ModelCall, call_next: Any) -> Any:
        if call.run.steps == 2 and not call.approved:
            return call.pause("second call")
        seen.append([m.role for m in call.messages])
        return await call_next(call)

    script = ScriptedModel([[ToolRequest("t1", "look", {"q": "x"})], "done"])
    agent = Agent(script, tools=[look]).use(second_call_needs_a_person)
    paused = await agent.run("go")
    assert paused.paused and paused.pending[0].kind == "model" and paused.messages[-1].role == "tool"
    state = RunState.from_json(paused.to_state().to_json())
    state.approve_all()
    done = await agent.resume(state)
    assert done.output == "done" and seen[-1] == ["user", "assistant", "tool"]


async def test_a_paused_model_call_in_a_store_is_consumed_once_and_journaled() -> None:
    model, asked = counting()
    store = MemoryStore()
    agent = Agent(model, store=store).use(expensive)
    paused = await agent.run("hi")
    record = await store.run_record(paused.run_id)
    assert record is not None and record.status == "paused" and record.pending == 1
    state = await store.load(paused.run_id)
    state.approve(state.pending[0].id)
    done = await agent.resume(state)
    assert done.output == "answer 1"
    with pytest.raises(BatchDecided):
        await agent.resume(state)
    assert asked == [1]
    entries = [json.loads(e) for e in await store.journal(paused.run_id)]
    assert [e["k"] for e in entries] == ["start", "end", "decision", "decided", "model", "end"]
    assert entries[3]["kind"] == "model" and entries[3]["rejected"] is None


async def test_a_forged_model_pause_from_outside_a_store_is_refused() -> None:
    """With a store, only the saved run goes on: a state the store never saw is refused."""
    store = MemoryStore()
    state = (await Agent(counting()[0]).use(expensive).run("hi")).to_state()
    state.approve_all()
    with pytest.raises(RunStateError, match="not in this agent's store"):
        await Agent(counting()[0], store=store).use(expensive).resume(state)


async def test_a_model_pause_that_does_not_fit_its_history_is_refused() -> None:
    key = b"k" * 16
    agent = Agent(counting()[0], state_key=key).use(expensive)
    state = (await agent.run("hi")).to_state()
    state.pending[0].args = {"smuggled": True}
    state.approve_all()
    with pytest.raises(RunStateError, match="signature does not match"):
        await agent.resume(state)
    unsigned = (await Agent(counting()[0]).use(expensive).run("hi")).to_state()
    unsigned.answered = [unsigned.messages[0]]
    unsigned.approve_all()
    with pytest.raises(RunStateError, match="do not fit together"):
        await Agent(counting()[0]).use(expensive).resume(unsigned)


async def test_a_crash_in_the_approved_model_call_does_not_ask_again_on_recovery() -> None:
    """The approval is journaled before the call it lets through: a worker dying in it is recovered approved."""
    store = MemoryStore()
    model, asked = counting()
    crashing = {"on": True}

    async def dies(call: ModelCall, call_next: Any) -> Any:
        if crashing["on"]:
            raise KeyboardInterrupt  # the worker stops here: the run is left running in the store
        return await call_next(call)

    agent = Agent(model, store=store).use(expensive, dies)
    paused = await agent.run("hi")
    state = await store.load(paused.run_id)
    state.approve_all()
    with pytest.raises(KeyboardInterrupt):
        await agent.resume(state)
    crashing["on"] = False
    done = await agent.resume(paused.run_id)
    assert done.output == "answer 1" and asked == [1]


async def test_a_rejected_model_call_is_journaled_so_recovery_rejects_it_again() -> None:
    store = MemoryStore()
    model, asked = counting()
    agent = Agent(model, store=store).use(expensive)
    paused = await agent.run("hi")
    state = await store.load(paused.run_id)
    state.reject(state.pending[0].id, reason="no")
    with pytest.raises(CallRejected):
        await agent.resume(state)
    record = await store.run_record(paused.run_id)
    assert record is not None and record.status == "failed"
    with pytest.raises(CallRejected, match="no"):
        await agent.resume(paused.run_id)
    assert asked == []


async def test_a_batch_layer_pauses_its_whole_batch_each_call_decided_on_its_own() -> None:
    ran: list[str] = []

    @tool
    def act(name: str) -> str:
        """Act."""
        ran.append(name)
        return f"did {name}"

    async def hold_batches(batch: ToolBatch, call_next: Any) -> Any:
        if not batch.approved:
            return batch.pause("a person checks each batch")
        return await call_next(batch)

    script = ScriptedModel([[ToolRequest("a", "act", {"name": "a"}), ToolRequest("b", "act", {"name": "b"})], "ok"])
    agent = Agent(script, tools=[act]).use(hold_batches)
    paused = await agent.run("go")
    assert ran == [] and [(c.id, c.kind, c.reason) for c in paused.pending] == [
        ("a", "tool", "a person checks each batch"),
        ("b", "tool", "a person checks each batch"),
    ]
    state = RunState.from_json(paused.to_state().to_json())
    state.approve("a")
    state.reject("b", reason="not b")
    done = await agent.resume(state)
    assert ran == ["a"] and done.output == "ok"
    assert [m.text for m in done.messages if m.role == "tool"] == ["did a", "Tool call act was rejected: not b"]


async def test_a_run_layer_pauses_before_the_first_model_call() -> None:
    model, asked = counting()
    entered: list[bool] = []

    async def gate(run: Run, call_next: Any) -> Any:
        entered.append(run.approved)
        if not run.approved:
            return run.pause("a person starts each run")
        return await call_next(run)

    store = MemoryStore()
    agent = Agent(model, name="gated", store=store).use(gate)
    paused = await agent.run("hi", state={"n": 1})
    assert paused.paused and asked == [] and entered == [False]
    (pending,) = paused.pending
    assert pending.kind == "run" and pending.name == "gated"
    state = await store.load(paused.run_id)
    state.approve(pending.id)
    done = await agent.resume(state)
    assert done.output == "answer 1" and done.state == {"n": 1} and entered == [False, True] and asked == [1]


async def test_rejecting_a_paused_run_ends_it_before_its_run_layers() -> None:
    model, asked = counting()
    entered: list[bool] = []

    async def gate(run: Run, call_next: Any) -> Any:
        entered.append(run.approved)
        return run.pause("check") if not run.approved else await call_next(run)

    agent = Agent(model).use(gate)
    state = (await agent.run("hi")).to_state()
    state.reject(state.pending[0].id, reason="not today")
    with pytest.raises(CallRejected, match="not today") as raised:
        await agent.resume(state)
    assert raised.value.kind == "run" and entered == [False] and asked == []


def worker(*args: str) -> list[str]:
    return [sys.executable, str(WORKER), *args]


def test_a_model_call_paused_in_a_killed_process_is_approved_and_finished_in_another(tmp_path: Path) -> None:
    """The pausing worker is SIGKILLed while paused: nothing is lost; another process approves it from the
    SQLite store, resumes and finishes; the journal holds the decision and the model call."""
    db = str(tmp_path / "runs.db")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    pausing = subprocess.Popen(worker("start", db), stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert pausing.stdout is not None
        run_id = pausing.stdout.readline().strip()
        assert run_id.startswith("run-"), run_id
    finally:
        pausing.send_signal(signal.SIGKILL)
        pausing.wait(30)
    assert pausing.returncode == -signal.SIGKILL
    done = subprocess.run(
        worker("approve", db, run_id), capture_output=True, text=True, timeout=60, env=env, check=False
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["status"] == "completed" and result["output"] == "answered after 1 message(s)"
    assert result["state"] == {"user": "ann"} and result["id"].startswith("model-")

    async def journal() -> list[dict[str, Any]]:
        store = SQLiteStore(db)
        record = await store.run_record(run_id)
        assert record is not None and record.status == "completed"
        return [json.loads(entry) for entry in await store.journal(run_id)]

    import asyncio

    entries = asyncio.run(journal())
    assert [e["k"] for e in entries] == ["start", "end", "decision", "decided", "model", "end"]
    decided = {name: value for name, value in entries[3].items() if name not in ("p", "n", "m")}  # not its chain
    assert decided == {"k": "decided", "id": result["id"], "kind": "model", "rejected": None}
