"""Sessions: a conversation kept in a store, continued by each run, serialised across processes."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from onion import Agent, Message, ModelCall
from onion.errors import LeaseLost, RunBusy
from onion.stores import MemoryStore, RedisStore, Session, SQLiteStore
from onion.testing import FunctionModel, ScriptedModel


def echo_history(call: ModelCall) -> str:
    """Answers with the user texts it was sent, so each answer shows what the run saw."""
    return "|".join(m.text for m in call.messages if m.role == "user")


RUN_ONE = textwrap.dedent(
    """
    import asyncio, sys
    from onion import Agent
    from onion.stores import SQLiteStore
    from onion.testing import FunctionModel

    def echo(call):
        return "|".join(m.text for m in call.messages if m.role == "user")

    async def main():
        async with SQLiteStore(sys.argv[1]) as store:
            agent = Agent(FunctionModel(echo), store=store, instructions="be brief")
            print((await agent.run(sys.argv[2], session="user-42")).output)

    asyncio.run(main())
    """
)


@pytest.mark.slow
async def test_three_runs_on_one_session_across_two_processes_see_the_whole_conversation(tmp_path: Path) -> None:
    """Runs in this process and in a subprocess continue one SQLite session, each seeing all before it."""
    path = tmp_path / "onion.db"
    async with SQLiteStore(path) as store:
        agent = Agent(FunctionModel(echo_history), store=store, instructions="be brief")
        assert (await agent.run("one", session="user-42")).output == "one"
        other = await asyncio.to_thread(
            subprocess.run, [sys.executable, "-c", RUN_ONE, str(path), "two"], capture_output=True, text=True
        )
        assert other.returncode == 0, other.stderr
        assert other.stdout.strip() == "one|two"
        result = await agent.run("three", session=store.session("user-42"))
        assert result.output == "one|two|three"
        assert result.messages[0] == Message.system("be brief")
        kept = await store.session("user-42").messages()
        assert [(m.role, m.text) for m in kept] == [
            ("user", "one"),
            ("assistant", "one"),
            ("user", "two"),
            ("assistant", "one|two"),
            ("user", "three"),
            ("assistant", "one|two|three"),
        ]


@pytest.mark.parametrize("backend", ["memory", "sqlite-two-connections"])
async def test_two_concurrent_runs_on_one_session_are_serialised(backend: str, tmp_path: Path) -> None:
    """The second run waits for the first to finish and starts from its messages; nothing is lost or interleaved."""
    if backend == "memory":
        first_store = second_store = MemoryStore()
    else:
        first_store, second_store = SQLiteStore(tmp_path / "s.db"), SQLiteStore(tmp_path / "s.db")
    release = asyncio.Event()
    entered = asyncio.Event()

    async def slow(call: ModelCall) -> str:
        entered.set()
        await release.wait()
        return echo_history(call)

    first = asyncio.create_task(Agent(FunctionModel(slow), store=first_store).run("a", session="s"))
    await entered.wait()
    second = asyncio.create_task(Agent(FunctionModel(echo_history), store=second_store).run("b", session="s"))
    for _ in range(20):
        await asyncio.sleep(0)
    assert not second.done()
    release.set()
    assert (await first).output == "a"
    assert (await second).output == "a|b"
    texts = [m.text for m in await first_store.session("s").messages()]
    assert texts == ["a", "a", "b", "a|b"]
    for store in {first_store, second_store}:
        if isinstance(store, SQLiteStore):
            await store.aclose()


async def test_a_failed_run_leaves_the_session_unchanged() -> None:
    """A run that raises appends nothing; the next run starts from the same history."""
    store = MemoryStore()
    agent = Agent(ScriptedModel(["first"]), store=store)
    await agent.run("hello", session="s")
    with pytest.raises(Exception, match="script"):
        await agent.run("again", session="s")
    assert [m.text for m in await store.session("s").messages()] == ["hello", "first"]


async def test_session_clear_forgets_the_conversation() -> None:
    """After clear(), the next run starts afresh."""
    store = MemoryStore()
    agent = Agent(FunctionModel(echo_history), store=store)
    await agent.run("one", session="s")
    await store.session("s").clear()
    assert (await agent.run("two", session="s")).output == "two"


def test_a_session_id_without_a_store_says_how_to_give_one() -> None:
    """session="id" on an agent without a store is refused, naming the fix."""
    agent = Agent(ScriptedModel(["x"]))
    with pytest.raises(ValueError, match="needs a store"):
        agent.run_sync("hi", session="s")


def test_a_session_kept_in_another_store_than_the_agents_is_refused_naming_the_fix() -> None:
    """On an agent with a store, a run completes in the write that appends its turn: the session must be there."""
    agent = Agent(ScriptedModel(["x"]), store=MemoryStore())
    with pytest.raises(ValueError, match="another store than agent"):
        agent.run_sync("hi", session=MemoryStore().session("s"))


async def test_a_streamed_run_continues_and_extends_its_session() -> None:
    """agent.stream(..., session=) sees the session's history and appends the run when it finishes."""
    from onion import RunFinished

    store = MemoryStore()
    agent = Agent(FunctionModel(echo_history), store=store)
    await agent.run("one", session="s")
    events = [event async for event in agent.stream("two", session="s")]
    assert isinstance(events[-1], RunFinished) and events[-1].result.output == "one|two"
    assert [m.text for m in await store.session("s").messages()] == ["one", "one", "two", "one|two"]


