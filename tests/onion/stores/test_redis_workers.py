"""Many worker processes on one Redis: shared rate limits, cache, paused and crashed runs, sessions."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from forker import Forked, Forker

from onion import Message, ModelResponse, Usage
from onion.errors import RunBusy
from onion.stores import RedisStore
from onion.testing import FakeProviderServer, FunctionModel, HTTPError, RecordedRequest, ServerItem

pytestmark = pytest.mark.slow  # several processes in real time

ROOT = Path(__file__).resolve().parents[3]
WORKER = Path(__file__).with_name("redis_worker.py")


def start(forker: Forker, *args: str) -> Forked:
    """`python redis_worker.py *args`, forked from the session's fork server (onion and the SDKs imported)."""
    return forker.popen(WORKER, *args, env={**os.environ, "PYTHONPATH": str(ROOT)})


def start_together(workers: list[Forked]) -> list[Forked]:
    """Wait until every worker printed `ready`, then tell them all to go."""
    for worker in workers:
        assert worker.stdout is not None and worker.stdout.readline() == "ready\n"
    for worker in workers:
        assert worker.stdin is not None
        worker.stdin.write("go\n")
        worker.stdin.flush()
    return workers


def finish(workers: list[Forked], *, quiet: bool = True) -> list[str]:
    """Each worker's output once it exited (asserting that it exited cleanly, with nothing on stderr if `quiet`)."""
    outputs = []
    for worker in workers:
        out, err = worker.communicate(timeout=120)
        assert worker.returncode == 0 and not (quiet and err.strip()), err
        outputs.append(out)
    return outputs


class Arrivals:
    """A fake server's `respond`: answers with `answer(n)` and records each request's admission time.

    The time is the request's `x-sent-at` header: the Redis time at which
    the shared rate limit let it through (the clock every worker's limit
    uses). Arrival times would add the delivery delays of a loaded machine
    (seconds at worst), which the limit does not govern.
    """

    def __init__(self, answer: Callable[[int], ServerItem]) -> None:
        self.times: list[float] = []
        self.prompts: list[str] = []
        self.answer = answer
        self._lock = threading.Lock()

    def __call__(self, request: RecordedRequest) -> ServerItem:
        with self._lock:
            self.times.append(float(request.headers.get("x-sent-at", time.time())))
            content = request.body["messages"][-1]["content"]
            self.prompts.append(content if isinstance(content, str) else content[0]["text"])
            return self.answer(len(self.times))

    def most_in_any_window(self, window: float, weights: list[float] | None = None) -> float:
        """The largest count (or sum of `weights`) of arrivals within any rolling `window` seconds."""
        times, weights = sorted(self.times), weights or [1.0] * len(self.times)
        best, first, total = 0.0, 0, 0.0
        for last, at in enumerate(times):
            total += weights[last]
            while at - times[first] >= window:
                total -= weights[first]
                first += 1
            best = max(best, total)
        return best


def namespace() -> str:
    return f"t{uuid.uuid4().hex[:12]}"


def answered(tokens: int) -> ModelResponse:
    return ModelResponse(Message.assistant("ok"), Usage(input_tokens=tokens - 20, output_tokens=20))


def run_workers(
    forker: Forker, redis_url: str, server: FakeProviderServer, ns: str, runs: str, rpm: str, tpm: str, window: str
) -> None:
    workers = start_together(
        [start(forker, "rate", redis_url, ns, server.url, f"w{i}", runs, rpm, tpm, window) for i in range(4)]
    )
    assert [line.split() for line in finish(workers)] == [["done", "0"]] * 4


def test_four_workers_share_one_requests_per_minute_limit(redis_url: str, forker: Forker) -> None:
    """4 processes x 25 concurrent runs under rate_limit(rpm=1200, window=3 s), 60 a window, on one Redis.

    The server never receives more than 60 requests admitted within any
    window (each worker alone would let its 25 through at once), and the
    workers together fill at least 90% of it. The window is
    three seconds instead of a minute to keep the test fast (and longer than
    a loaded machine's delays in waking the waiting calls).
    """
    arrivals = Arrivals(lambda n: answered(50))
    with FakeProviderServer(respond=arrivals) as server:
        run_workers(forker, redis_url, server, namespace(), "25", "1200", "0", "3.0")
    assert len(arrivals.times) == 100
    assert arrivals.most_in_any_window(3.0) <= 60
    assert arrivals.most_in_any_window(3.0) >= 54


def test_four_workers_share_one_tokens_per_minute_limit_reconciled_with_real_usage(
    redis_url: str, forker: Forker
) -> None:
    """Calls are estimated at 60 tokens and really use 50: reconciled, 40 fit in 2000 a window (tpm=40000), not 33.

    4 processes x 25 concurrent runs (100 calls: two full windows and a
    part). The real tokens the server answered within any 3 s window stay
    under 2000 and reach at least 90% of it (without reconciling, 83%).
    """
    arrivals = Arrivals(lambda n: answered(50))
    with FakeProviderServer(respond=arrivals) as server:
        run_workers(forker, redis_url, server, namespace(), "25", "0", "40000", "3.0")
    assert len(arrivals.times) == 100
    used = [50.0] * len(arrivals.times)
    assert arrivals.most_in_any_window(3.0, used) <= 2000
    assert arrivals.most_in_any_window(3.0, used) >= 1800


