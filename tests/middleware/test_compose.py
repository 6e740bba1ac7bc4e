"""The built-ins composed: bare stacks, shared stacks, and order."""

from __future__ import annotations

import logging

import pytest

from middleware import budget, cache, concurrency, fallback, log, rate_limit, retry, timeout
from middleware.rate_limit import RateLimitExceeded
from onion import Agent, Message, ModelResponse, Stack, Usage
from onion.errors import ServerError
from onion.testing import FunctionModel, ScriptedModel


async def test_rate_limit_cache_and_log_compose_bare(caplog: pytest.LogCaptureFixture) -> None:
    """`agent.use(rate_limit, cache, log)`: the repeat is a cache hit, and log sees it marked cached."""
    caplog.set_level(logging.INFO, logger="onion")
    model = ScriptedModel(["hello"])
    agent = Agent(model).use(rate_limit, cache, log)
    first, second = await agent.run("hi"), await agent.run("hi")
    assert first.output == second.output == "hello" and len(model.requests) == 1
    assert second.state["cache"] == {"hits": 1, "misses": 0}
    model_lines = [r.getMessage() for r in caplog.records if r.kind == "model"]  # type: ignore[attr-defined]
    assert len(model_lines) == 1  # the hit never reached log, which sits inside cache
    assert [type(layer.source).__name__ for layer in agent.stack] == ["rate_limit", "cache", "log"]


async def test_one_stack_shared_by_two_agents_shares_its_cache_and_its_rate_limit() -> None:
    shared = Stack(rate_limit(rpm=2, wait=False), cache())
    model = FunctionModel(lambda call: ModelResponse(Message.assistant("answer"), Usage(5, 5, 1)))
    writer = Agent(model, name="writer", middleware=[shared])
    critic = Agent(model, name="critic", middleware=[shared])
    await writer.run("same question")
    hit = await critic.run("same question")
    assert hit.usage == Usage() and len(model.requests) == 1
    await critic.run("another question")  # the second request of this minute, counted across both agents
    with pytest.raises(RateLimitExceeded):
        await writer.run("a third question")


async def test_cache_outside_rate_limit_serves_hits_even_when_the_limit_is_spent() -> None:
    model = ScriptedModel(["hello"])
    agent = Agent(model).use(cache, rate_limit(rpm=1, wait=False))
    await agent.run("hi")
    assert (await agent.run("hi")).output == "hello"  # a hit: rate_limit never saw it


async def test_rate_limit_outside_cache_waits_before_a_hit_but_gives_its_request_back() -> None:
    model = ScriptedModel(["hello", "other"])
    agent = Agent(model).use(rate_limit(rpm=2, wait=False), cache)
    await agent.run("hi")
    await agent.run("hi")  # hit: the request is refunded
    assert (await agent.run("new")).output == "other"
    with pytest.raises(RateLimitExceeded):
        await agent.run("hi")  # the limit is spent, so even a would-be hit is refused here


async def test_the_recommended_order_runs_end_to_end(caplog: pytest.LogCaptureFixture) -> None:
    """log, budget, cache, fallback, retry, rate_limit, timeout: failures are absorbed, the repeat is a hit."""
    caplog.set_level(logging.INFO, logger="onion")
    primary = ScriptedModel([ServerError("down"), ServerError("down again")], name="primary")
    backup = ScriptedModel([ModelResponse(Message.assistant("from backup"), Usage(10, 10, 1))], name="backup")
    agent = Agent(primary).use(
        log,
        budget(max_tokens=1000),
        cache,
        fallback(backup),
        retry(2, initial=0.001, jitter=0),
        rate_limit(rpm=100),
        timeout(1),
    )
    first = await agent.run("hi")
    assert first.output == "from backup" and first.state["fallback"]["failed"] == ["primary"]
    assert first.state["retries"] == 1
    second = await agent.run("hi")
    assert second.output == "from backup" and second.usage == Usage()
    assert "cached" in [r for r in caplog.records if r.kind == "model"][-1].getMessage()  # type: ignore[attr-defined]


def test_layers_configured_off_for_a_kind_are_not_in_its_chain() -> None:
    bare = Stack(cache, retry, timeout, concurrency)
    assert [layer.name for layer in bare.layers("tool")] == ["concurrency"]
    assert [layer.name for layer in bare.layers("model")] == ["cache", "retry", "timeout"]
    configured = Stack(cache(tools=True), retry(tools=True), timeout(tools=5), concurrency(models=2))
    assert [layer.name for layer in configured.layers("tool")] == ["cache", "retry", "timeout", "concurrency"]
    assert [layer.name for layer in configured.layers("model")] == ["cache", "retry", "timeout", "concurrency"]
