"""Durable runs: what journaling in a `SQLiteStore` adds to a run, and journaled runs per second.

Workloads (fake model, no latency): an answer alone (1 model call); one
tool call then an answer (2 model calls, 1 tool call); the standard
workload (2 model calls, 3 parallel tool calls). Each runs with no store
and with a `SQLiteStore` in a temporary directory; the difference is the
journal's cost. A journaled run of the standard workload waits for 4 store
round trips (its start; the model response with the 3 tool starts; the 3
results; the final response with the run's end), so one round trip (an
`append_journal` of 3 entries, through the store's thread and one SQLite
transaction) is measured alone. A burst of concurrent journaled runs
(50 ms model latency) gives runs per second against the same burst with
no store.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path

from onion import Agent, Message, ModelCall, ModelResponse, Run, ToolRequest, Usage, tool
from onion._journal import Journal
from onion.stores import SQLiteStore

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


def make_agent(calls: int, store: SQLiteStore | None, latency: float = 0.0) -> Agent:
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
    t = await interleaved(cases, rounds=scale.rounds, target_s=scale.target_s * 5)
    t["model entry"] = await model_entry_cost()
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
            "journal per run (start and end), answer only",
            journal[0] * 1e6,
            "µs",
            t["none 0"] * 1e6,
            "run, no store",
        ),
        Row(SECTION, "journal per model call (entry held for the next write)", t["model entry"] * 1e6, "µs"),
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
