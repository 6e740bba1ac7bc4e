"""The journal: with a store, each step of a run is recorded, and a resumed run repeats none of them."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from onion import Agent, ToolCall, tool
from onion._durable.journal import Journal
from onion.errors import LeaseLost, OnionError, RunBusy, RunNotFound
from onion.stores import MemoryStore, RedisStore, SQLiteStore
from onion.testing import FunctionModel, ScriptedModel, call


class Crash(BaseException):
    """Stands in for the worker dying: nothing in the run catches it."""


class CountingStore(MemoryStore):
    """A MemoryStore that counts its round trips by method."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.trips: dict[str, int] = {}

    def __getattribute__(self, name: str) -> Any:
        value = super().__getattribute__(name)
        if name in ("start_run", "append_journal", "release_run", "renew_run", "claim_run", "journal"):
            trips = super().__getattribute__("trips")
            trips[name] = trips.get(name, 0) + 1
        return value


def crash_after(name: str) -> Any:
    """A tool layer that kills the run right after `name` ran, before its result is recorded."""

    async def crash(call_: ToolCall, call_next: Any) -> Any:
        result = await call_next(call_)
        if call_.name == name:
            raise Crash
        return result

    return crash


def entries(store: MemoryStore, run_id: str) -> list[dict[str, Any]]:
    return [json.loads(text) for text in store._journals[run_id]]


async def test_a_run_with_a_store_journals_each_step_under_its_run_id() -> None:
    """Start, each model response, each tool call started and finished: all under result.run_id."""
    store = MemoryStore()

    @tool
    def add(a: int, b: int) -> int:
        return a + b

    agent = Agent(ScriptedModel([[call("add", a=1, b=2)], "3"]), tools=[add], store=store)
    result = await agent.run("1+2?")
    kinds = [(e["k"], e.get("id"), e.get("content")) for e in entries(store, result.run_id)]
    tool_id = result.messages[1].tool_calls[0].id
    assert kinds == [
        ("start", None, None),
        ("model", None, None),
        ("tool", tool_id, None),
        ("result", tool_id, "3"),
        ("model", None, None),
        ("end", None, None),
    ]
    record = await store.run_record(result.run_id)
    assert record is not None and record.status == "completed" and record.owner is None


async def test_journaling_costs_one_store_round_trip_per_model_call_and_per_tool_call() -> None:
    """2 model calls and 1 tool call: a write at the start, one per tool start and finish, one at the end."""
    store = CountingStore()

    @tool
    def echo(text: str) -> str:
        return text

    agent = Agent(ScriptedModel([[call("echo", text="x")], "done"]), tools=[echo], store=store)
    await agent.run("go")
    assert store.trips == {"start_run": 1, "append_journal": 2, "release_run": 1}


async def test_a_run_state_that_json_cannot_hold_is_refused_naming_the_key() -> None:
    """A journaled run keeps run.state in the store: a non-JSON value is a clear error."""
    agent = Agent(ScriptedModel(["x"]), store=MemoryStore())
    with pytest.raises(OnionError, match=r"run.state\['handle'\]"):
        await agent.run("go", state={"handle": object()})


async def test_a_run_state_that_contains_itself_is_refused_naming_the_key() -> None:
    """A value holding itself cannot be JSON either: the same clear error, naming the key."""
    loop: dict[str, object] = {}
    loop["again"] = loop
    agent = Agent(ScriptedModel(["x"]), store=MemoryStore())
    with pytest.raises(OnionError, match=r"run.state\['loop'\] \(dict\) is not JSON-serialisable"):
        await agent.run("go", state={"ok": 1, "loop": loop})


