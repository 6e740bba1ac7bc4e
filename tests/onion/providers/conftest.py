"""Fixtures: a fake provider server per test, and onion models whose real SDK clients talk to it."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest

from onion import Agent, Event, RunFinished, RunResult
from onion.providers import AnthropicModel, OpenAIChatModel, OpenAIResponsesModel
from onion.providers._provider_model import ProviderModel
from onion.testing import FakeProviderServer

APIS = ["anthropic", "openai", "openai-responses"]


def server_threads() -> list[threading.Thread]:
    """Threads started by a FakeProviderServer (its loop and its per-connection handlers)."""
    return [
        thread
        for thread in threading.enumerate()
        if thread.name == "FakeProviderServer" or "process_request_thread" in thread.name
    ]


@pytest.fixture(scope="module", autouse=True)
def one_ssl_context() -> Iterator[None]:
    """Build the TLS context once per test module (undone after it).

    Each SDK client otherwise spends ~45 ms loading CA certificates that it
    never uses against the plain-HTTP fake server; nothing else changes.
    """
    import functools

    import httpcore2

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(httpcore2, "default_ssl_context", functools.cache(httpcore2.default_ssl_context))
        yield


@pytest.fixture
def server() -> Iterator[FakeProviderServer]:
    """A running server; after the test, no thread of it may be left."""
    with FakeProviderServer() as fake:
        yield fake
    assert server_threads() == []


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
