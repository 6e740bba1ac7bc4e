"""Retries belong to onion: each attempt a retry layer makes is exactly one request at the server.

onion builds its clients with `max_retries=0`; a retry layer (here a tiny
one, as a user would write) decides every attempt from `ModelError.retryable`.
A client passed in by the user keeps its own retries, which is why the docs
tell users to give it `max_retries=0`: the last test shows attempts multiply
otherwise.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import anthropic
import openai
import pytest

from onion import Agent, ModelCall, ModelResponse
from onion.errors import BadRequestError, ModelError, RateLimitedError
from onion.providers import AnthropicModel, OpenAIChatModel, OpenAIResponsesModel
from onion.testing import DropConnection, FakeProviderServer, HTTPError, StreamError


def retrying(attempts: int, seen: list[ModelError]) -> Callable[..., Awaitable[ModelResponse]]:
    """A model layer that retries retryable `ModelError`s, at most `attempts` attempts in all."""

    async def retry(call: ModelCall, call_next: Callable[[ModelCall], Awaitable[ModelResponse]]) -> ModelResponse:
        for attempt in range(1, attempts + 1):
            try:
                return await call_next(call)
            except ModelError as error:
                seen.append(error)
                if not error.retryable or attempt == attempts:
                    raise
                await asyncio.sleep(min(error.retry_after or 0.0, 0.01))
        raise AssertionError("unreachable")

    return retry


async def test_each_retry_is_exactly_one_request(
    api: str, streamed: bool, server: FakeProviderServer, make_model: Any, run_agent: Any
) -> None:
    """Four failures, each retryable, then an answer: five attempts, five requests, no more."""
    server.script(
        [
            HTTPError(429, retry_after_ms=5),
            HTTPError(529),
            StreamError("overloaded_error", partial_text="Hel"),
            DropConnection(partial_text="Hel"),
            "recovered",
        ]
    )
    seen: list[ModelError] = []
    agent = Agent(make_model(api), middleware=[retrying(5, seen)])

    result, _ = await run_agent(agent, "hi")

    assert result.output == "recovered"
    assert len(server.requests) == 5
    assert [type(error).__name__ for error in seen] == [
        "RateLimitedError",
        "OverloadedError",
        "OverloadedError",
        "ConnectionLostError",
    ]
    assert seen[0].retry_after == 0.005
    assert result.usage.requests == 1


async def test_a_non_retryable_error_is_sent_once(
    api: str, streamed: bool, server: FakeProviderServer, make_model: Any, run_agent: Any
) -> None:
    server.script([HTTPError(400, "max_tokens: must be positive"), "never sent"])
    seen: list[ModelError] = []
    agent = Agent(make_model(api), middleware=[retrying(5, seen)])
    with pytest.raises(BadRequestError):
        await run_agent(agent, "hi")
    assert len(server.requests) == 1
    assert server.remaining == 1


async def test_the_last_attempt_raises_after_exactly_that_many_requests(
    api: str, server: FakeProviderServer, make_model: Any
) -> None:
    server.script([HTTPError(429, retry_after_ms=1)] * 3 + ["never sent"])
    seen: list[ModelError] = []
    with pytest.raises(RateLimitedError):
        await Agent(make_model(api), middleware=[retrying(3, seen)]).run("hi")
    assert len(server.requests) == 3
    assert [request.headers["x-stainless-retry-count"] for request in server.requests] == ["0", "0", "0"]


async def test_onion_builds_its_clients_without_sdk_retries(api: str, make_model: Any) -> None:
    assert make_model(api).client.max_retries == 0


async def test_a_users_client_keeps_its_own_retries_and_attempts_multiply(server: FakeProviderServer) -> None:
    """With the SDK default (2 retries) one onion call became three requests: set max_retries=0."""
    server.script([HTTPError(429, retry_after_ms=1), HTTPError(429, retry_after_ms=1), "third time"])
    client = anthropic.AsyncAnthropic(base_url=server.url, api_key="test-key", max_retries=2)
    try:
        result = await Agent(AnthropicModel("claude-test", client=client)).run("hi")
    finally:
        await client.close()
    assert result.output == "third time"
    assert len(server.requests) == 3


@pytest.mark.parametrize("model_class", [OpenAIChatModel, OpenAIResponsesModel])
async def test_a_users_openai_client_is_used_as_given(server: FakeProviderServer, model_class: Any) -> None:
    server.script(["from your client"])
    client = openai.AsyncOpenAI(base_url=server.openai_url, api_key="user-key", max_retries=0)
    model = model_class("gpt-test", client=client)
    try:
        result = await Agent(model).run("hi")
        await model.aclose()
        assert not client.is_closed()
    finally:
        await client.close()
    assert result.output == "from your client"
    assert server.requests[0].headers["authorization"] == "Bearer user-key"