async def test_a_failed_run_resumes_without_repeating_finished_calls_or_recorded_responses() -> None:
    """The worker dies in the second call of a batch: the first is not run again, the second is in doubt."""
    store = MemoryStore()
    runs: list[str] = []

    @tool
    def first() -> str:
        runs.append("first")
        return "one"

    @tool
    def second() -> str:
        runs.append("second")
        return "two"

    model = ScriptedModel([[call("first"), call("second")]])
    worker = Agent(model, tools=[first, second], store=store, parallel_tools=False).use(crash_after("second"))
    with pytest.raises(Crash):
        await worker.run("go")
    (record,) = await store.runs()
    assert record.status == "failed"

    later = ScriptedModel(["all done"])
    resumed = Agent(later, tools=[first, second], store=store)
    result = await resumed.recover(record.run_id)
    assert result.output == "all done" and runs == ["first", "second"]
    assert len(later.requests) == 1
    sent = later.requests[0].messages
    answered, interrupted = [m for m in sent if m.role == "tool"]
    assert answered.text == "one"
    assert interrupted.is_error and "interrupted" in interrupted.text and "may or may not have run" in interrupted.text
    assert (await store.run_record(record.run_id)).status == "completed"  # type: ignore[union-attr]


async def test_an_idempotent_call_in_doubt_runs_again() -> None:
    """@tool(idempotent=True) started without a recorded result is run again on resume."""
    store = MemoryStore()
    calls: list[int] = []

    @tool(idempotent=True)
    def fetch(n: int) -> str:
        calls.append(n)
        return f"got {n}"

    worker = Agent(ScriptedModel([[call("fetch", n=7)]]), tools=[fetch], store=store).use(crash_after("fetch"))
    with pytest.raises(Crash):
        await worker.run("go")
    (record,) = await store.runs()
    later = ScriptedModel(["ok"])
    result = await Agent(later, tools=[fetch], store=store).recover(record.run_id)
    assert calls == [7, 7] and result.output == "ok"
    assert [m.text for m in later.requests[0].messages if m.role == "tool"] == ["got 7"]


async def test_calls_that_never_started_run_through_their_tool_stack_on_resume() -> None:
    """A call a worker never reached runs on resume, through the layers of its tool chain."""
    store = MemoryStore()
    seen: list[str] = []

    @tool
    def boom() -> str:
        return "boom"

    @tool
    def later_call() -> str:
        return "ran"

    async def watch(call_: ToolCall, call_next: Any) -> Any:
        seen.append(call_.name)
        return await call_next(call_)

    model = ScriptedModel([[call("boom"), call("later_call")]])
    with pytest.raises(Crash):
        await (
            Agent(model, tools=[boom, later_call], store=store, parallel_tools=False).use(crash_after("boom")).run("go")
        )
    (record,) = await store.runs()
    agent = Agent(ScriptedModel(["fine"]), tools=[boom, later_call], store=store).use(watch)
    result = await agent.recover(record.run_id)
    assert result.output == "fine" and seen == ["later_call"]
    assert [m.text for m in result.messages if m.role == "tool"][1] == "ran"


async def test_a_run_whose_final_answer_was_recorded_completes_without_a_model_call() -> None:
    """A worker that died after the final answer but before marking the run: resume returns it."""
    store = MemoryStore()
    worker = Agent(ScriptedModel(["the answer"]), store=store)
    result = await worker.run("q")
    store._runs[result.run_id].status = "failed"  # the release was lost
    nothing = ScriptedModel([])
    again = await Agent(nothing, store=store).recover(result.run_id)
    assert again.output == "the answer" and nothing.requests == []


async def test_resuming_a_run_another_worker_holds_or_that_ended_raises_run_busy() -> None:
    """A live lease, or a completed run: RunBusy saying which; an unknown id: RunNotFound."""
    clock = [0.0]
    store = MemoryStore(clock=lambda: clock[0])
    agent = Agent(ScriptedModel(["a"]), store=store)
    done = await agent.run("q")
    with pytest.raises(RunBusy, match="completed"):
        await agent.recover(done.run_id)
    await store.start_run("held", agent="agent", owner="other", lease=30, entries=[])
    with pytest.raises(RunBusy, match="held by another worker"):
        await agent.recover("held")
    with pytest.raises(RunNotFound, match="nope"):
        await agent.recover("nope")


