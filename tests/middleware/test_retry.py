"""`retry`: tenacity-driven retries of model calls, and of tool calls when opted in."""

from __future__ import annotations

import asyncio

import pytest

from middleware import retry, timeout
from middleware.retry import RetryPolicy
from onion import Agent, ModelCall, tool
from onion.errors import BadRequestError, ModelError, OverloadedError, RateLimitedError, ServerError
from onion.testing import FakeTime, FunctionModel, ScriptedModel, call

FAST = {"initial": 0.001, "max_backoff": 0.002, "jitter": 0.0}


async def test_bare_retry_retries_a_retryable_model_error_and_counts_retries() -> None:
    model = ScriptedModel([ServerError("boom"), OverloadedError("busy"), "ok"])
    result = await Agent(model).use(retry(**FAST)).run("hi")
    assert result.output == "ok"
    assert len(model.requests) == 3
    assert result.state["retries"] == 2


async def test_bare_retry_is_usable_as_a_class() -> None:
    agent = Agent(ScriptedModel(["ok"])).use(retry)
    assert (await agent.run("hi")).output == "ok"


async def test_retry_gives_up_after_attempts_and_raises_the_last_error() -> None:
    model = ScriptedModel([ServerError("1"), ServerError("2"), ServerError("3"), "never"])
    with pytest.raises(ServerError, match="3"):
        await Agent(model).use(retry(3, **FAST)).run("hi")
    assert len(model.requests) == 3


@pytest.mark.parametrize(
    "error", [BadRequestError("bad"), ModelError("plain"), ValueError("bug"), ServerError("x", retryable=False)]
)
async def test_non_retryable_errors_are_raised_at_once(error: Exception) -> None:
    model = ScriptedModel([error, "never"])
    with pytest.raises(type(error)):
        await Agent(model).use(retry(**FAST)).run("hi")
    assert len(model.requests) == 1


async def test_retry_waits_the_retry_after_the_provider_asked_for() -> None:
    fake = FakeTime()
    model = ScriptedModel([RateLimitedError("429", retry_after=0.02), "ok"])
    await Agent(model).use(retry(sleep=fake.sleep, **FAST)).run("hi")
    assert fake.slept == [0.02]


async def test_a_retry_after_above_max_retry_after_is_raised_not_cut_short() -> None:
    """A provider asking for more than `max_retry_after` is never sent too early: the error is raised."""
    fake = FakeTime()
    model = ScriptedModel([RateLimitedError("429", retry_after=3600), "never"])
    with pytest.raises(RateLimitedError):
        await Agent(model).use(retry(max_retry_after=10, sleep=fake.sleep, **FAST)).run("hi")
    assert fake.slept == [] and len(model.requests) == 1


async def test_a_retry_after_longer_than_max_delay_allows_is_raised_not_cut_short() -> None:
    """`retry(max_delay=3)` and `retry-after: 6`: no request before 6 s, so no retry at all; the 429 is raised.

    A `retry-after` that fits is waited in full; the next one, past what is left of `max_delay`, is raised.
    """
    fake = FakeTime()
    model = ScriptedModel([RateLimitedError("429", retry_after=6), "never"])
    with pytest.raises(RateLimitedError):
        await Agent(model).use(retry(max_delay=3, sleep=fake.sleep, clock=fake.clock, **FAST)).run("hi")
    assert fake.slept == [] and len(model.requests) == 1

    model = ScriptedModel([RateLimitedError("429", retry_after=2.5), RateLimitedError("429", retry_after=1), "ok"])
    with pytest.raises(RateLimitedError):
        await Agent(model).use(retry(5, max_delay=3, sleep=fake.sleep, clock=fake.clock, **FAST)).run("hi")
    assert fake.slept == [2.5] and len(model.requests) == 2


async def test_backoff_grows_exponentially_without_retry_after() -> None:
    fake = FakeTime()
    model = ScriptedModel([ServerError("1"), ServerError("2"), ServerError("3"), "ok"])
    await Agent(model).use(retry(4, sleep=fake.sleep, initial=1, max_backoff=3, jitter=0)).run("hi")
    assert fake.slept == [1, 2, 3]


async def test_max_delay_stops_retrying_when_the_time_is_spent() -> None:
    """Backoffs of 2 s within max_delay=5: tries at 0, 2, 4, then a backoff cut to 1 s, a last try at 5, and stop."""
    fake = FakeTime()
    model = ScriptedModel([ServerError(str(i)) for i in range(100)])
    layer = retry(100, max_delay=5, initial=2, max_backoff=2, jitter=0, sleep=fake.sleep, clock=fake.clock)
    with pytest.raises(ServerError, match="3"):
        await Agent(model).use(layer).run("hi")
    assert fake.slept == [2, 2, 1] and len(model.requests) == 4


