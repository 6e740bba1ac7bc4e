"""`rate_limit`: requests and tokens per minute per key, and the provider's own signals."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import pytest

from middleware import rate_limit
from middleware.rate_limit import MemoryRateStore, RateLimitExceeded, Refunds, estimate_tokens
from onion import Agent, Message, ModelCall, ModelResponse, OnionError, Run, ToolRequest, Usage, tool
from onion.errors import RateLimitedError
from onion.testing import FakeTime, FunctionModel, ScriptedModel


def answers(n: int, usage: Usage | None = None) -> list[ModelResponse | str]:
    if usage is None:
        return ["ok"] * n
    return [ModelResponse(Message.assistant("ok"), usage) for _ in range(n)]


class NeverEndingSleep:
    """A sleep that never ends by itself (a call waiting on it goes only if woken); `slept`: the seconds asked."""

    def __init__(self) -> None:
        self.slept: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.slept.append(seconds)
        await asyncio.Event().wait()


def held_until(release: asyncio.Event) -> FunctionModel:
    """A model answering "ok" with 20 tokens of usage; to the input "a" only once `release` is set."""

    async def model(call: ModelCall) -> ModelResponse:
        if call.messages[-1].text == "a":
            await release.wait()
        return ModelResponse(Message.assistant("ok"), Usage(10, 10, 1))

    return FunctionModel(model)


def limited(fake_time: FakeTime, **options: Any) -> rate_limit:
    """A `rate_limit` that waits on `fake_time`."""
    return rate_limit(store=MemoryRateStore(clock=fake_time.clock), sleep=fake_time.sleep, **options)


async def test_bare_rate_limit_passes_calls_through() -> None:
    assert (await Agent(ScriptedModel(["ok"])).use(rate_limit).run("hi")).output == "ok"


async def test_requests_over_rpm_wait_for_the_window_to_refill() -> None:
    """rpm=2: two calls go at once, the third waits half a window for one request to refill."""
    fake_time = FakeTime()
    agent = Agent(ScriptedModel(answers(3))).use(limited(fake_time, rpm=2))
    for _ in range(3):
        await agent.run("hi")
    assert fake_time.now == pytest.approx(30.0)


async def run_calls(agent: Agent, n: int) -> None:
    """`n` runs of `agent` one after another; a layer spinning on a fake clock fails here instead of hanging."""

    async def calls() -> None:
        for _ in range(n):
            await agent.run("hi")

    await asyncio.wait_for(calls(), timeout=30)


async def test_rpm_stays_per_minute_whatever_the_window() -> None:
    """rpm=60, window=1: one request a second (not 60 a second), so 121 calls take two minutes."""
    fake_time = FakeTime()
    await run_calls(Agent(ScriptedModel(answers(121))).use(limited(fake_time, rpm=60, window=1)), 121)
    assert fake_time.now == pytest.approx(120.0)


async def test_tpm_stays_per_minute_whatever_the_window() -> None:
    """tpm=600, window=1 with 20-token calls: 10 tokens a second, so each call after the first waits 2 s."""
    fake_time = FakeTime()
    layer = limited(fake_time, tpm=600, window=1, estimate=lambda call: 20)
    await run_calls(Agent(ScriptedModel(answers(6, Usage(10, 10, 1)))).use(layer), 6)
    assert fake_time.now == pytest.approx(10.0, abs=0.1)


async def test_a_wait_on_a_fake_clock_always_moves_it_on() -> None:
    """rpm=720 on `FakeTime`: past the burst, waits never shrink to sleeps too short to move the clock."""
    fake_time = FakeTime()
    await run_calls(Agent(ScriptedModel(answers(800))).use(limited(fake_time, rpm=720)), 800)
    assert fake_time.now == pytest.approx(80 / 12, abs=0.1)
    assert len(fake_time.slept) < 200


async def test_wait_false_raises_rate_limit_exceeded_with_retry_after() -> None:
    agent = Agent(ScriptedModel(answers(3))).use(rate_limit(rpm=1, wait=False))
    await agent.run("hi")
    with pytest.raises(RateLimitExceeded) as caught:
        await agent.run("hi")
    error = caught.value
    assert isinstance(error, OnionError) and isinstance(error, RateLimitedError) and error.retryable
    assert error.key == "scripted" and 59 < error.retry_after <= 60  # type: ignore[operator]


async def test_fewer_than_one_request_per_window_still_lets_one_through_then_waits() -> None:
    store = MemoryRateStore(clock=lambda: 100.0)
    assert await store.acquire("k", 0, rpm=0.5, tpm=None, window=60) == 0.0
    assert await store.acquire("k", 0, rpm=0.5, tpm=None, window=60) == pytest.approx(120.0)


async def test_a_clock_stepping_back_takes_no_requests_away() -> None:
    """rpm=2 with a wall clock set back a minute: the second request still goes, the third waits."""
    times = iter([100.0, 40.0, 40.0])
    store = MemoryRateStore(clock=lambda: next(times))
    assert await store.acquire("k", 0, rpm=2, tpm=None, window=60) == 0.0
    assert await store.acquire("k", 0, rpm=2, tpm=None, window=60) == 0.0
    assert await store.acquire("k", 0, rpm=2, tpm=None, window=60) == pytest.approx(30.0)


async def test_tokens_are_reserved_from_an_estimate_and_reconciled_with_real_usage() -> None:
    """A call that used fewer tokens than estimated gives the rest back."""
    store = MemoryRateStore()
    limiter = rate_limit(tpm=1000, wait=False, store=store, estimate=lambda call: 900)
    agent = Agent(ScriptedModel(answers(3, Usage(50, 50, 1)))).use(limiter)
    await agent.run("hi")
    await agent.run("hi")  # passes only because 800 of the 900 reserved came back
    with pytest.raises(RateLimitExceeded):
        await agent.run("hi")


async def test_a_failed_call_gives_its_token_reservation_back() -> None:
    limiter = rate_limit(tpm=1000, wait=False, estimate=lambda call: 900)
    agent = Agent(ScriptedModel([OnionError("down"), "ok"])).use(limiter)
    with pytest.raises(OnionError, match="down"):
        await agent.run("hi")
    assert (await agent.run("hi")).output == "ok"


async def test_tokens_over_tpm_wait() -> None:
    """tpm=100 and 60 tokens a call: the second call waits for the 20 tokens missing (12 s of a minute)."""
    fake_time = FakeTime()
    agent = Agent(ScriptedModel(answers(2, Usage(30, 30, 1)))).use(
        limited(fake_time, tpm=100, estimate=lambda call: 60)
    )
    await agent.run("hi")
    await agent.run("hi")
    assert fake_time.now == pytest.approx(12.0)


async def test_a_single_request_larger_than_tpm_still_goes_when_the_bucket_is_full() -> None:
    limiter = rate_limit(tpm=10, wait=False, estimate=lambda call: 10_000)
    assert (await Agent(ScriptedModel(["ok"])).use(limiter).run("hi")).output == "ok"


async def test_estimates_above_tpm_still_hold_the_steady_rate_to_tpm() -> None:
    """Over 30 windows, calls whose estimate exceeds tpm spend at most tpm per window (plus one full bucket)."""
    fake_time = FakeTime()
    limiter = limited(fake_time, tpm=1000, estimate=lambda call: 10_000)
    agent = Agent(ScriptedModel(answers(100, Usage(150, 150, 1)))).use(limiter)
    for _ in range(100):
        await agent.run("hi")
    used, windows = 100 * 300, fake_time.now / 60
    assert windows > 29
    assert 1000 * windows <= used <= 1000 * (windows + 1)


def test_the_limit_holds_across_threads_each_running_its_own_event_loop() -> None:
    """One layer shared by agents run in 4 threads (4 event loops): rpm=5 lets 5 of 20 calls through in all."""
    limiter = rate_limit(rpm=5, wait=False, store=MemoryRateStore(clock=lambda: 100.0))
    agent = Agent(ScriptedModel(answers(20))).use(limiter)
    passed: list[bool] = []

    def five_runs() -> None:
        for _ in range(5):
            try:
                agent.run_sync("hi")
                passed.append(True)
            except RateLimitExceeded:
                passed.append(False)

    threads = [threading.Thread(target=five_runs) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(passed) == 20 and passed.count(True) == 5


async def test_limits_are_kept_per_model_by_default_and_per_key_when_given() -> None:
    limiter = rate_limit(rpm=1, wait=False)
    await Agent(ScriptedModel(["ok"], name="a")).use(limiter).run("hi")
    await Agent(ScriptedModel(["ok"], name="b")).use(limiter).run("hi")
    with pytest.raises(RateLimitExceeded):
        await Agent(ScriptedModel(["ok"], name="a")).use(limiter).run("hi")

    shared = rate_limit(rpm=1, wait=False, key=lambda call: "everyone")
    await Agent(ScriptedModel(["ok"], name="a")).use(shared).run("hi")
    with pytest.raises(RateLimitExceeded):
        await Agent(ScriptedModel(["ok"], name="b")).use(shared).run("hi")


async def test_bare_it_obeys_the_providers_retry_after() -> None:
    """After a 429 with retry_after, later calls for that model wait (or raise with wait=False)."""
    fake_time = FakeTime()
    model = ScriptedModel([RateLimitedError("429", retry_after=5), "ok"])
    agent = Agent(model).use(limited(fake_time))
    with pytest.raises(RateLimitedError):
        await agent.run("hi")
    assert (await agent.run("hi")).output == "ok"
    assert fake_time.now == pytest.approx(5.0)

    impatient = Agent(ScriptedModel([RateLimitedError("429", retry_after=30), "ok"])).use(rate_limit(wait=False))
    with pytest.raises(RateLimitedError):
        await impatient.run("hi")
    with pytest.raises(RateLimitExceeded):
        await impatient.run("hi")


def test_estimate_counts_text_tools_and_max_tokens() -> None:
    seen: list[ModelCall] = []

    def respond(call: ModelCall) -> str:
        seen.append(call)
        return "ok"

    Agent(FunctionModel(respond), settings={"max_tokens": 100}).run_sync("x" * 400)
    assert estimate_tokens(seen[0]) == 200


@pytest.mark.parametrize("kwargs", [{"rpm": 0}, {"tpm": -5}, {"window": 0}])
def test_non_positive_limits_are_rejected(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="positive"):
        rate_limit(**kwargs)


def test_estimate_counts_tool_call_arguments_and_tool_schemas_as_json() -> None:
    """Each tool call's name and JSON arguments, each tool's name, description and JSON schema count."""

    @tool
    def lookup(query: str, limit: int = 5) -> str:
        """Find things."""
        return query

    args: list[dict[str, object]] = [{"query": "weather in Paris", "limit": 3}, {"query": object()}, {}]
    requests = [ToolRequest(f"c{i}", "lookup", a) for i, a in enumerate(args)]
    messages = [Message.user("hi"), Message.assistant("", requests), Message.tool("c0", "sunny")]
    model_call = ModelCall(Run(None, "hi", messages), messages, [lookup, lookup], "m", {})  # type: ignore[arg-type]
    chars = len("hi") + len("sunny") + sum(len("lookup") + len(json.dumps(a, default=str)) for a in args)
    chars += 2 * (len("lookup") + len("Find things.") + len(json.dumps(lookup.parameters)))
    assert estimate_tokens(model_call) == estimate_tokens(model_call) == chars // 4


def test_rate_limit_and_compact_estimate_a_request_alike() -> None:
    """One count: `rate_limit`'s estimate of a call is `compact`'s of its messages and tools, plus max_tokens."""
    from middleware.compact import estimate_tokens as compact_estimate

    @tool
    def lookup(query: str) -> str:
        """Find things."""
        return query

    requests = [ToolRequest("c0", "lookup", {"query": "weather"})]
    messages = [
        Message.system("Be brief."),
        Message.user("hi"),
        Message.assistant("", requests),
        Message.tool("c0", "ok"),
    ]
    model_call = ModelCall(Run(None, "hi", messages), messages, [lookup], "m", {"max_tokens": 10})  # type: ignore[arg-type]
    assert estimate_tokens(model_call) == compact_estimate(messages, [lookup]) + 10


async def test_a_call_waiting_for_tokens_goes_as_soon_as_another_call_gives_its_unused_estimate_back() -> None:
    """tpm=100, estimates of 60: B waits while A holds 60; A really uses 20, and B goes at once, not after its wait.

    The wait here never ends by itself (a sleep on an event nobody sets), so
    B only goes if A's refund wakes it.
    """
    release, sleep = asyncio.Event(), NeverEndingSleep()
    limiter = rate_limit(tpm=100, estimate=lambda call: 60, store=MemoryRateStore(clock=lambda: 0.0), sleep=sleep)
    agent = Agent(held_until(release)).use(limiter)
    first = asyncio.create_task(agent.run("a"))
    second = asyncio.create_task(agent.run("b"))
    while not sleep.slept:
        await asyncio.sleep(0)
    assert not second.done()
    release.set()
    async with asyncio.timeout(10):
        results = await asyncio.gather(first, second)
    assert [r.output for r in results] == ["ok", "ok"]
    assert sleep.slept == [pytest.approx(12.0)]  # B was told to wait 12 s of the minute, and went when A gave 40 back


async def test_calls_that_waited_under_many_keys_leave_no_waiting_list_behind() -> None:
    """A call that waited its time out is forgotten with its key: a layer keyed per user kept an empty waiting
    list for every user that ever waited."""
    fake_time = FakeTime()
    limiter = limited(fake_time, rpm=1, key=lambda call: call.messages[-1].text)
    agent = Agent(ScriptedModel(answers(6))).use(limiter)
    for user in ("u1", "u2", "u3"):
        await agent.run(user)
        await agent.run(user)  # waits the minute out
    assert fake_time.now == pytest.approx(180.0)
    assert limiter._refunds._waiting == {}


async def test_a_layer_keyed_per_user_keeps_nothing_for_users_it_no_longer_limits() -> None:
    """3,000 users call once each, 0.1 s apart, under rpm=1 and tpm per user: the store drops the buckets that
    have refilled and the layer keeps no refund count once calls end (both kept one per user ever), while the
    last user, still at its limit, waits its minute."""
    fake_time = FakeTime()
    store = MemoryRateStore(clock=fake_time.clock)
    limiter = rate_limit(rpm=1, tpm=1000, key=lambda call: call.messages[-1].text, store=store, sleep=fake_time.sleep)
    agent = Agent(ScriptedModel(answers(3001, Usage(1, 1)))).use(limiter)
    for n in range(3000):
        await agent.run(f"user {n}")
        fake_time.now += 0.1
    assert len(store._buckets) < 2048
    assert {f"user {n}" for n in range(2401, 3000)} <= store._buckets.keys()  # those of the last minute
    assert len(limiter._refunds._tallies) == 0
    started = fake_time.now
    await agent.run("user 2999")
    assert fake_time.now - started == pytest.approx(59.9)


async def test_a_refund_landing_while_a_call_first_asks_the_store_is_not_missed() -> None:
    """tpm=100, estimates of 60: B asks a slow store (a shared one is a round trip away) while A holds 60; A gives
    40 back before B's answer (wait 12 s) arrives, and B goes at once instead of waiting for nothing."""
    release, asked, refunded, sleep = asyncio.Event(), asyncio.Event(), asyncio.Event(), NeverEndingSleep()

    class RoundTripAway(MemoryRateStore):
        async def acquire(self, key: str, tokens: int, *, rpm: float | None, tpm: float | None, window: float) -> float:
            delay = await super().acquire(key, tokens, rpm=rpm, tpm=tpm, window=window)
            if delay and not asked.is_set():
                asked.set()
                await refunded.wait()  # the answer is on its way back while A refunds
            return delay

        async def reconcile(self, key: str, reserved: int, used: int, *, refund_request: bool = False) -> None:
            await super().reconcile(key, reserved, used, refund_request=refund_request)
            refunded.set()

    store = RoundTripAway(clock=lambda: 0.0)
    agent = Agent(held_until(release)).use(rate_limit(tpm=100, estimate=lambda call: 60, store=store, sleep=sleep))
    first = asyncio.create_task(agent.run("a"))
    second = asyncio.create_task(agent.run("b"))
    await asyncio.wait_for(asked.wait(), 10)
    release.set()
    async with asyncio.timeout(10):
        results = await asyncio.gather(first, second)
    assert [r.output for r in results] == ["ok", "ok"] and sleep.slept == []