async def test_resume_refuses_an_agent_without_the_runs_tools() -> None:
    """The unfinished batch calls a tool this agent lacks: a clear error naming it, the run left resumable."""
    store = MemoryStore()

    @tool
    def gone() -> str:
        return "gone"

    with pytest.raises(Crash):
        await Agent(ScriptedModel([[call("gone")]]), tools=[gone], store=store).use(crash_after("gone")).run("go")
    (record,) = await store.runs()
    with pytest.raises(OnionError, match=r"\['gone'\]"):
        await Agent(ScriptedModel([]), store=store).recover(record.run_id)
    assert (await store.run_record(record.run_id)).status == "failed"  # type: ignore[union-attr]


async def test_the_calls_of_one_parallel_batch_share_their_writes() -> None:
    """Three parallel calls: their starts go in one write (with the model response), their results in another."""
    store = CountingStore()

    @tool
    async def add(a: int, b: int) -> int:
        return a + b

    model = ScriptedModel([[call("add", a=1, b=2), call("add", a=3, b=4), call("add", a=5, b=6)], "done"])
    result = await Agent(model, tools=[add], store=store).run("go")
    assert store.trips == {"start_run": 1, "append_journal": 2, "release_run": 1}
    kinds = [e["k"] for e in entries(store, result.run_id)]
    assert kinds == ["start", "model", "tool", "tool", "tool", "result", "result", "result", "model", "end"]


async def test_a_running_worker_renews_its_lease_so_no_one_else_can_claim_the_run() -> None:
    """While a tool runs longer than the lease, the worker's renewals keep the run; a second claim is RunBusy."""
    store = MemoryStore()
    started, release = asyncio.Event(), asyncio.Event()

    @tool
    async def slow() -> str:
        started.set()
        await release.wait()
        return "slow done"

    agent = Agent(ScriptedModel([[call("slow")], "ok"]), tools=[slow], store=store, lease=0.06)
    running = asyncio.create_task(agent.run("go"))
    await started.wait()
    (record,) = await store.runs()
    first = record.lease_expires
    for _ in range(1000):
        now = await store.run_record(record.run_id)
        if now is not None and now.lease_expires != first:
            break
        await asyncio.sleep(0.005)
    else:
        raise AssertionError("the lease was never renewed")
    with pytest.raises(RunBusy, match="held by another worker"):
        await Agent(ScriptedModel([]), tools=[slow], store=store).recover(record.run_id)
    release.set()
    assert (await running).output == "ok"


async def test_concurrent_runs_longer_than_many_leases_never_let_a_lease_lapse() -> None:
    """Three runs on one loop (one renewal timer between them) each outlive their lease many times over: every
    run's lease stays ahead of the store's clock throughout, and once they end nothing is renewed any more."""
    store = MemoryStore()
    release = asyncio.Event()

    @tool
    async def slow() -> str:
        await release.wait()
        return "slow done"

    def answer(model_call: Any) -> Any:
        return [call("slow")] if model_call.messages[-1].role == "user" else "ok"

    agent = Agent(FunctionModel(answer), tools=[slow], store=store, lease=0.06)
    running = [asyncio.create_task(agent.run("go")) for _ in range(3)]
    while len(await store.runs()) < 3:
        await asyncio.sleep(0.005)
    ends = time.time() + 0.4
    while time.time() < ends:
        for record in await store.runs():
            assert record.lease_expires is not None and record.lease_expires > time.time(), record
        await asyncio.sleep(0.005)
    release.set()
    assert [(await run).output for run in running] == ["ok"] * 3
    renewals = {r.run_id: r.updated for r in await store.runs()}
    await asyncio.sleep(0.1)
    assert {r.run_id: r.updated for r in await store.runs()} == renewals
    assert all(r.status == "completed" and r.lease_expires is None for r in await store.runs())


async def test_a_worker_whose_lease_was_taken_over_stops_at_its_next_write() -> None:
    """Another worker takes over an expired run and finishes it; the old one gets RunBusy and writes nothing."""
    clock = [1000.0]
    store = MemoryStore(clock=lambda: clock[0])
    started, release = asyncio.Event(), asyncio.Event()

    @tool
    async def slow() -> str:
        started.set()
        await release.wait()
        return "late"

    old = asyncio.create_task(Agent(ScriptedModel([[call("slow")]]), tools=[slow], store=store, lease=10).run("go"))
    await started.wait()
    (record,) = await store.runs()
    clock[0] += 11
    taken = await Agent(ScriptedModel(["taken over"]), tools=[slow], store=store).recover(record.run_id)
    assert taken.output == "taken over" and "slow was interrupted" in taken.messages[-2].text
    written = list(store._journals[record.run_id])
    release.set()
    with pytest.raises(RunBusy, match="lost run"):
        await old
    assert store._journals[record.run_id] == written
    assert (await store.run_record(record.run_id)).status == "completed"  # type: ignore[union-attr]