def test_one_workers_429_with_retry_after_makes_every_worker_wait(redis_url: str, forker: Forker) -> None:
    """The 12th request gets a 429 with retry-after: 2; no worker sends anything in the 2 s after it.

    4 workers, each with 8 runs one after another; the worker that got the
    429 reports when the shared pause ends; no request is admitted in the 2 s
    before that, and several workers go on after it.
    """
    arrivals = Arrivals(lambda n: HTTPError(429, retry_after=2) if n == 12 else answered(50))
    with FakeProviderServer(respond=arrivals) as server:
        ns = namespace()
        workers = start_together(
            [start(forker, "rate", redis_url, ns, server.url, f"w{i}", "8s", "0", "0", "60") for i in range(4)]
        )
        outputs = finish(workers, quiet=False)
    (pause_ends,) = [float(line.split()[1]) for out in outputs for line in out.splitlines() if "paused-until" in line]
    assert sum(int(out.split()[-1]) for out in outputs) == 1  # the run that got the 429 (no retry layer)
    during = [t for t in arrivals.times if pause_ends - 2.0 < t < pause_ends]
    after = {p.split("-")[0] for t, p in zip(arrivals.times, arrivals.prompts, strict=True) if t >= pause_ends}
    assert during == []
    assert len(after) >= 2


def test_a_cache_filled_by_one_process_is_hit_by_another_and_namespaces_stay_apart(
    redis_url: str, forker: Forker
) -> None:
    """Process 1 misses and stores; process 2 (same namespace) hits with no request; another namespace misses."""
    tenant, other = namespace(), namespace()
    arrivals = Arrivals(lambda n: answered(50))
    with FakeProviderServer(respond=arrivals) as server:
        first = start(forker, "cache", redis_url, tenant, server.url, "hello")  # misses and fills the cache
        outcomes = finish([first])[0].split()
        then = [start(forker, "cache", redis_url, ns, server.url, "hello") for ns in (tenant, other)]  # both at once
        outcomes += [out.strip() for out in finish(then)]
    assert outcomes == ["miss", "hit", "miss"]
    assert len(arrivals.times) == 2


def test_a_run_paused_on_worker_a_is_resumed_on_worker_b(redis_url: str, forker: Forker) -> None:
    """Worker A pauses for approval; worker B loads the run from Redis, approves it and finishes it."""
    ns = namespace()
    status, run_id = finish([start(forker, "pause", redis_url, ns)])[0].split()
    assert status == "paused"
    assert finish([start(forker, "decide", redis_url, ns, run_id)])[0].strip() == "paid 5"


async def test_a_worker_killed_mid_run_is_taken_over_after_its_lease_expires(
    redis_url: str, tmp_path: Path, forker: Forker
) -> None:
    """A worker dies inside a tool; the run is busy until its 1 s lease lapses, then another worker finishes it.

    The tool started once; the new worker answers it as interrupted (it may
    have run) and never runs it again.
    """
    ns, effects = namespace(), tmp_path / "effects"
    worker = start(forker, "hang", redis_url, ns, str(effects))
    assert worker.stdout is not None
    assert await asyncio.to_thread(worker.stdout.readline) == "started\n"
    worker.send_signal(signal.SIGKILL)
    await asyncio.to_thread(worker.wait)
    async with RedisStore(redis_url, namespace=ns) as store:
        (record,) = await store.runs()
        from onion import Agent, tool

        @tool
        async def slow(n: int) -> str:
            """Work that never ends in this process."""
            raise AssertionError("an interrupted call is not run again")

        def reports(call: object) -> str:
            return call.messages[-1].text  # type: ignore[attr-defined,no-any-return]

        agent = Agent(FunctionModel(reports), tools=[slow], store=store, lease=1.0)
        with pytest.raises(RunBusy, match="held by another worker"):
            await agent.resume(record.run_id)
        while True:
            try:
                result = await agent.resume(record.run_id)
                break
            except RunBusy:
                await asyncio.sleep(0.05)
    assert "interrupted" in result.output
    assert effects.read_text() == "slow 1\n"


async def test_sessions_shared_by_two_processes_are_serialised(redis_url: str, forker: Forker) -> None:
    """Two processes run 10 runs each on one session: all 40 messages kept, every run's pair together."""
    ns = namespace()
    finish([start(forker, "session", redis_url, ns, "10", "a"), start(forker, "session", redis_url, ns, "10", "b")])
    async with RedisStore(redis_url, namespace=ns) as store:
        messages = await store.session("shared").messages()
    assert len(messages) == 40
    pairs = [(messages[i].text, messages[i + 1].text) for i in range(0, 40, 2)]
    assert all(answer == f"answer to {prompt}" for prompt, answer in pairs)
    assert sorted(prompt for prompt, _ in pairs) == sorted(f"{w}-{n}" for w in "ab" for n in range(10))