async def test_a_bucket_refilled_while_its_call_runs_is_not_swept_and_the_call_s_real_usage_is_charged() -> None:
    """tpm=1000: "a" reserves 10 tokens, its bucket refills within a second while the call still runs, then 1,024
    new keys make the store sweep. The call comes back having used 1,000 tokens: that is charged, so the next 500
    wait. (The sweep dropped the refilled bucket with its call in flight, the charge was lost and the next call went
    at once, over the limit.)"""
    fake_time = FakeTime()
    store = MemoryRateStore(clock=fake_time.clock)
    assert await store.acquire("a", 10, rpm=None, tpm=1000, window=60) == 0
    fake_time.now += 1.0
    for n in range(1025):
        await store.acquire(f"user {n}", 0, rpm=1, tpm=None, window=60)
    await store.reconcile("a", 10, 1000)
    assert await store.acquire("a", 500, rpm=None, tpm=1000, window=60) == pytest.approx(29.0)


async def test_a_refund_from_another_thread_just_after_a_waiting_call_checks_for_refunds_still_wakes_it() -> None:
    """tpm=100: A holds 100, B finds no room. A refund (from a call in another thread) lands just as B checks
    whether any came since its first ask: B still goes at once. (B read the refund count after checking, so counted
    that refund as seen, and slept its whole wait.)"""
    store, sleep = MemoryRateStore(clock=lambda: 0.0), NeverEndingSleep()
    layer = rate_limit(tpm=100, estimate=lambda call: 100, key=lambda call: "m", store=store, sleep=sleep)

    class RefundAfterSecondCheck(Refunds):
        reads = 0

        @property  # type: ignore[override]
        def epoch(self) -> int:
            self.reads += 1
            value = self._epoch
            if self.reads == 2:  # B's check: the other thread's call refunds A's tokens right after it
                store._buckets["m"].give_back(100, 0, False)
                self.wake("m")
            return value

        @epoch.setter
        def epoch(self, value: int) -> None:
            self._epoch = value

    layer._refunds = RefundAfterSecondCheck()
    assert await store.acquire("m", 100, rpm=None, tpm=100, window=60) == 0  # A
    agent = Agent(ScriptedModel(["ok"])).use(layer)
    async with asyncio.timeout(10):
        assert (await agent.run("b")).output == "ok"
    assert sleep.slept == []


async def test_a_key_whose_calls_failed_with_nothing_reserved_is_still_swept_once_refilled() -> None:
    """tpm=1000 and an estimate of 0: 1,100 users each make one call that fails. Each reservation is reconciled all
    the same, so the store sees no call in flight and sweeps the refilled buckets. (Unreconciled, each bucket would
    wait for ever for its call's usage.)"""
    fake_time = FakeTime()
    store = MemoryRateStore(clock=fake_time.clock)

    async def failing(call: ModelCall) -> ModelResponse:
        raise OnionError("down")

    agent = Agent(FunctionModel(failing)).use(
        rate_limit(tpm=1000, estimate=lambda call: 0, key=lambda call: call.messages[-1].text, store=store)
    )
    for n in range(1100):
        with pytest.raises(OnionError, match="down"):
            await agent.run(f"user {n}")
    assert len(store._buckets) < 1024