async def test_a_call_cancelled_while_its_batch_is_written_leaves_the_write_to_the_others() -> None:
    """Two calls of a batch share a write; the one cancelled while it waits neither stops the write nor fails the
    other, and both entries land in order."""
    entered, gate = asyncio.Event(), asyncio.Event()

    class GatedStore(MemoryStore):
        async def append_journal(self, run_id: str, owner: str, entries: Any, lease: float) -> None:
            entered.set()
            await gate.wait()
            await super().append_journal(run_id, owner, entries, lease)

    store = GatedStore()
    journal = Journal(store, "r", lease=30)
    await store.start_run("r", agent="a", owner=journal.owner, lease=30, entries=["{}"])
    cancelled = asyncio.ensure_future(journal._write('{"k":"tool","id":"a"}'))
    kept = asyncio.ensure_future(journal._write('{"k":"tool","id":"b"}'))
    await entered.wait()
    cancelled.cancel()
    gate.set()
    await kept
    assert cancelled.cancelled()
    assert [e.get("id") for e in entries(store, "r")] == [None, "a", "b"]


class Hang:
    """A tool `hang` that waits for ever: `started` is set once it runs, `cancelled` once it is cancelled."""

    def __init__(self) -> None:
        self.started, self.cancelled = asyncio.Event(), asyncio.Event()

        @tool
        async def hang() -> str:
            self.started.set()
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                self.cancelled.set()
                raise
            return "never"

        self.tool = hang