DIE_FINISHING = textwrap.dedent(
    """
    import asyncio, os, sys
    from onion import Agent
    from onion.stores import SQLiteStore
    from onion.testing import ScriptedModel

    class DyingStore(SQLiteStore):
        '''Dies (os._exit, no cleanup) at the write that completes a run: before it, or right after it.'''

        async def release_run(self, *args, **options):
            if sys.argv[2] == "before":
                os._exit(3)
            await super().release_run(*args, **options)
            os._exit(3)

    async def main():
        store = DyingStore(sys.argv[1])
        await Agent(ScriptedModel(["hello"]), store=store).run("hi", session="s")

    asyncio.run(main())
    """
)


@pytest.mark.parametrize("dies", ["before", "after"])
async def test_a_worker_dying_as_its_session_run_completes_leaves_the_turn_in_the_session_exactly_once(
    dies: str, tmp_path: Path
) -> None:
    """A worker killed just before or just after the write that completes a run on a session: once the run is
    recovered (or found completed), the session holds the run's turn once, never zero times, never twice."""
    path = tmp_path / "onion.db"
    worker = await asyncio.to_thread(
        subprocess.run, [sys.executable, "-c", DIE_FINISHING, str(path), dies], capture_output=True, text=True
    )
    assert worker.returncode == 3, worker.stderr
    async with SQLiteStore(path, clock=lambda: time.time() + 3600) as store:  # past the dead worker's leases
        (record,) = await store.runs()
        agent = Agent(ScriptedModel(["hello"]), store=store)
        if dies == "before":
            assert (await agent.recover(record.run_id)).output == "hello"
        with pytest.raises(RunBusy, match="completed"):
            await agent.recover(record.run_id)
        kept = await store.session("s").messages()
    assert [(m.role, m.text) for m in kept] == [("user", "hi"), ("assistant", "hello")]


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def two_stores(backend: str, tmp_path: Path, request: pytest.FixtureRequest, clock: Clock) -> tuple[Any, Any]:
    """Two handles on one store (two workers), on `clock`."""
    if backend == "redis":
        url, namespace = request.getfixturevalue("redis_url"), f"t{uuid.uuid4().hex[:12]}"
        return RedisStore(url, namespace=namespace, clock=clock), RedisStore(url, namespace=namespace, clock=clock)
    if backend == "memory":
        store = MemoryStore(clock=clock)
        return store, store
    return SQLiteStore(tmp_path / "s.db", clock=clock), SQLiteStore(tmp_path / "s.db", clock=clock)


