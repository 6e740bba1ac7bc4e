"""Durable runs: what journaling in a `SQLiteStore` adds to a run, and journaled runs per second.

Workloads (fake model, no latency): an answer alone (1 model call); one
tool call then an answer (2 model calls, 1 tool call); the standard
workload (2 model calls, 3 parallel tool calls). Each runs with no store
and with a `SQLiteStore` in a temporary directory; the difference is the
journal's cost. The standard workload on a `MemoryStore` is the journal's
own Python, without a disk. A journaled run of the standard workload makes 4 durable
writes (its start; the model response with the 3 tool starts; the 3
results; the final response with the run's end), so one write (an
`append_journal` of 3 entries) is measured alone, and so are the 4
commits of a run's writes on a bare connection (the same statements and
entries, no journal, no loop): the floor of the first row on this disk.
A burst of concurrent journaled runs (50 ms model latency) gives runs
per second against the same burst with no store. The journal's chain (a
SHA-256 of each entry; with a `state_key`, an HMAC per write) is measured
alone on the same run's entries, as its 4 writes seal them.
"""

from __future__ import annotations

import asyncio
import re
import sqlite3
import tempfile
import time
import uuid
from pathlib import Path

from onion import Agent, Message, ModelCall, ModelResponse, Run, ToolRequest, Usage, tool
from onion._durable.chain import Chain
from onion._durable.journal import Journal
from onion.stores import MemoryStore, SQLiteStore, Store
from onion.stores._sqlite import _RUN_COLUMNS, _append, _connect, _hold

from .table import Row, render
from .timing import Batch, Scale, interleaved
from .workload import FINAL, QUESTION, add, onion_agent

SECTION = "durable"
BAR = 2.0
LATENCY = 0.05


class CallsModel:
    """Answers the question with `calls` parallel `add` calls (none: the answer at once), then `FINAL`."""

    name = "calls"

    def __init__(self, calls: int, latency: float = 0.0) -> None:
        self.calls = calls
        self.latency = latency

    async def request(self, call: ModelCall) -> ModelResponse:
        if self.latency:
            await asyncio.sleep(self.latency)
        if self.calls and call.messages[-1].role == "user":
            requests = [ToolRequest(id=f"call_{i}", name="add", args={"a": i, "b": 1}) for i in range(self.calls)]
            return ModelResponse(Message.assistant("", requests), Usage(requests=1))
        return ModelResponse(Message.assistant(FINAL), Usage(requests=1))


def make_agent(calls: int, store: Store | None, latency: float = 0.0) -> Agent:
    if calls == 3 and not latency:
        agent = onion_agent(0)
        agent.store = store
        return agent
    return Agent(CallsModel(calls, latency), tools=[tool(add)], checked=False, store=store)


def batch_of(agent: Agent) -> Batch:
    async def batch(n: int) -> float:
        start = time.perf_counter()
        for _ in range(n):
            await agent.run(QUESTION)
        return time.perf_counter() - start

    return batch


async def model_entry_cost(rounds: int = 2000) -> float:
    """Seconds to hold back one model response's journal entry (encoding only: it is written with the next write)."""
    agent = onion_agent(0)
    result = await agent.run(QUESTION)
    journal = Journal(None, "bench", lease=30.0)  # type: ignore[arg-type]
    run = Run(agent, QUESTION, list(result.messages), {})
    response = ModelResponse(result.messages[-1], Usage(requests=1))
    start = time.perf_counter()
    for _ in range(rounds):
        journal.mark(run.messages[:-3])
        journal.model(run, response)
        journal._held.clear()
    return (time.perf_counter() - start) / rounds


async def round_trip(store: SQLiteStore, rounds: int = 500) -> float:
    """Seconds for one `append_journal` of 3 tool-start entries, awaited alone."""
    await store.start_run("bench-trip", agent="bench", owner="bench", lease=30.0, entries=["{}"])
    entries = ['{"k":"tool","id":"call_0","name":"add"}'] * 3
    for _ in range(50):
        await store.append_journal("bench-trip", "bench", entries, 30.0)
    start = time.perf_counter()
    for _ in range(rounds):
        await store.append_journal("bench-trip", "bench", entries, 30.0)
    return (time.perf_counter() - start) / rounds


async def run_entries(where: Path) -> list[list[str]]:
    """The entries of a journaled run of the standard workload, grouped as its 4 writes wrote them."""
    async with SQLiteStore(where / "entries.db") as store:
        result = await make_agent(3, store).run(QUESTION)
        entries = await store.journal(result.run_id)
    return [entries[:1], entries[1:5], entries[5:8], entries[8:]]


def chain_cost(writes: list[list[str]], key: bytes | None, rounds: int = 2000) -> float:
    """Seconds to chain (with `key`, and sign) one run's entries, `writes` as its writes grouped them: what the chain
    adds to a journaled run, in a hot loop."""
    own = [
        [re.sub(r'^\{"p":"[0-9a-f]{64}","n":\d+,("m":"[0-9a-f]{64}",)?', "{", entry) for entry in write]
        for write in writes
    ]
    start = time.perf_counter()
    for _ in range(rounds):
        chain = Chain("run-0123456789abcdef0123456789abcdef", key)
        for write in own:
            chain.seal(write)
    return (time.perf_counter() - start) / rounds