async def test_cancellation_is_never_retried() -> None:
    calls = 0

    started = asyncio.Event()

    async def slow(_: ModelCall) -> str:
        nonlocal calls
        calls += 1
        started.set()
        await asyncio.Event().wait()
        return "never"

    task = asyncio.ensure_future(Agent(FunctionModel(slow)).use(retry(**FAST)).run("hi"))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert calls == 1


@pytest.mark.parametrize("signal", [KeyboardInterrupt, SystemExit, GeneratorExit])
def test_policy_never_retries_base_exceptions(signal: type[BaseException]) -> None:
    policy = RetryPolicy(retry_on=lambda error: True)
    assert not policy.retries_model(signal())
    assert not policy.retries_tool(signal())


async def test_a_base_exception_signal_passes_straight_through() -> None:
    class Stop(BaseException):
        pass

    model = ScriptedModel([Stop(), "never"])
    with pytest.raises(Stop):
        await Agent(model).use(retry(retry_on=lambda error: True, **FAST)).run("hi")
    assert len(model.requests) == 1


async def test_retry_on_chooses_which_model_errors_are_retried() -> None:
    model = ScriptedModel([ValueError("flaky"), "ok"])
    result = await Agent(model).use(retry(retry_on=lambda e: isinstance(e, ValueError), **FAST)).run("hi")
    assert result.output == "ok"


async def test_tool_calls_are_not_retried_unless_opted_in() -> None:
    failures = [RuntimeError("down")]

    @tool
    def fetch(url: str) -> str:
        """Fetch."""
        if failures:
            raise failures.pop()
        return "page"

    model = ScriptedModel([[call("fetch", url="x")], "done"])
    result = await Agent(model, tools=[fetch]).use(retry(**FAST)).run("hi")
    assert "Tool fetch failed: RuntimeError: down" in result.messages[-2].text

    failures.append(RuntimeError("down"))
    model = ScriptedModel([[call("fetch", url="x")], "done"])
    result = await Agent(model, tools=[fetch]).use(retry(tools=["fetch"], **FAST)).run("hi")
    assert result.messages[-2].text == "page"
    assert result.state["retries"] == 1


async def test_tools_may_be_selected_by_predicate() -> None:
    attempts: list[str] = []

    @tool
    def flaky(x: int) -> str:
        """Fails twice."""
        attempts.append("try")
        if len(attempts) < 3:
            raise ConnectionError("reset")
        return "ok"

    model = ScriptedModel([[call("flaky", x=1)], "done"])
    result = await Agent(model, tools=[flaky]).use(retry(tools=lambda c: c.name.startswith("fl"), **FAST)).run("hi")
    assert result.messages[-2].text == "ok" and len(attempts) == 3


async def test_invalid_tool_arguments_are_results_and_not_retried() -> None:
    @tool
    def add(a: int) -> int:
        """Add."""
        return a

    model = ScriptedModel([[call("add", a="not a number")], "done"])
    result = await Agent(model, tools=[add]).use(retry(tools=True, **FAST)).run("hi")
    assert result.messages[-2].is_error and "retries" not in result.state


def test_invalid_configuration_is_rejected() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        retry(0)
    with pytest.raises(TypeError, match="not both"):
        retry(policy=RetryPolicy(), initial=1)


async def test_timeout_inside_retry_bounds_each_attempt() -> None:
    """retry -> timeout: a first attempt that never answers times out and the second one answers."""
    attempts: list[int] = []

    async def answer(_: ModelCall) -> str:
        attempts.append(1)
        if len(attempts) == 1:
            await asyncio.Event().wait()
        return "ok"

    agent = Agent(FunctionModel(answer)).use(retry(**FAST), timeout(0.05))
    assert (await agent.run("hi")).output == "ok"


async def test_timeout_outside_retry_bounds_all_attempts_together() -> None:
    """timeout -> retry: the limit covers every attempt and backoff, so retries run out of time.

    Each attempt fails at once; 50 backoffs of 0.01 s cannot fit in 0.05 s, so the timeout ends them.
    """
    attempts: list[int] = []

    async def answer(_: ModelCall) -> str:
        attempts.append(1)
        raise ServerError("failure")

    agent = Agent(FunctionModel(answer)).use(timeout(0.05), retry(50, initial=0.01, max_backoff=0.01, jitter=0))
    with pytest.raises(TimeoutError):
        await agent.run("hi")
    assert 1 <= len(attempts) < 50
