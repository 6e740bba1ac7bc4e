"""Layers outside the model boundary (retry, cache, log, redact) act on replayed responses as they did on live ones.

Each test runs one stack live against the fake server through a real SDK,
recording, then again from the cassette with the server stopped, and
compares what the layers did.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from middleware import cache, log, redact, retry
from onion import Agent, Message, ModelCall, ModelNext, ModelResponse, RunResult, Usage
from onion.providers import AnthropicModel, OpenAIChatModel, OpenAIResponsesModel
from onion.testing import FakeProviderServer, HTTPError, cassette

ProviderModel = AnthropicModel | OpenAIChatModel | OpenAIResponsesModel  # the three public provider models

APIS = ["anthropic", "openai", "openai-responses"]


@pytest.fixture(scope="module", autouse=True)
def _fast_tls(one_ssl_context: None) -> None:
    """Build the TLS context once for the module (see tests/conftest.py)."""


@pytest.fixture(params=APIS)
def api(request: pytest.FixtureRequest) -> str:
    value: str = request.param
    return value


def build_model(api: str, url: str) -> ProviderModel:
    if api == "anthropic":
        return AnthropicModel("claude-test", base_url=url, api_key="test-key")
    if api == "openai":
        return OpenAIChatModel("gpt-test", base_url=f"{url}/v1", api_key="test-key")
    return OpenAIResponsesModel("gpt-test", base_url=f"{url}/v1", api_key="test-key")


def answer(text: str) -> ModelResponse:
    return ModelResponse(Message.assistant(text), Usage(10, 3, 1))


async def live_then_replayed(
    api: str, path: Path, script: list[Any], layers: Any, questions: list[str]
) -> tuple[list[RunResult], list[RunResult], int]:
    """The runs of `questions` through an agent with `layers()`: live and recorded, then replayed.

    Returns both lists of results and the number of requests the server got (all while recording).
    """
    with FakeProviderServer(script) as server:
        url = server.url
        model = build_model(api, url)
        agent = Agent(model, middleware=layers())
        async with cassette(path):
            live = [await agent.run(question) for question in questions]
        await model.aclose()
        seen = len(server.requests)
    model = build_model(api, url)
    agent = Agent(model, middleware=layers())
    async with cassette(path, mode="replay"):
        replayed = [await agent.run(question) for question in questions]
    await model.aclose()
    return live, replayed, seen


async def test_retry_outside_retries_a_replayed_provider_error_as_it_retried_the_live_one(
    api: str, tmp_path: Path
) -> None:
    """A 429 is recorded with its retry-after: on replay `retry` sees it again, waits as long, and tries again."""
    waits: list[float] = []
    attempts: list[str] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    async def count(call: ModelCall, call_next: ModelNext) -> ModelResponse:
        attempts.append("attempt")
        return await call_next(call)

    live, replayed, seen = await live_then_replayed(
        api,
        tmp_path / "retry.json",
        [HTTPError(429, retry_after=3), answer("after one retry")],
        lambda: [retry(sleep=sleep), count],
        ["hi"],
    )
    assert seen == 2
    assert [r.output for r in replayed] == [r.output for r in live] == ["after one retry"]
    assert waits == [3.0, 3.0] and len(attempts) == 4
    assert replayed[0].state.get("retries") == live[0].state.get("retries") == 1
    assert replayed[0].usage == live[0].usage


async def test_cache_outside_serves_a_repeated_question_on_replay_as_it_did_live(api: str, tmp_path: Path) -> None:
    """The second identical run is a cache hit, live and replayed: the cassette holds one call and answers it once."""
    live, replayed, seen = await live_then_replayed(
        api, tmp_path / "cache.json", [answer("cached answer")], lambda: [cache()], ["same question", "same question"]
    )
    assert seen == 1
    assert [r.output for r in replayed] == [r.output for r in live] == ["cached answer", "cached answer"]
    assert [r.usage for r in replayed] == [r.usage for r in live]
    assert replayed[1].usage == Usage()


async def test_log_outside_logs_the_same_records_on_replay_as_live(
    api: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Kind, outcome, token counts and payloads of every record are the same for the live and the replayed run."""
    logger = logging.getLogger("onion.cassette-test")

    def records() -> list[tuple[Any, ...]]:
        fields = ("kind", "what", "outcome", "input_tokens", "output_tokens", "payload")
        kept = [tuple(getattr(r, name, None) for name in fields) for r in caplog.records if r.name == logger.name]
        caplog.clear()
        return kept

    with caplog.at_level(logging.INFO, logger=logger.name):
        with FakeProviderServer([answer("logged answer")]) as server:
            url = server.url
            model = build_model(api, url)
            async with cassette(tmp_path / "log.json"):
                await Agent(model, middleware=[log(logger)]).run("log me")
            await model.aclose()
        live = records()
        model = build_model(api, url)
        async with cassette(tmp_path / "log.json", mode="replay"):
            await Agent(model, middleware=[log(logger)]).run("log me")
        await model.aclose()
        replayed = records()
    assert [r[0] for r in live] == ["model", "run"]
    assert replayed == live


async def test_redact_outside_sends_the_model_the_redacted_request_live_and_matches_it_on_replay(
    api: str, tmp_path: Path
) -> None:
    """What redact hides never reaches the model or the file; the replayed request, redacted alike, matches."""
    path = tmp_path / "redact.json"
    live, replayed, seen = await live_then_replayed(
        api, path, [answer("noted")], lambda: [redact()], ["write to ann.smith@example.com please"]
    )
    assert seen == 1
    assert [r.output for r in replayed] == [r.output for r in live] == ["noted"]
    text = path.read_text()
    assert "ann.smith@example.com" not in text and "write to [REDACTED] please" in text