def bare_commits(path: Path, writes: list[list[str]]) -> Batch:
    """The 4 transactions of a journaled run's writes (the store's own statements, `writes`' entries) on a
    connection of the store's settings, checkpointed between runs as the store's thread would: SQLite alone."""
    connection = _connect(str(path), 10.0)
    db = connection.cursor()
    start_entries, *appends, end_entries = writes

    def one(db: sqlite3.Cursor) -> None:
        run_id, now = f"run-{uuid.uuid4().hex}", time.time()
        db.execute("BEGIN IMMEDIATE")
        db.execute(
            f"INSERT INTO onion_runs ({_RUN_COLUMNS}) VALUES (?, ?, 'running', ?, ?, ?, ?, NULL, NULL, 0, NULL)",
            (run_id, "agent", now, now, run_id, now + 30),
        )
        _append(db, run_id, start_entries)
        db.execute("COMMIT")
        for entries in appends:
            db.execute("BEGIN IMMEDIATE")
            _hold(db, run_id, run_id, "lease_expires = ?, updated = ?", (now + 30, now))
            _append(db, run_id, entries)
            db.execute("COMMIT")
        db.execute("BEGIN IMMEDIATE")
        _hold(
            db,
            run_id,
            run_id,
            "status = ?, state = ?, pending = ?, owner = NULL, lease_expires = NULL, updated = ?",
            ("completed", None, 0, now),
        )
        _append(db, run_id, end_entries)
        db.execute("COMMIT")

    async def batch(n: int) -> float:
        elapsed = 0.0
        for i in range(n):
            if i % 25 == 0:  # every 100 commits, as the store's checkpoint thread does (not timed: not on the loop)
                db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
            start = time.perf_counter()
            one(db)
            elapsed += time.perf_counter() - start
        return elapsed

    return batch


async def burst(runs: int, store: SQLiteStore | None) -> float:
    """Wall seconds for `runs` concurrent runs of the standard workload (50 ms per model call)."""
    agent = make_agent(3, store, LATENCY)
    await asyncio.gather(*(agent.run(QUESTION) for _ in range(10)))
    start = time.perf_counter()
    results = await asyncio.gather(*(agent.run(QUESTION) for _ in range(runs)))
    wall = time.perf_counter() - start
    if {r.output for r in results} != {FINAL}:
        raise AssertionError("wrong answers in the durable burst")
    return wall


async def measure(scale: Scale, where: Path) -> dict[str, float]:
    stores = {calls: SQLiteStore(where / f"bench-{calls}.db") for calls in (0, 1, 3)}
    cases: dict[str, Batch] = {}
    for calls, store in stores.items():
        cases[f"none {calls}"] = batch_of(make_agent(calls, None))
        cases[f"sqlite {calls}"] = batch_of(make_agent(calls, store))
    cases["memory 3"] = batch_of(make_agent(3, MemoryStore()))
    writes = await run_entries(where)
    cases["bare commits"] = bare_commits(where / "bare.db", writes)
    t = await interleaved(cases, rounds=scale.rounds, target_s=scale.target_s * 5)
    t["model entry"] = await model_entry_cost()
    t["chain"], t["chain key"] = chain_cost(writes, None), chain_cost(writes, b"a state_key of 32 bytes, secret.")
    async with SQLiteStore(where / "trip.db") as store:
        t["round trip"] = await round_trip(store)
    runs = 100 if scale.concurrent_runs < 1000 else 1000
    async with SQLiteStore(where / "burst.db") as store:
        t["burst sqlite"] = await burst(runs, store)
    t["burst none"] = await burst(runs, None)
    t["burst runs"] = runs
    for store in stores.values():
        await store.aclose()
    return t


def rows(scale: Scale) -> list[Row]:
    with tempfile.TemporaryDirectory() as where:
        t = asyncio.run(measure(scale, Path(where)))
    journal = {calls: t[f"sqlite {calls}"] - t[f"none {calls}"] for calls in (0, 1, 3)}
    runs = int(t["burst runs"])
    return [
        Row(
            SECTION,
            "run, 2 model + 3 tool calls, SQLiteStore",
            t["sqlite 3"] * 1e6,
            "µs",
            t["none 3"] * 1e6,
            "no store",
            BAR,
            aim=5.0,
        ),
        Row(
            SECTION,
            "the same run on MemoryStore (the journal's own Python)",
            t["memory 3"] * 1e6,
            "µs",
            t["none 3"] * 1e6,
            "no store",
        ),
        Row(
            SECTION,
            "the same run's 4 SQLite commits alone (bare connection)",
            t["bare commits"] * 1e6,
            "µs",
            t["none 3"] * 1e6,
            "run, no store",
        ),
        Row(
            SECTION,
            "journal per run (start and end), answer only",
            journal[0] * 1e6,
            "µs",
            t["none 0"] * 1e6,
            "run, no store",
        ),
        Row(SECTION, "journal per model call (entry held for the next write)", t["model entry"] * 1e6, "µs"),
        Row(
            SECTION,
            "journal's chain per run (a SHA-256 per entry, 10 entries)",
            t["chain"] * 1e6,
            "µs",
            t["sqlite 3"] * 1e6,
            "run, SQLiteStore",
        ),
        Row(
            SECTION,
            "the chain with a state_key (an HMAC per write, 4 writes)",
            t["chain key"] * 1e6,
            "µs",
            t["sqlite 3"] * 1e6,
            "run, SQLiteStore",
        ),
        Row(SECTION, "SQLiteStore round trip (append_journal, 3 entries)", t["round trip"] * 1e6, "µs"),
        Row(SECTION, "journal per tool call (+1 model call), 1 call per batch", (journal[1] - journal[0]) * 1e6, "µs"),
        Row(SECTION, "journal per tool call, 3 parallel calls per batch", (journal[3] - journal[0]) / 3 * 1e6, "µs"),
        Row(
            SECTION,
            f"{runs:,} concurrent journaled runs (50 ms model), runs/s",
            runs / t["burst sqlite"],
            "runs/s",
            runs / t["burst none"],
            "no store",
            aim=-0.8,
        ),
    ]


if __name__ == "__main__":
    from .timing import QUICK

    print(render(rows(QUICK)))
