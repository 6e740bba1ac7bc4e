"""Sessions: a conversation kept in a store, continued by each run, serialised across processes."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from onion import Agent, Message, ModelCall
from onion.stores import MemoryStore, SQLiteStore
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


async def test_a_streamed_run_continues_and_extends_its_session() -> None:
    """agent.stream(..., session=) sees the session's history and appends the run when it finishes."""
    from onion import RunFinished

    store = MemoryStore()
    agent = Agent(FunctionModel(echo_history), store=store)
    await agent.run("one", session="s")
    events = [event async for event in agent.stream("two", session="s")]
    assert isinstance(events[-1], RunFinished) and events[-1].result.output == "one|two"
    assert [m.text for m in await store.session("s").messages()] == ["one", "one", "two", "one|two"]
