"""Fixtures: a fake provider server per test, and onion models whose real SDK clients talk to it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from onion import Agent, Event, RunFinished, RunResult
from onion.providers import AnthropicModel, OpenAIChatModel, OpenAIResponsesModel
from onion.testing import FakeProviderServer

ProviderModel = AnthropicModel | OpenAIChatModel | OpenAIResponsesModel  # the three public provider models

APIS = ["anthropic", "openai", "openai-responses"]


@pytest.fixture(scope="module", autouse=True)
def _fast_tls(one_ssl_context: None) -> None:
    """Every provider test module builds the TLS context once (see tests/conftest.py)."""


def build_model(api: str, server: FakeProviderServer, **options: Any) -> ProviderModel:
    """An onion model of `api` whose onion-built client (max_retries=0) talks to `server`."""
    if api == "anthropic":
        return AnthropicModel("claude-test", base_url=server.url, api_key="test-key", **options)
    if api == "openai":
        return OpenAIChatModel("gpt-test", base_url=server.openai_url, api_key="test-key", **options)
    return OpenAIResponsesModel("gpt-test", base_url=server.openai_url, api_key="test-key", **options)


ModelFactory = Callable[..., ProviderModel]


@pytest.fixture
async def make_model(server: FakeProviderServer) -> AsyncIterator[ModelFactory]:
    """`make_model(api, **options)`; every model made is closed after the test."""
    made: list[ProviderModel] = []

    def make(api: str, **options: Any) -> ProviderModel:
        model = build_model(api, server, **options)
        made.append(model)
        return model

    yield make
    for model in made:
        await model.aclose()


@pytest.fixture(params=APIS)
def api(request: pytest.FixtureRequest) -> str:
    """Each of the three provider APIs in turn."""
    value: str = request.param
    return value


@pytest.fixture(params=[False, True], ids=["run", "stream"])
def streamed(request: pytest.FixtureRequest) -> bool:
    """Non-streamed (`agent.run`) and streamed (`agent.stream`) in turn."""
    value: bool = request.param
    return value


Runner = Callable[..., Any]


@pytest.fixture
def run_agent(streamed: bool) -> Runner:
    """`await run_agent(agent, input)` -> (result, events), through `agent.stream` if streamed, else `agent.run`."""

    async def run(agent: Agent, input: str) -> tuple[RunResult, list[Event]]:
        if not streamed:
            return await agent.run(input), []
        events = [event async for event in agent.stream(input)]
        last = events[-1]
        assert isinstance(last, RunFinished)
        return last.result, events

    return run
