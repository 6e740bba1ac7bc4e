"""Redis stores: round trips each layer makes per call, and concurrent runs on Redis against memory stores.

Round trips are counted at the client: every packed write of one command (or
one pipeline) to the socket is one, after a warm-up that opened the
connection and loaded the scripts. Each is compared with the aim of issue 11
(rate_limit 1 before + 1 after a model call, cache 1 on a miss + 1 to store,
the journal 1 per model call and 1 per tool batch) or issue 36 (a shared
budget 1 per model call, none more than rate_limit's when it sits outside it). The throughput row runs
1,000 concurrent runs (100 with --quick) of the standard workload (50 ms per
model call) through `rate_limit` + `cache` + the journal, all on one
`RedisStore`, against the same on `MemoryStore`s. It needs a `redis-server`
on PATH (started on a free port, stopped after); without one the section is
skipped. The follow row: a server process following a run another one streams, the milliseconds from an
event kept to the follower reading it, Redis telling the follower (`wait_events`) against reading the stream
every `POLL` seconds (as every follower did before, and as SQLite's still do).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from typing import Any

from middleware import budget, cache, concurrency, rate_limit
from onion import Agent, ModelCall, ModelResponse, Usage
from onion.stores import MemoryStore, RedisStore
from onion.stores._events import POLL, wait_for_events
from onion.testing import RedisServer

from .durable import LATENCY, CallsModel
from .table import Row, render
from .timing import Scale
from .workload import FINAL, QUESTION, add

SECTION = "redis"
ROUNDS = 20


class Trips:
    """Counts round trips: a `redis.asyncio` connection class whose every socket write is one."""

    count = 0

    @classmethod
    def connection_class(cls) -> type[Any]:
        from redis.asyncio import Connection

        class Counting(Connection):
            async def send_packed_command(self, command: Any, check_health: bool = True) -> None:
                cls.count += 1
                await super().send_packed_command(command, check_health)

        return Counting


def counted_store(url: str) -> RedisStore:
    from redis.asyncio import BlockingConnectionPool, Redis

    pool = BlockingConnectionPool.from_url(url, decode_responses=True, connection_class=Trips.connection_class())
    return RedisStore(url, namespace=f"bench-{uuid.uuid4().hex[:8]}", client=Redis(connection_pool=pool))


class ChargedModel(CallsModel):
    """`CallsModel` whose every response used 1,100 tokens, so a `budget` charges it."""

    async def request(self, call: ModelCall) -> ModelResponse:
        response = await super().request(call)
        return ModelResponse(response.message, Usage(1000, 100, 1), model=self.name)


async def trips_per(agent: Agent, prompt: Callable[[int], str], rounds: int = ROUNDS) -> float:
    """Round trips per run of `agent` on `prompt(i)`, after one warm-up run."""
    await agent.run(prompt(-1))
    before = Trips.count
    for i in range(rounds):
        await agent.run(prompt(i))
    return (Trips.count - before) / rounds


def fresh(i: int) -> str:
    return f"question {i}"


def same(i: int) -> str:
    return QUESTION


async def count(url: str) -> dict[str, float]:
    store = counted_store(url)
    t: dict[str, float] = {}
    limited = Agent(CallsModel(0)).use(rate_limit(rpm=1_000_000, tpm=1_000_000_000, store=store))
    t["rate_limit"] = await trips_per(limited, fresh)
    cached = Agent(CallsModel(0)).use(cache(store=store))
    t["cache miss"] = await trips_per(cached, fresh)
    t["cache hit"] = await trips_per(cached, same)

    def daily() -> budget:
        return budget(max_cost=1e9, per="tenant", window="day", prices={"calls": (1.0, 1.0)}, store=store)

    t["budget"] = await trips_per(Agent(ChargedModel(0)).use(daily()), fresh)
    both = rate_limit(rpm=1_000_000, tpm=1_000_000_000, store=store)
    t["budget + rate_limit"] = await trips_per(Agent(ChargedModel(0)).use(daily(), both), fresh)
    capped = Agent(CallsModel(0)).use(concurrency(None, models=8, store=store))
    t["concurrency"] = await trips_per(capped, fresh)
    for calls in (0, 1, 3):
        journaled = Agent(CallsModel(calls), tools=[add], store=store)
        t[f"journal {calls}"] = await trips_per(journaled, same)
    await store.aclose()
    return t


def stack(store: Any) -> Agent:
    """The standard workload (50 ms model) through rate_limit + cache, journaled in `store`."""
    agent = Agent(CallsModel(3, LATENCY), tools=[add], checked=False, store=store)
    return agent.use(rate_limit(rpm=10_000_000, tpm=10_000_000_000, store=store), cache(store=store))


async def burst(agent: Agent, runs: int) -> float:
    """Wall seconds for `runs` concurrent runs, each with its own question (every cache lookup misses)."""
    tag = uuid.uuid4().hex[:8]
    await asyncio.gather(*(agent.run(f"{QUESTION} warm {tag} {i}") for i in range(10)))
    start = time.perf_counter()
    results = await asyncio.gather(*(agent.run(f"{QUESTION} {tag} {i}") for i in range(runs)))
    wall = time.perf_counter() - start
    if {result.output for result in results} != {FINAL}:
        raise AssertionError("wrong answers in the Redis burst")
    return wall


async def throughput(url: str, runs: int, rounds: int) -> dict[str, float]:
    """Median wall seconds of a burst on Redis and on memory stores, interleaved."""
    walls: dict[str, list[float]] = {"redis": [], "memory": []}
    async with RedisStore(url, namespace=f"bench-{uuid.uuid4().hex[:8]}") as redis:
        on_redis, on_memory = stack(redis), stack(MemoryStore(max_entries=10 * runs))
        for _ in range(rounds):
            walls["redis"].append(await burst(on_redis, runs))
            walls["memory"].append(await burst(on_memory, runs))
    return {name: sorted(values)[len(values) // 2] for name, values in walls.items()}


class Polled:
    """The follower's store without `wait_events`: read again every `POLL` seconds."""

    def __init__(self, store: RedisStore) -> None:
        self.read_events = store.read_events