@pytest.mark.parametrize("backend", ["memory", "sqlite", "redis"])
async def test_a_journaled_run_whose_session_lock_lapsed_keeps_it_until_it_ends(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Run A's session lock lapses while its model call hangs, its run still running in the store: run B waits
    for A (a store never hands on a lock held by a run it has running), then goes on after A's turn."""
    clock = Clock()
    first, second = two_stores(backend, tmp_path, request, clock)
    entered, release = asyncio.Event(), asyncio.Event()

    async def hangs(call: ModelCall) -> str:
        entered.set()
        await release.wait()
        return echo_history(call)

    run_a = asyncio.create_task(Agent(FunctionModel(hangs), store=first).run("a", session="s"))
    await entered.wait()
    clock.now += 31  # past the lock's 30 s lease and the run's: A's worker may be dead, or slow
    run_b = asyncio.create_task(Agent(FunctionModel(echo_history), store=second).run("b", session="s"))
    await asyncio.sleep(0.2)
    assert not run_b.done()
    release.set()
    assert (await run_a).output == "a" and (await run_b).output == "a|b"
    assert [m.text for m in await first.session("s").messages()] == ["a", "a", "b", "a|b"]
    for store in {first, second}:
        await store.aclose()


@pytest.mark.parametrize("backend", ["sqlite-no-journal"])
async def test_a_run_whose_session_lock_passed_to_another_run_appends_nothing_and_raises_lease_lost(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Run A's session lock lapses while its model call hangs; run B takes the lock and appends its turn. A then
    completes but its append is refused: LeaseLost names the session, which holds B's turn only."""
    clock = Clock()
    if backend == "redis":
        url, namespace = request.getfixturevalue("redis_url"), f"t{uuid.uuid4().hex[:12]}"
        first: Any = RedisStore(url, namespace=namespace, clock=clock)
        second: Any = RedisStore(url, namespace=namespace, clock=clock)
    else:
        first, second = SQLiteStore(tmp_path / "s.db", clock=clock), SQLiteStore(tmp_path / "s.db", clock=clock)
    journaled = backend != "sqlite-no-journal"
    entered, release = asyncio.Event(), asyncio.Event()

    async def hangs(call: ModelCall) -> str:
        entered.set()
        await release.wait()
        return echo_history(call)

    def on(store: Any, model: Any) -> tuple[Agent[str], Any]:
        if journaled:
            return Agent(model, store=store), "s"
        return Agent(model), store.session("s")

    agent_a, session_a = on(first, FunctionModel(hangs))
    run_a = asyncio.create_task(agent_a.run("a", session=session_a))
    await entered.wait()
    clock.now += 31  # past the lock's 30 s lease: A's lock lapsed (its renewals are 10 s apart)
    agent_b, session_b = on(second, FunctionModel(echo_history))
    assert (await agent_b.run("b", session=session_b)).output == "b"
    release.set()
    with pytest.raises(LeaseLost, match="lost the lock of session 's'") as lost:
        await run_a
    assert lost.value.session == "s"
    assert [m.text for m in await first.session("s").messages()] == ["b", "b"]
    if journaled:
        record = await first.run_record(lost.value.run_id)
        assert record is not None and record.status == "failed"
    for store in (first, second):
        await store.aclose()


class ReplyLost(MemoryStore):
    """A store that takes a session's lock, then never answers (the reply is on its way when the caller gives up)."""

    def __init__(self) -> None:
        super().__init__()
        self.locked = asyncio.Event()

    async def lock_session(self, session_id: str, owner: str, lease: float, *, renew: bool = False) -> bool:
        taken = await super().lock_session(session_id, owner, lease, renew=renew)
        if not renew:
            self.locked.set()
            await asyncio.Event().wait()
        return taken


async def test_a_run_cancelled_while_its_session_lock_is_being_taken_leaves_the_lock_free() -> None:
    """The store took the lock but the caller was cancelled before hearing so: the lock is given back, not held
    until its lease lapses (every later run on the session would wait that long)."""
    store = ReplyLost()
    session = store.session("s")

    async def hold() -> None:
        async with session.lock():
            raise AssertionError("the lock was never heard of")

    holding = asyncio.create_task(hold())
    await store.locked.wait()
    holding.cancel()
    with pytest.raises(asyncio.CancelledError):
        await holding
    assert await MemoryStore.lock_session(store, "s", "another run", lease=30)


class SlowToStopRenewing(MemoryStore):
    """A store whose lock renewal, once cancelled, takes until `stop_renewing` is set to stop."""

    def __init__(self) -> None:
        super().__init__()
        self.renewing, self.stopping, self.stop_renewing = asyncio.Event(), asyncio.Event(), asyncio.Event()

    async def lock_session(self, session_id: str, owner: str, lease: float, *, renew: bool = False) -> bool:
        if not renew:
            return await super().lock_session(session_id, owner, lease)
        self.renewing.set()
        try:
            await asyncio.Event().wait()
        finally:
            self.stopping.set()
            await self.stop_renewing.wait()
        return True


async def test_a_run_cancelled_again_while_its_session_lock_stops_renewing_still_gives_the_lock_back() -> None:
    """A second cancellation (a timeout, then shutdown) landing while the lock waits for its renewal to stop
    still unlocks the session, instead of leaving it held until its lease lapses."""
    store = SlowToStopRenewing()
    session = Session(store, "s", lease=0.03)
    held = asyncio.Event()

    async def hold() -> None:
        async with session.lock():
            held.set()
            await asyncio.Event().wait()

    holding = asyncio.create_task(hold())
    await held.wait()
    await store.renewing.wait()
    holding.cancel()
    await store.stopping.wait()
    holding.cancel()
    store.stop_renewing.set()
    with pytest.raises(asyncio.CancelledError):
        await holding
    assert await MemoryStore.lock_session(store, "s", "another run", lease=30)