@pytest.mark.parametrize("backend", ["sqlite", "redis"])
async def test_a_worker_that_finds_its_lease_taken_over_cancels_its_tools_and_raises_lease_lost(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Worker A hangs in a tool; worker B (whose clock is past A's lease) takes the run over and finishes it. A's
    next renewal finds the run lost: A's tool is cancelled, A asks its model nothing more and raises LeaseLost;
    the journal holds only B's work after the takeover."""
    ahead = lambda: time.time() + 3600  # noqa: E731
    if backend == "redis":
        url, namespace = request.getfixturevalue("redis_url"), f"t{uuid.uuid4().hex[:12]}"
        store_a: Any = RedisStore(url, namespace=namespace)
        store_b: Any = RedisStore(url, namespace=namespace, clock=ahead)
    else:
        store_a, store_b = SQLiteStore(tmp_path / "r.db"), SQLiteStore(tmp_path / "r.db", clock=ahead)
    hang = Hang()
    model_a = ScriptedModel([[call("hang")], "A's answer"])
    running = asyncio.create_task(Agent(model_a, tools=[hang.tool], store=store_a, lease=0.3).run("go"))
    await hang.started.wait()
    (record,) = await store_a.runs()
    taken = await Agent(ScriptedModel(["B's answer"]), tools=[hang.tool], store=store_b).recover(record.run_id)
    assert taken.output == "B's answer" and "hang was interrupted" in taken.messages[-2].text
    written = await store_b.journal(record.run_id)
    with pytest.raises(LeaseLost, match="lost run") as lost:
        await asyncio.wait_for(running, 10)
    assert lost.value.run_id == record.run_id and lost.value.session is None
    assert hang.cancelled.is_set() and len(model_a.requests) == 1
    assert await store_a.journal(record.run_id) == written
    assert [json.loads(e)["k"] for e in written] == ["start", "model", "tool", "result", "model", "end"]
    assert (await store_a.run_record(record.run_id)).status == "completed"  # type: ignore[union-attr]
    for store in (store_a, store_b):
        await store.aclose()


@pytest.mark.parametrize("backend", ["memory", "sqlite", "redis"])
async def test_a_run_deleted_while_it_runs_is_stopped_at_its_next_renewal(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest, caplog: pytest.LogCaptureFixture
) -> None:
    """The run is deleted from the store while a tool hangs: the next renewal stops it (the tool cancelled, the
    model asked nothing more) with RunNotFound saying it was deleted. (It warned at every renewal, for ever,
    while the tool went on.)"""
    if backend == "redis":
        store: Any = RedisStore(request.getfixturevalue("redis_url"), namespace=f"t{uuid.uuid4().hex[:12]}")
    else:
        store = MemoryStore() if backend == "memory" else SQLiteStore(tmp_path / "r.db")
    hang = Hang()
    model = ScriptedModel([[call("hang")], "answer"])
    running = asyncio.create_task(Agent(model, tools=[hang.tool], store=store, lease=0.3).run("go"))
    await hang.started.wait()
    (record,) = await store.runs()
    await store.delete_run(record.run_id)
    with pytest.raises(RunNotFound, match="deleted from the store while it ran"):
        await asyncio.wait_for(running, 10)
    assert hang.cancelled.is_set() and len(model.requests) == 1
    assert "renewing its lease failed" not in caplog.text
    await store.aclose()


async def test_a_store_subclass_whose_writes_need_their_own_task_journals_every_step(tmp_path: Path) -> None:
    """A subclass overriding append_journal and release_run with `asyncio.timeout` inside (which needs a task):
    the journal gives each of its writes a task instead of starting them in a callback or the caller's task."""

    class TimedStore(SQLiteStore):
        async def append_journal(self, run_id: str, owner: str, entries: Any, lease: float) -> None:
            async with asyncio.timeout(5):
                await super().append_journal(run_id, owner, entries, lease)

        async def release_run(self, *args: Any, **kwargs: Any) -> None:
            async with asyncio.timeout(5):
                await super().release_run(*args, **kwargs)

    @tool
    def add(a: int, b: int) -> int:
        return a + b

    store = TimedStore(tmp_path / "s.db")
    agent = Agent(ScriptedModel([[call("add", a=1, b=2)], "3"]), tools=[add], store=store)
    result = await agent.run("1+2?")
    assert result.output == "3"
    assert [json.loads(entry)["k"] for entry in await store.journal(result.run_id)] == [
        "start",
        "model",
        "tool",
        "result",
        "model",
        "end",
    ]
    record = await store.run_record(result.run_id)
    assert record is not None and record.status == "completed"
    await store.aclose()


async def test_a_recovery_cancelled_while_it_waits_for_its_sessions_lock_leaves_the_run_failed_and_unrenewed() -> None:
    """Claimed, then cancelled before it went on (another holder keeps the session): the run is failed again,
    recoverable, and this worker stops renewing it."""
    store = MemoryStore()

    @tool
    def add(a: int, b: int) -> int:
        return a + b

    worker = Agent(ScriptedModel([[call("add", a=1, b=2)]]), tools=[add], store=store).use(crash_after("add"))
    with pytest.raises(Crash):
        await worker.run("1+2?", session="s")
    (record,) = await store.runs()
    assert record.status == "failed"
    assert await store.lock_session("s", "someone else", 60)  # the session is busy
    renewed: list[str] = []
    renew_run = store.renew_run

    async def counted(run_id: str, owner: str, lease: float) -> None:
        renewed.append(run_id)
        await renew_run(run_id, owner, lease)

    store.renew_run = counted  # type: ignore[method-assign]
    recovering = asyncio.create_task(
        Agent(ScriptedModel(["3"]), tools=[add], store=store, lease=0.06).recover(record.run_id)
    )
    while (await store.run_record(record.run_id)).status != "running":  # type: ignore[union-attr]
        await asyncio.sleep(0)
    await asyncio.sleep(0.1)  # waiting for the session's lock, renewed meanwhile
    recovering.cancel()
    with pytest.raises(asyncio.CancelledError):
        await recovering
    after = await store.run_record(record.run_id)
    assert after is not None and after.status == "failed" and after.owner is None
    renewals = len(renewed)
    await asyncio.sleep(0.1)  # several of its lease's renewal ticks
    assert len(renewed) == renewals
