"""`timeout`: bounds on model calls, tool calls and runs, raising `TimeoutExceeded`."""

from __future__ import annotations

import asyncio

import pytest

from middleware import timeout
from middleware.timeout import ModelCallTimeout, TimeoutExceeded
from onion import Agent, ModelCall, OnionError, tool
from onion.errors import ModelError, ModelTimeoutError
from onion.testing import FunctionModel, ScriptedModel, call


def sleeping_model(seconds: float, answer: str = "ok") -> FunctionModel:
    async def respond(_: ModelCall) -> str:
        await asyncio.sleep(seconds)
        return answer

    return FunctionModel(respond)


@tool
async def nap(seconds: float) -> str:
    """Sleep."""
    await asyncio.sleep(seconds)
    return "rested"


async def test_bare_timeout_leaves_quick_model_calls_alone() -> None:
    assert (await Agent(ScriptedModel(["ok"])).use(timeout).run("hi")).output == "ok"


async def test_a_slow_model_call_raises_model_call_timeout() -> None:
    with pytest.raises(ModelCallTimeout) as caught:
        await Agent(sleeping_model(1)).use(timeout(0.02)).run("hi")
    error = caught.value
    assert isinstance(error, TimeoutExceeded) and isinstance(error, OnionError) and isinstance(error, TimeoutError)
    assert isinstance(error, ModelTimeoutError) and error.retryable
    assert (error.kind, error.name, error.seconds) == ("model", "function", 0.02)
    assert "timed out after 0.02s" in str(error)


async def test_tool_calls_are_unbounded_unless_configured() -> None:
    model = ScriptedModel([[call("nap", seconds=0.05)], "done"])
    result = await Agent(model, tools=[nap]).use(timeout(0.01)).run("hi")
    assert result.messages[-2].text == "rested"


async def test_a_slow_tool_becomes_an_error_result_naming_the_timeout() -> None:
    model = ScriptedModel([[call("nap", seconds=1)], "done"])
    result = await Agent(model, tools=[nap]).use(timeout(tools=0.02)).run("hi")
    assert result.messages[-2].is_error
    assert "TimeoutExceeded: tool nap timed out after 0.02s" in result.messages[-2].text


async def test_per_tool_limits_override_the_tools_limit() -> None:
    model = ScriptedModel([[call("nap", seconds=0.05)], "done"])
    result = await Agent(model, tools=[nap]).use(timeout(tools=0.01, per_tool={"nap": None})).run("hi")
    assert result.messages[-2].text == "rested"
    model = ScriptedModel([[call("nap", seconds=1)], "done"])
    result = await Agent(model, tools=[nap]).use(timeout(per_tool={"nap": 0.01})).run("hi")
    assert "timed out" in result.messages[-2].text


async def test_run_limit_bounds_the_whole_run() -> None:
    model = ScriptedModel([[call("nap", seconds=0.03)], [call("nap", seconds=0.03)], "done"])
    with pytest.raises(TimeoutExceeded) as caught:
        await Agent(model, tools=[nap]).use(timeout(None, run=0.04)).run("hi")
    assert caught.value.kind == "run" and not isinstance(caught.value, ModelError)


async def test_a_timeout_error_raised_by_the_model_itself_is_not_rewritten() -> None:
    error = ModelTimeoutError("provider timeout")
    with pytest.raises(ModelTimeoutError) as caught:
        await Agent(ScriptedModel([error])).use(timeout(5)).run("hi")
    assert caught.value is error


async def test_outer_cancellation_propagates_as_cancelled_error() -> None:
    started = asyncio.Event()

    async def respond(_: ModelCall) -> str:
        started.set()
        await asyncio.sleep(10)
        return "never"

    task = asyncio.ensure_future(Agent(FunctionModel(respond)).use(timeout(5)).run("hi"))
    await started.wait()  # cancelled inside the timed model call, not before it began
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_nested_timeouts_report_the_one_that_expired() -> None:
    agent = Agent(sleeping_model(1)).use(timeout(0.5), timeout(0.01))
    with pytest.raises(ModelCallTimeout) as caught:
        await agent.run("hi")
    assert caught.value.seconds == 0.01


@pytest.mark.parametrize("kwargs", [{"seconds": 0}, {"tools": -1}, {"run": 0}, {"per_tool": {"nap": 0}}])
def test_non_positive_limits_are_rejected(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError, match="positive"):
        timeout(**kwargs)  # type: ignore[arg-type]