async def read_next(follower: Any, run_id: str, after: int) -> float:
    """Wait for the run's event after `after` as a server's follower does; the moment it was read."""
    while not (await follower.read_events(run_id, after))[0]:
        await wait_for_events(follower, run_id, after, 5.0)
    return time.perf_counter()


async def follow_delays(url: str, events: int) -> dict[str, float]:
    """Median milliseconds from an event kept by one store to a follower on another reading it."""
    namespace = f"bench-{uuid.uuid4().hex[:8]}"
    delays: dict[str, list[float]] = {"told": [], "polled": []}
    async with RedisStore(url, namespace=namespace) as writer, RedisStore(url, namespace=namespace) as reader:
        followers: dict[str, Any] = {"told": reader, "polled": Polled(reader)}
        for number in range(1, events + 1):
            for name, follower in followers.items():
                following = asyncio.create_task(read_next(follower, f"run-{name}", number - 1))
                await asyncio.sleep(POLL * (number % 7) / 7)  # the event comes at any point of a poll's wait
                kept = time.perf_counter()
                await writer.add_events(f"run-{name}", [(number, "x")], ended=False, keep=60)
                delays[name].append(await following - kept)
    return {name: sorted(values)[len(values) // 2] * 1000 for name, values in delays.items()}


def rows(scale: Scale) -> list[Row]:
    try:
        server = RedisServer()
    except FileNotFoundError:
        return [Row(SECTION, "Redis stores", skipped="no redis-server on PATH (apt-get install redis-server)")]
    runs = 1000 if scale.concurrent_runs >= 1000 else 100
    with server:
        trips = asyncio.run(count(server.url))
        walls = asyncio.run(throughput(server.url, runs, rounds=3 if scale.rounds > 2 else 1))
        follow = asyncio.run(follow_delays(server.url, 60 if scale.rounds > 2 else 21))
    journal = {calls: trips[f"journal {calls}"] for calls in (0, 1, 3)}

    def aim(name: str, value: float, target: float, what: str) -> Row:
        return Row(SECTION, name, value, "trips", target, what, 1.0)

    return [
        aim("rate_limit (rpm + tpm), per model call", trips["rate_limit"], 2, "aim: 1 before + 1 after"),
        aim("budget(per='tenant', window='day'), per model call", trips["budget"], 1, "aim: 1 spend"),
        aim(
            "budget outside rate_limit, one store, per model call",
            trips["budget + rate_limit"],
            2,
            "aim: rate_limit's 2",
        ),
        aim("cache, per model call that misses", trips["cache miss"], 2, "aim: 1 get + 1 set"),
        aim("cache, per model call that hits", trips["cache hit"], 1, "aim: 1 get"),
        aim("concurrency(models=8, store=), per model call", trips["concurrency"], 2, "aim: take + free"),
        aim("journal, run answered at once (1 model call)", journal[0], 2, "aim: start + 1 model call"),
        aim("journal, +1 model call and 1 tool batch of 1 call", journal[1] - journal[0], 2, "aim: 1 + 1"),
        aim("journal, +1 model call and 1 tool batch of 3 calls", journal[3] - journal[0], 2, "aim: 1 + 1"),
        Row(
            SECTION,
            f"{runs:,} concurrent runs, rate_limit + cache + journal on Redis, runs/s",
            runs / walls["redis"],
            "runs/s",
            runs / walls["memory"],
            "memory stores",
            aim=-0.7,
        ),
        Row(
            SECTION,
            "a follower on another process: ms from an event kept to its reading it",
            follow["told"],
            "ms",
            follow["polled"],
            f"reading every {POLL * 1000:.0f} ms",
            aim=0.25,
        ),
    ]


if __name__ == "__main__":
    from .timing import QUICK

    print(render(rows(QUICK)))
