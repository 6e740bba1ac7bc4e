"""End to end: the middleware library composed as a user would, over the real SDKs and HTTP.

Every test drives the official `anthropic` / `openai` clients (built by
onion, `max_retries=0`) against a local `FakeProviderServer`, through the
recommended stack of `docs/middleware-library.md`, and asserts what the
server received as well as what the caller got. Delays are kept to tens of
milliseconds so the file stays fast.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest

import onion
from middleware import (
    allow_tools,
    budget,
    cache,
    concurrency,
    fallback,
    limit,
    log,
    rate_limit,
    redact,
    retry,
    timeout,
)
from middleware.rate_limit import RateLimitExceeded
from onion import (
    Agent,
    Event,
    Message,
    ModelCallFinished,
    ModelResponse,
    RunFinished,
    RunResult,
    Stack,
    StreamReset,
    TextDelta,
    ToolCallStarted,
    ToolRequest,
    ToolResultEvent,
    Usage,
    tool,
)
from onion.providers import AnthropicModel, OpenAIChatModel, OpenAIResponsesModel
from onion.testing import Delay, DropConnection, FakeProviderServer, HTTPError, call, malformed_call

ProviderModel = AnthropicModel | OpenAIChatModel | OpenAIResponsesModel  # the three public provider models

API_KEY = "sk-ant-api03-Zx8Kq2Lm9Pw4Rt7Yb3Nc"
EMAIL = "alice.doe@example.com"
CARD = "4111 1111 1111 1111"
SECRETS = (API_KEY, EMAIL, CARD)

CLAUDE = "claude-sonnet-4-6"
GPT = "gpt-4o-mini"


# -- fixtures ------------------------------------------------------------------------------------


@pytest.fixture(scope="module", autouse=True)
def _fast_tls(one_ssl_context: None) -> None:
    """Build the TLS context once for this module (see tests/conftest.py)."""


@pytest.fixture
async def models(server: FakeProviderServer) -> AsyncIterator[dict[str, ProviderModel]]:
    """One onion-built client per API, all talking to `server`; closed after the test."""
    made: dict[str, ProviderModel] = {
        "anthropic": AnthropicModel(CLAUDE, base_url=server.url, api_key="test-key"),
        "openai": OpenAIChatModel(GPT, base_url=server.openai_url, api_key="test-key"),
        "openai-responses": OpenAIResponsesModel(GPT, base_url=server.openai_url, api_key="test-key"),
    }
    yield made
    for model in made.values():
        await model.aclose()


# -- tools and helpers ---------------------------------------------------------------------------


@tool
async def get_weather(city: str) -> str:
    """Current weather for a city."""
    await asyncio.sleep(0.01)
    return f"18C and sunny in {city}"


@tool
async def get_time(city: str) -> str:
    """Local time in a city."""
    await asyncio.sleep(0.01)
    return f"12:00 in {city}"


@tool
def delete_everything() -> str:
    """Never offered: `allow_tools` filters it out."""
    raise AssertionError("delete_everything must never run")


def answer(text: str, input_tokens: int = 100, output_tokens: int = 20) -> ModelResponse:
    """A final answer with usage, as the fake server should report it."""
    return ModelResponse(Message.assistant(text), Usage(input_tokens, output_tokens, 1), "end")


def tool_calls(*requests: ToolRequest, input_tokens: int = 80, output_tokens: int = 15) -> ModelResponse:
    return ModelResponse(Message.assistant("", list(requests)), Usage(input_tokens, output_tokens, 1), "tool_use")


def fast_retry(attempts: int = 3) -> retry:
    """`retry` with millisecond backoff (a `retry_after` from the server still wins)."""
    return retry(attempts, initial=0.005, jitter=0.0, max_backoff=0.02)


def recommended_stack(
    *, fallback_to: ProviderModel | None = None, attempts: int = 3, model_timeout: float = 5.0
) -> list[Any]:
    """The recommended order of docs/middleware-library.md, outermost first."""
    layers: list[Any] = [
        redact,
        log,
        limit(model_calls=10),
        budget(max_cost=1.0),
        allow_tools("get_weather", "get_time", "lookup"),
        cache,
    ]
    if fallback_to is not None:
        layers.append(fallback(fallback_to))
    layers += [fast_retry(attempts), concurrency(4), rate_limit(rpm=600, tpm=1_000_000), timeout(model_timeout)]
    return layers


def bodies(server: FakeProviderServer) -> str:
    """Every request body the server received, as one JSON text."""
    return json.dumps([request.body for request in server.requests])


async def collect(agent: Agent, input: str | list[Message]) -> tuple[RunResult, list[Event]]:
    events = [event async for event in agent.stream(input)]
    last = events[-1]
    assert isinstance(last, RunFinished)
    return last.result, events


def text_after_last_reset(events: list[Event]) -> str:
    """The text a display would show for the last model call: deltas since its last `StreamReset`."""
    shown: list[str] = []
    for event in events:
        if isinstance(event, StreamReset | ModelCallFinished):
            shown = []
        elif isinstance(event, TextDelta):
            shown.append(event.text)
    return "".join(shown)


def final_call_text(events: list[Event]) -> str:
    """The text streamed for the last model call (deltas after the last reset before its `ModelCallFinished`)."""
    finished = [i for i, event in enumerate(events) if isinstance(event, ModelCallFinished)]
    start = finished[-2] + 1 if len(finished) > 1 else 0
    return text_after_last_reset(events[start : finished[-1]])


# -- 1. the recommended stack on Anthropic -------------------------------------------------------


async def test_recommended_stack_retries_529_and_429_runs_parallel_tools_caches_and_keeps_secrets_out(
    server: FakeProviderServer, models: dict[str, ProviderModel], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="onion")
    weather = ToolRequest("toolu_01Weather", "get_weather", {"city": "Paris"})
    clock = ToolRequest("toolu_02Time", "get_time", {"city": "Paris"})
    server.script(
        [
            HTTPError(529),
            HTTPError(429, retry_after_ms=20),
            tool_calls(weather, clock),
            answer("Paris: 18C and sunny, 12:00."),
        ]
    )
    agent = Agent(
        models["anthropic"],
        tools=[get_weather, get_time, delete_everything],
        instructions="Be brief.",
        middleware=recommended_stack(),
    )
    question = f"Weather and time in Paris? My key is {API_KEY}, mail {EMAIL}, card {CARD}."

    first = await agent.run(question)

    assert first.output == "Paris: 18C and sunny, 12:00."
    onion.check_history(first.messages)
    assert [r.path for r in server.requests] == ["/v1/messages"] * 4
    assert first.state["retries"] == 2
    assert first.state["cache"] == {"hits": 0, "misses": 2}
    assert first.usage == Usage(180, 35, 2)
    assert first.state["cost"] == pytest.approx((180 * 3.0 + 35 * 15.0) / 1e6)
    # Both tools ran, their results follow their calls in the history and in the next request.
    assert [(m.tool_call_id, m.text) for m in first.messages if m.role == "tool"] == [
        ("toolu_01Weather", "18C and sunny in Paris"),
        ("toolu_02Time", "12:00 in Paris"),
    ]
    last_request = server.requests[-1].body
    assert last_request["messages"][-1] == {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "toolu_01Weather",
                "content": "18C and sunny in Paris",
                "is_error": False,
            },
            {"type": "tool_result", "tool_use_id": "toolu_02Time", "content": "12:00 in Paris", "is_error": False},
        ],
    }
    # allow_tools: the forbidden tool is never offered.
    assert all([t["name"] for t in r.body["tools"]] == ["get_weather", "get_time"] for r in server.requests)

    second = await agent.run(question)

    assert second.output == first.output
    onion.check_history(second.messages)
    assert len(server.requests) == 4, "the second run must be served from the cache"
    assert second.usage == Usage()
    assert second.state["cache"] == {"hits": 2, "misses": 0}
    assert "retries" not in second.state
    assert second.state.get("cost", 0.0) == 0.0

    # Secrets: never on the wire, never in the log.
    sent = bodies(server)
    assert "[REDACTED]" in sent
    for secret in SECRETS:
        assert secret not in sent
        assert secret.replace(" ", "") not in sent
    assert caplog.records, "log must have written records"
    logged = "\n".join(record.getMessage() + " " + str(record.__dict__.get("payload", "")) for record in caplog.records)
    for secret in SECRETS:
        assert secret not in logged, f"{secret!r} leaked into the log"
    outcomes = [(r.__dict__["kind"], r.__dict__["outcome"]) for r in caplog.records]
    assert outcomes.count(("run", "ok")) == 2
    assert outcomes.count(("model", "ok")) == 4
    assert sum(" cached " in r.getMessage() for r in caplog.records) == 2


# -- 2. streaming through the stack on OpenAI Chat and Responses ---------------------------------


@pytest.mark.parametrize("api", ["openai", "openai-responses"])
async def test_streaming_through_the_stack_resets_on_a_dropped_stream_and_streams_tool_calls(
    api: str, server: FakeProviderServer, models: dict[str, ProviderModel]
) -> None:
    weather = ToolRequest("call_w1", "get_weather", {"city": "Oslo"})
    clock = ToolRequest("call_t1", "get_time", {"city": "Oslo"})
    server.script(
        [
            tool_calls(weather, clock),
            DropConnection(partial_text="It is sn"),
            answer("It is snowing in Oslo at noon."),
        ]
    )
    agent = Agent(models[api], tools=[get_weather, get_time], middleware=recommended_stack())

    result, events = await collect(agent, "Oslo?")

    assert result.output == "It is snowing in Oslo at noon."
    onion.check_history(result.messages)
    assert len(server.requests) == 3
    assert all(r.body["stream"] is True for r in server.requests)
    assert result.state["retries"] == 1
    started = [(e.id, e.name) for e in events if isinstance(e, ToolCallStarted)]
    assert started == [("call_w1", "get_weather"), ("call_t1", "get_time")]
    results = {e.call_id: (e.name, e.result.content) for e in events if isinstance(e, ToolResultEvent)}
    assert results == {"call_w1": ("get_weather", "18C and sunny in Oslo"), "call_t1": ("get_time", "12:00 in Oslo")}
    assert sum(isinstance(e, StreamReset) for e in events) == 1
    reset = next(i for i, e in enumerate(events) if isinstance(e, StreamReset))
    assert "".join(e.text for e in events[:reset] if isinstance(e, TextDelta)) == "It is sn"
    assert final_call_text(events) == result.output
    assert sum(isinstance(e, ModelCallFinished) for e in events) == 2
    assert isinstance(events[-1], RunFinished)

    # The same conversation again: both calls are cache hits, streamed as whole events, no request.
    again, replayed = await collect(agent, "Oslo?")
    assert again.output == result.output
    onion.check_history(again.messages)
    assert len(server.requests) == 3
    assert [e.cached for e in replayed if isinstance(e, ModelCallFinished)] == [True, True]
    assert not any(isinstance(e, StreamReset) for e in replayed)
    assert final_call_text(replayed) == again.output
    assert again.usage == Usage()


# -- 3. fallback across providers ----------------------------------------------------------------


@tool
def lookup(q: str) -> str:
    """Look something up."""
    return f"found {q}"


async def test_fallback_from_failing_anthropic_to_openai_keeps_cross_provider_tool_ids_valid(
    server: FakeProviderServer, models: dict[str, ProviderModel]
) -> None:
    from_openai = ToolRequest("call_OpenAI1", "lookup", {"q": "a"})
    from_claude = ToolRequest("toolu_01Claude", "lookup", {"q": "b"})
    server.script(
        [
            HTTPError(500),  # anthropic, attempt 1
            HTTPError(500),  # anthropic, attempt 2
            tool_calls(from_openai),  # openai answers the first model call
            tool_calls(from_claude),  # the second model call starts over at anthropic, which answers
            HTTPError(503),  # the third: anthropic fails twice more
            HTTPError(503),
            answer("a and b found"),  # and openai answers
        ]
    )
    agent = Agent(
        models["anthropic"],
        tools=[lookup],
        instructions="Use lookup.",
        middleware=recommended_stack(fallback_to=models["openai"], attempts=2),
    )

    result = await agent.run("Find a, then b.")

    assert result.output == "a and b found"
    onion.check_history(result.messages)
    assert [r.path for r in server.requests] == [
        "/v1/messages",
        "/v1/messages",
        "/v1/chat/completions",
        "/v1/messages",
        "/v1/messages",
        "/v1/messages",
        "/v1/chat/completions",
    ]
    assert result.state["fallback"] == {"model": GPT, "failed": [CLAUDE]}
    finished = [m for m in result.messages if m.role == "assistant"]
    assert [c.id for m in finished for c in m.tool_calls] == ["call_OpenAI1", "toolu_01Claude"]

    # Anthropic continued OpenAI's call: tool_use with its id, then a user turn opening with its tool_result.
    claude_body = server.requests[3].body
    assert claude_body["system"] == "Use lookup."
    assert claude_body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Find a, then b."}]},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "call_OpenAI1", "name": "lookup", "input": {"q": "a"}}],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "call_OpenAI1", "content": "found a", "is_error": False}
            ],
        },
    ]
    # OpenAI continued both: each assistant tool_calls message is followed by its tool message.
    gpt_body = server.requests[6].body
    assert gpt_body["model"] == GPT
    assert gpt_body["messages"][0] == {"role": "system", "content": "Use lookup."}
    assert gpt_body["messages"][2:] == [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "call_OpenAI1", "type": "function", "function": {"name": "lookup", "arguments": '{"q": "a"}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "call_OpenAI1", "content": "found a"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "toolu_01Claude", "type": "function", "function": {"name": "lookup", "arguments": '{"q": "b"}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "toolu_01Claude", "content": "found b"},
    ]

    # The conversation goes on with the OpenAI Responses API as the primary.
    server.script(["still here"])
    follow_up = Agent(models["openai-responses"], tools=[lookup], middleware=[fast_retry()])
    more = await follow_up.run([*result.messages, Message.user("Still there?")])
    assert more.output == "still here"
    onion.check_history(more.messages)
    items = server.requests[-1].body["input"]
    assert [(i.get("type"), i.get("call_id")) for i in items if i.get("type")] == [
        ("function_call", "call_OpenAI1"),
        ("function_call_output", "call_OpenAI1"),
        ("function_call", "toolu_01Claude"),
        ("function_call_output", "toolu_01Claude"),
    ]


# -- 4. cancellation and per-attempt timeouts ----------------------------------------------------


async def test_cancelling_a_run_during_a_delayed_response_leaves_nothing_behind_and_never_retries(
    server: FakeProviderServer, models: dict[str, ProviderModel], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="onion")
    server.script([Delay(5.0, then="too late"), "never asked for"])
    agent = Agent(models["anthropic"], tools=[get_weather], middleware=recommended_stack())
    before = asyncio.all_tasks()

    task = asyncio.ensure_future(agent.run("slow?"))
    async with asyncio.timeout(10):
        while not server.requests:  # the request reached the server, which holds its answer back
            await asyncio.sleep(0.001)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    assert asyncio.all_tasks() - before == set()  # nothing left that could send a retry later
    assert len(server.requests) == 1
    assert server.remaining == 1
    assert [(r.__dict__["kind"], r.__dict__["outcome"]) for r in caplog.records] == [
        ("model", "cancelled"),
        ("run", "cancelled"),
    ]


async def test_a_timeout_inside_retry_bounds_each_attempt_and_the_retry_succeeds(
    server: FakeProviderServer, models: dict[str, ProviderModel]
) -> None:
    server.script([Delay(5.0, then="too late"), "on time"])
    agent = Agent(models["anthropic"], middleware=recommended_stack(model_timeout=0.1))

    result = await agent.run("quick?")

    assert result.output == "on time"
    onion.check_history(result.messages)
    assert len(server.requests) == 2
    assert result.state["retries"] == 1


# -- 5. malformed tool-call arguments ------------------------------------------------------------


@pytest.mark.parametrize("streamed", [False, True], ids=["run", "stream"])
@pytest.mark.parametrize("api", ["anthropic", "openai", "openai-responses"])
async def test_malformed_tool_arguments_become_an_error_result_in_the_next_request(
    api: str, streamed: bool, server: FakeProviderServer, models: dict[str, ProviderModel]
) -> None:
    broken = '{"city": "Par'
    server.script([[malformed_call("get_weather", broken, id="call_bad1"), call("get_time", city="Paris")], "fixed it"])
    agent = Agent(models[api], tools=[get_weather, get_time], middleware=recommended_stack())

    result = (await collect(agent, "weather?"))[0] if streamed else await agent.run("weather?")

    assert result.output == "fixed it"
    onion.check_history(result.messages)
    assert len(server.requests) == 2
    error = result.messages[-3]
    assert (error.role, error.tool_call_id, error.is_error) == ("tool", "call_bad1", True)
    assert "not valid JSON" in error.text and broken in error.text
    expected = error.text
    body = server.requests[1].body
    if api == "anthropic":
        assistant, results = body["messages"][-2:]
        assert assistant["content"][0] == {"type": "tool_use", "id": "call_bad1", "name": "get_weather", "input": {}}
        assert results["content"][0] == {
            "type": "tool_result",
            "tool_use_id": "call_bad1",
            "content": expected,
            "is_error": True,
        }
        assert results["content"][1]["content"] == "12:00 in Paris"
    elif api == "openai":
        assistant, bad, good = body["messages"][-3:]
        assert assistant["tool_calls"][0]["function"]["arguments"] == broken
        assert bad == {"role": "tool", "tool_call_id": "call_bad1", "content": f"Error: {expected}"}
        assert good["content"] == "12:00 in Paris"
    else:
        bad_call, _good_call, bad, good = body["input"][-4:]
        assert bad_call["arguments"] == broken
        assert bad == {"type": "function_call_output", "call_id": "call_bad1", "output": f"Error: {expected}"}
        assert good["output"] == "12:00 in Paris"


# -- 6. one Stack shared by agents on different providers ----------------------------------------


async def test_a_stack_shared_by_agents_on_two_providers_shares_its_cache_and_rate_limit(
    server: FakeProviderServer, models: dict[str, ProviderModel]
) -> None:
    shared_cache = cache()
    quota = rate_limit(rpm=3, wait=False, key=lambda call: "account")
    policy = Stack(log, shared_cache, quota, name="policy")
    claude = Agent(models["anthropic"], middleware=[policy])
    gpt = Agent(models["openai"], middleware=[policy])
    server.script(["claude says hi", "gpt says hi", "gpt says bye"])

    assert (await claude.run("hi")).output == "claude says hi"
    assert (await gpt.run("hi")).output == "gpt says hi"  # another model: its own cache entry
    hit = await claude.run("hi")
    assert (hit.output, hit.usage) == ("claude says hi", Usage())
    assert (await gpt.run("bye")).output == "gpt says bye"  # the hit used no quota: this is request 3 of 3
    with pytest.raises(RateLimitExceeded) as spent:
        await claude.run("again")  # the account's quota is spent, whichever provider asks
    assert spent.value.key == "account"
    cached = await gpt.run("hi")  # hits pass even with the quota spent
    assert cached.output == "gpt says hi"
    onion.check_history(cached.messages)

    assert [r.path for r in server.requests] == ["/v1/messages", "/v1/chat/completions", "/v1/chat/completions"]
    assert (shared_cache.hits, shared_cache.misses) == (2, 4)


async def test_a_streamed_fallback_resets_the_partial_answer_of_the_failed_provider(
    server: FakeProviderServer, models: dict[str, ProviderModel]
) -> None:
    server.script([DropConnection(partial_text="Hal"), HTTPError(500), answer("Hello from GPT")])
    agent = Agent(models["anthropic"], middleware=recommended_stack(fallback_to=models["openai"], attempts=2))

    result, events = await collect(agent, "hello?")

    assert result.output == "Hello from GPT"
    onion.check_history(result.messages)
    assert [r.path for r in server.requests] == ["/v1/messages", "/v1/messages", "/v1/chat/completions"]
    assert result.state["fallback"] == {"model": GPT, "failed": [CLAUDE]}
    assert sum(isinstance(e, StreamReset) for e in events) == 1
    assert text_after_last_reset(events[:-2]) == result.output
    finished = [e for e in events if isinstance(e, ModelCallFinished)]
    assert [(e.response.model, e.cached) for e in finished] == [(GPT, False)]
