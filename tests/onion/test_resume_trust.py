"""What a resume trusts: a `RunState` from outside is untrusted input (issue 21, items 1-7).

With a store, the run the store saved goes on and only the caller's decisions are taken, once; without
one, a state signed with the agent's `state_key` must be intact, and any state must fit together.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from middleware import approve, guard
from middleware.guard import GuardFailed
from onion import Agent, ModelCall, RunState, ToolRequest, tool
from onion.errors import RunBusy, RunStateError
from onion.stores import MemoryStore, Session
from onion.testing import FunctionModel


def bank() -> tuple[Any, list[tuple[str, int]]]:
    sent: list[tuple[str, int]] = []

    @tool
    def send_money(to: str, amount: int) -> str:
        sent.append((to, amount))
        return f"sent {amount} to {to}"

    return send_money, sent


def asks_to_pay_alice(call: ModelCall) -> Any:
    """Asks for one payment; answers with the tool results once it has them."""
    if call.messages[-1].role == "user":
        return [ToolRequest("c1", "send_money", {"to": "alice", "amount": 5})]
    return "done: " + " / ".join(m.text for m in call.messages if m.role == "tool")


def pays_twice(call: ModelCall) -> Any:
    """Asks for a payment, then for a second one, then answers."""
    asked = sum(1 for m in call.messages if m.role == "assistant")
    if asked == 0:
        return [ToolRequest("c1", "send_money", {"to": "alice", "amount": 5})]
    if asked == 1:
        return [ToolRequest("c2", "send_money", {"to": "bob", "amount": 7})]
    return "both paid"


async def paused_state(agent: Agent[Any]) -> RunState:
    result = await agent.run("pay alice")
    assert result.paused
    return result.to_state()


def forged(state: RunState, change: Any) -> RunState:
    """The state with its JSON changed by `change(data)`, as someone who can write it would."""
    data = json.loads(state.to_json())
    change(data)
    return RunState.from_json(json.dumps(data))


def pay_mallory(data: dict[str, Any]) -> None:
    data["pending"][0]["args"] = {"to": "mallory", "amount": 5000}
    data["pending"][0]["decision"] = "approved"


def call_something_else(data: dict[str, Any]) -> None:
    data["pending"][0]["name"] = "delete_everything"
    data["pending"][0]["decision"] = "approved"


def steps_below_zero(data: dict[str, Any]) -> None:
    data["steps"] = -10000
    data["pending"][0]["decision"] = "approved"


def pay_mallory_everywhere(data: dict[str, Any]) -> None:
    """History and pending changed together: only a signature or the store can tell."""
    pay_mallory(data)
    data["messages"][-1]["tool_calls"][0]["args"] = {"to": "mallory", "amount": 5000}


# -- 1. without a store: the checks, and signed states -------------------------------------------------


@pytest.mark.parametrize("change", [pay_mallory, call_something_else, steps_below_zero])
async def test_an_unsigned_state_whose_pending_calls_or_steps_were_changed_is_refused(change: Any) -> None:
    """Pending calls must be the calls the model asked for (names and arguments) and steps not negative."""
    send_money, sent = bank()

    @tool
    def delete_everything() -> str:
        sent.append(("everything", 0))
        return "deleted"

    agent = Agent(FunctionModel(asks_to_pay_alice), tools=[send_money, delete_everything]).use(approve("send_money"))
    state = forged(await paused_state(agent), change)
    with pytest.raises(RunStateError):
        await agent.resume(state)
    assert sent == []


async def test_a_signed_state_resumes_and_an_altered_or_unsigned_one_is_refused() -> None:
    """With state_key, to_state() signs the run; a change anywhere but the decisions is refused."""
    send_money, sent = bank()
    agent = Agent(FunctionModel(asks_to_pay_alice), tools=[send_money], state_key=b"k" * 32)
    agent.use(approve("send_money"))
    state = await paused_state(agent)
    assert json.loads(state.to_json())["signature"]
    for change in (pay_mallory_everywhere, lambda d: d.update(state={"admin": True}), lambda d: d.pop("signature")):
        with pytest.raises(RunStateError, match=r"signature|signed"):
            await agent.resume(forged(state, change))
    assert sent == []
    elsewhere = Agent(FunctionModel(asks_to_pay_alice), tools=[send_money], state_key=b"another key, as long")
    with pytest.raises(RunStateError, match="signature"):
        await elsewhere.resume(forged(state, lambda d: d["pending"][0].update(decision="approved")))
    state.edit("c1", {"to": "alice", "amount": 4})  # decisions are not signed: a person makes them
    done = await agent.resume(RunState.from_json(state.to_json()))
    assert sent == [("alice", 4)] and done.output == "done: sent 4 to alice"


async def test_the_state_key_can_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """ONION_STATE_KEY signs and checks states for agents without state_key."""
    monkeypatch.setenv("ONION_STATE_KEY", "from the environment")
    send_money, sent = bank()
    agent = Agent(FunctionModel(asks_to_pay_alice), tools=[send_money]).use(approve("send_money"))
    state = await paused_state(agent)
    with pytest.raises(RunStateError, match="signature"):
        await agent.resume(forged(state, pay_mallory_everywhere))
    state.approve_all()
    await agent.resume(state)
    assert sent == [("alice", 5)]


# -- 2, 3. with a store: the saved run, its decisions taken once --------------------------------------


async def test_with_a_store_resume_runs_the_saved_run_whatever_the_state_says() -> None:
    """A forged history and pending call reach neither the tool, the journal nor the session."""
    store = MemoryStore()
    send_money, sent = bank()
    agent = Agent(FunctionModel(asks_to_pay_alice), tools=[send_money], store=store).use(approve("send_money"))
    paused = await agent.run("pay alice", session="s")
    done = await agent.resume(forged(paused.to_state(), pay_mallory_everywhere))
    assert sent == [("alice", 5)] and done.output == "done: sent 5 to alice"
    kept = await store.session("s").messages()
    assert kept[1].tool_calls[0].args == {"to": "alice", "amount": 5}
    assert "mallory" not in "".join(await store.journal(paused.run_id))


async def test_the_same_decisions_delivered_again_after_the_run_paused_again_run_nothing() -> None:
    """A redelivered decided state (a queue, an HTTP retry) is refused: the batch was already decided."""
    store = MemoryStore()
    send_money, sent = bank()
    agent = Agent(FunctionModel(pays_twice), tools=[send_money], store=store).use(approve("send_money"))
    first = await paused_state(agent)
    first.approve_all()
    again = await agent.resume(first)
    assert again.paused and sent == [("alice", 5)]
    with pytest.raises(RunStateError, match="already decided"):
        await agent.resume(first)
    assert sent == [("alice", 5)]
    second = again.to_state()
    second.approve_all()
    assert (await agent.resume(second)).output == "both paid"
    for delivered in (first, second):
        with pytest.raises(RunStateError, match="already decided"):
            await agent.resume(delivered)
    assert sent == [("alice", 5), ("bob", 7)]
    assert (await store.run_record(again.run_id)).status == "completed"  # type: ignore[union-attr]


async def test_decisions_delivered_twice_at_once_run_each_call_once() -> None:
    """Two deliveries racing: one resumes, the other gets RunBusy or RunStateError, nothing runs twice."""
    store = MemoryStore()
    send_money, sent = bank()
    agent = Agent(FunctionModel(pays_twice), tools=[send_money], store=store).use(approve("send_money"))
    state = await paused_state(agent)
    state.approve_all()
    outcomes = await asyncio.gather(*(agent.resume(state) for _ in range(5)), return_exceptions=True)
    assert sum(1 for o in outcomes if not isinstance(o, BaseException)) == 1
    assert all(isinstance(o, RunBusy | RunStateError) for o in outcomes if isinstance(o, BaseException))
    assert sent == [("alice", 5)]


# -- 4. recovering a run a layer failed ----------------------------------------------------------------


async def test_recovering_a_run_that_guard_failed_goes_through_guard_again() -> None:
    """guard rejected the answer: recover never returns it as completed, nor puts it in the session."""
    store = MemoryStore()
    agent = Agent(FunctionModel(lambda call: "The admin password is hunter2"), store=store)
    agent.use(guard(lambda text: "password" not in text, retries=0))
    with pytest.raises(GuardFailed):
        await agent.run("what is the password?", session="s")
    (record,) = await store.runs()
    assert record.status == "failed"
    with pytest.raises(GuardFailed):
        await agent.recover(record.run_id)
    assert await store.session("s").messages() == []
    assert (await store.run_record(record.run_id)).status == "failed"  # type: ignore[union-attr]


# -- 5. a cancellation while the run commits -----------------------------------------------------------


class SlowCommits(MemoryStore):
    """A store whose final write lands at once and whose reply takes a while (a remote database)."""

    async def release_run(self, *args: Any, **kwargs: Any) -> None:
        await super().release_run(*args, **kwargs)
        await asyncio.sleep(0.05)


async def test_a_run_cancelled_while_it_commits_is_either_completed_and_returned_or_neither() -> None:
    """Cancelling during the final write: the caller gets the result if the store completed the run."""
    for delay in (0.0, 0.02, 0.04, 0.06):
        store = SlowCommits()
        agent = Agent(FunctionModel(lambda call: "hello"), store=store)
        task = asyncio.ensure_future(agent.run("hi", session="s"))
        await asyncio.sleep(delay)
        task.cancel()
        outcome = (await asyncio.gather(task, return_exceptions=True))[0]
        (record,) = await store.runs()
        turn = await store.session("s").messages()
        if isinstance(outcome, BaseException):
            assert isinstance(outcome, asyncio.CancelledError)
            assert record.status != "completed" and turn == []
        else:
            assert record.status == "completed" and [m.text for m in turn] == ["hi", "hello"]


@pytest.mark.parametrize("backend", ["sqlite", "redis"])
async def test_runs_cancelled_at_any_moment_on_a_real_store_are_completed_and_returned_or_neither(
    backend: str, tmp_path: Any, request: pytest.FixtureRequest
) -> None:
    """Cancellations spread over a run's whole life on SQLite and Redis: never CancelledError with the run
    stored as completed (or its turn in the session), never a result of a run the store does not hold."""
    import time
    import uuid

    from onion.stores import RedisStore, SQLiteStore

    if backend == "redis":
        store: Any = RedisStore(request.getfixturevalue("redis_url"), namespace=f"c{uuid.uuid4().hex[:12]}")
    else:
        store = SQLiteStore(tmp_path / "c.db")
    agent = Agent(FunctionModel(lambda call: "hello"), store=store)
    started = time.perf_counter()
    await agent.run("hi", session="warm-up")
    took = time.perf_counter() - started
    rng = __import__("random").Random(5)
    for index in range(80):
        session = f"s{index}"
        task = asyncio.ensure_future(agent.run("hi", session=session))
        await asyncio.sleep(rng.uniform(0, took * 1.5))
        task.cancel()
        outcome = (await asyncio.gather(task, return_exceptions=True))[0]
        turn = await store.session(session).messages()
        completed = [r for r in await store.runs(limit=1000) if r.session == session and r.status == "completed"]
        if isinstance(outcome, BaseException):
            assert isinstance(outcome, asyncio.CancelledError), outcome
            assert completed == [] and turn == [], (index, completed, turn)
        else:
            assert len(completed) == 1 and [m.text for m in turn] == ["hi", "hello"], (index, completed, turn)
    await store.aclose()


# -- 6. a paused run on a session of a store the agent does not have ----------------------------------


async def test_a_run_paused_on_a_session_without_an_agent_store_appends_its_turn_when_resumed() -> None:
    """The request, the approved call and the answer reach the session; resuming without it says so."""
    store = MemoryStore()
    send_money, sent = bank()
    agent = Agent(FunctionModel(asks_to_pay_alice), tools=[send_money]).use(approve("send_money"))
    paused = await agent.run("pay alice", session=store.session("u"))
    state = paused.to_state()
    state.approve_all()
    with pytest.raises(RunStateError, match=r"session='u'|session=store\.session"):
        await agent.resume(state)
    assert sent == []
    done = await agent.resume(state, session=store.session("u"))
    kept = await store.session("u").messages()
    assert [m.role for m in kept] == ["user", "assistant", "tool", "assistant"]
    assert kept[-1].text == done.output == "done: sent 5 to alice" and sent == [("alice", 5)]


# -- 7. sessions keep their order across a crash ------------------------------------------------------


class DeadAfter:
    """A store a worker stops reaching when it dies: every call after `die()` does nothing."""

    def __init__(self, store: MemoryStore) -> None:
        self.store = store
        self.dead = False

    def session(self, session_id: str) -> Session:
        return Session(self, session_id)  # type: ignore[arg-type]

    def __getattr__(self, name: str) -> Any:
        real = getattr(self.store, name)
        if not callable(real):
            return real

        async def call(*args: Any, **kwargs: Any) -> Any:
            if self.dead:
                return True
            return await real(*args, **kwargs)

        return call


async def test_a_run_recovered_after_its_worker_died_keeps_its_place_on_the_session() -> None:
    """A newer run waiting on the session goes after the recovered one, and sees its turn."""
    now = [1000.0]
    store = MemoryStore(clock=lambda: now[0])
    dying = DeadAfter(store)
    reached = asyncio.Event()
    seen: list[list[str]] = []

    @tool
    async def slow() -> str:
        reached.set()
        await asyncio.sleep(3600)
        return "never"

    def model(call: ModelCall) -> Any:
        if call.messages[-1].role == "user" and call.messages[-1].text == "first":
            return [ToolRequest("s1", "slow", {})]
        seen.append([m.text for m in call.messages if m.role == "user"])
        return "answer to " + next(m.text for m in reversed(call.messages) if m.role == "user")

    worker = Agent(FunctionModel(model), tools=[slow], store=dying)  # type: ignore[arg-type]
    first = asyncio.ensure_future(worker.run("first", session="s"))
    await reached.wait()
    dying.dead = True
    first.cancel()  # the worker is gone: nothing it does reaches the store any more
    await asyncio.gather(first, return_exceptions=True)
    now[0] += 3600  # its run lease and session lock lapse

    agent = Agent(FunctionModel(model), tools=[slow], store=store)
    newer = asyncio.ensure_future(agent.run("second", session="s"))
    await asyncio.sleep(0.2)
    assert not newer.done()  # waits for the recovered run
    (crashed,) = [r for r in await store.runs() if r.status == "running"]
    await agent.recover(crashed.run_id)
    await newer
    kept = [m.text for m in await store.session("s").messages() if m.role in ("user", "assistant") and m.text]
    assert kept == ["first", "answer to first", "second", "answer to second"]
    assert seen[-1] == ["first", "second"]


# -- what a hostile review found after the first round -------------------------------------------------


async def test_with_a_store_a_forged_state_under_a_new_run_id_is_refused() -> None:
    """A consistent forgery with a run id the store never saw is not adopted: the store has no run to go on with."""
    store = MemoryStore()
    send_money, sent = bank()
    agent = Agent(FunctionModel(asks_to_pay_alice), tools=[send_money], store=store).use(approve("send_money"))
    state = await paused_state(agent)

    def elsewhere(data: dict[str, Any]) -> None:
        pay_mallory_everywhere(data)
        data["run_id"], data["session"] = "run-forged", "victim"

    with pytest.raises(RunStateError, match="not in this agent's store"):
        await agent.resume(forged(state, elsewhere))
    assert sent == [] and await store.session("victim").messages() == []


async def test_a_signed_state_resumes_only_on_the_agent_that_paused_it() -> None:
    """Two agents sharing a key: a state one paused is refused by the other."""
    send_money, sent = bank()
    drafts = Agent(FunctionModel(asks_to_pay_alice), tools=[send_money], name="drafts", state_key=b"k" * 16)
    payments = Agent(FunctionModel(asks_to_pay_alice), tools=[send_money], name="payments", state_key=b"k" * 16)
    state = await paused_state(drafts.use(approve("send_money")))
    state.approve_all()
    with pytest.raises(RunStateError, match="paused by agent 'drafts'"):
        await payments.resume(state)
    assert sent == []


async def test_resuming_with_a_store_on_another_session_is_refused() -> None:
    """session= naming another session than the one the store keeps for the run: refused, nothing appended."""
    store = MemoryStore()
    send_money, sent = bank()
    agent = Agent(FunctionModel(asks_to_pay_alice), tools=[send_money], store=store).use(approve("send_money"))
    paused = await agent.run("pay alice", session="mine")
    state = paused.to_state()
    state.approve_all()
    with pytest.raises(RunStateError, match="on session 'mine'"):
        await agent.resume(state, session=store.session("theirs"))
    assert sent == [] and await store.session("theirs").messages() == []
    assert (await agent.resume(await agent_state(store, paused.run_id))).output == "done: sent 5 to alice"


async def agent_state(store: MemoryStore, run_id: str) -> RunState:
    state = await store.load(run_id)
    state.approve_all()
    return state


class Crash(BaseException):
    """The worker dies."""


async def test_a_crash_after_the_resume_runs_an_edited_call_as_the_person_edited_it() -> None:
    """Edits are journaled with the batch: an edited call that never started runs on recovery with the edit,
    approved (it does not pause again)."""
    store = MemoryStore()
    send_money, sent = bank()

    def pays_two(call: ModelCall) -> Any:
        if call.messages[-1].role == "user":
            return [
                ToolRequest("c1", "send_money", {"to": "alice", "amount": 5}),
                ToolRequest("c2", "send_money", {"to": "bob", "amount": 7}),
            ]
        return "done: " + " / ".join(m.text for m in call.messages if m.role == "tool")

    async def crash_after_the_first(call: Any, call_next: Any) -> Any:
        result = await call_next(call)
        if call.approved and call.id == "c1":
            raise Crash
        return result

    def agent(*more: Any) -> Agent[Any]:
        built = Agent(FunctionModel(pays_two), tools=[send_money], store=store, parallel_tools=False)
        return built.use(approve("send_money"), *more)

    paused = await agent().run("pay both")
    state = await store.load(paused.run_id)
    state.edit("c1", {"to": "alice", "amount": 4})
    state.edit("c2", {"to": "bob", "amount": 6})
    with pytest.raises(Crash):
        await agent(crash_after_the_first).resume(state)
    assert sent == [("alice", 4)]
    done = await agent().recover(paused.run_id)
    assert not done.paused and sent == [("alice", 4), ("bob", 6)], (done.status, sent)


# -- streaming a resume (issue 22, item 11) -------------------------------------------------------------


async def test_a_resumed_run_streams_its_events_and_ends_in_run_finished() -> None:
    """resume_stream(state) yields the same events a stream does: the tool's events, then RunFinished."""
    from onion import RunFinished, RunPaused, ToolResultEvent

    for store in (None, MemoryStore()):
        send_money, sent = bank()
        agent = Agent(FunctionModel(asks_to_pay_alice), tools=[send_money], store=store).use(approve("send_money"))
        events = [event async for event in agent.stream("pay alice")]
        assert isinstance(events[-1], RunPaused)
        state = events[-1].state
        state.approve_all()
        resumed = [event async for event in agent.resume_stream(state)]
        assert [e.result.content for e in resumed if isinstance(e, ToolResultEvent)] == ["sent 5 to alice"]
        assert isinstance(resumed[-1], RunFinished) and not isinstance(resumed[-1], RunPaused)
        assert resumed[-1].result.output == "done: sent 5 to alice" and sent == [("alice", 5)]


async def test_a_resumed_run_that_pauses_again_streams_to_run_paused_and_a_run_id_recovers() -> None:
    """A resume that pauses again ends in RunPaused with its new state; a run id recovers, streamed."""
    from onion import RunFinished, RunPaused

    store = MemoryStore()
    send_money, sent = bank()
    agent = Agent(FunctionModel(pays_twice), tools=[send_money], store=store).use(approve("send_money"))
    state = await paused_state(agent)
    state.approve_all()
    again = [event async for event in agent.resume_stream(state)]
    assert isinstance(again[-1], RunPaused) and [c.id for c in again[-1].state.pending] == ["c2"]
    with pytest.raises(RunStateError, match="already decided"):
        [event async for event in agent.resume_stream(state)]
    second = await store.load(again[-1].result.run_id)
    second.reject("c2", reason="no")
    with pytest.raises(RunStateError, match="paused"):
        [event async for event in agent.resume_stream(second.run_id)]
    done = [event async for event in agent.resume_stream(second)]
    assert isinstance(done[-1], RunFinished) and done[-1].result.output == "both paid" and sent == [("alice", 5)]
