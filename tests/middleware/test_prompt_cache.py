"""`prompt_cache`: Anthropic breakpoints in the request body, nothing for OpenAI; cache usage reaches the run."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from middleware import budget, prompt_cache
from onion import Agent, Message, ModelResponse, Usage, tool
from onion.providers import AnthropicModel, OpenAIChatModel, OpenAIResponsesModel
from onion.testing import FakeProviderServer, call


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
def sub(a: int, b: int) -> int:
    """Subtract b from a."""
    return a - b


@pytest.fixture
async def anthropic(server: FakeProviderServer) -> AsyncIterator[AnthropicModel]:
    model = AnthropicModel("claude-test", base_url=server.url, api_key="test-key")
    yield model
    await model.aclose()


EPHEMERAL = {"type": "ephemeral"}


async def test_breakpoints_go_on_the_last_tool_the_system_prompt_and_the_latest_two_user_turns(
    server: FakeProviderServer, anthropic: AnthropicModel
) -> None:
    """Four breakpoints at most: tools, system, the previous user turn (a read) and the latest one (a write)."""
    server.script([[call("add", a=1, b=2)], "3"])
    agent = Agent(anthropic, tools=[add, sub], instructions="Be brief.").use(prompt_cache)
    await agent.run("add 1 and 2")
    first = server.requests[0].body
    assert first["system"] == [{"type": "text", "text": "Be brief.", "cache_control": EPHEMERAL}]
    assert "cache_control" not in first["tools"][0]
    assert first["tools"][1]["cache_control"] == EPHEMERAL
    assert first["messages"][0]["content"] == [{"type": "text", "text": "add 1 and 2", "cache_control": EPHEMERAL}]
    second = server.requests[1].body
    marked = [block for entry in second["messages"] for block in entry["content"] if "cache_control" in block]
    assert [block["type"] for block in marked] == ["text", "tool_result"]
    assert second["messages"][1]["content"][-1].get("cache_control") is None
    assert str(second).count("cache_control") == 4


async def test_a_one_hour_ttl_is_sent_and_a_bad_one_refused(
    server: FakeProviderServer, anthropic: AnthropicModel
) -> None:
    server.script(["ok"])
    await Agent(anthropic).use(prompt_cache(ttl="1h")).run("hi")
    assert server.requests[0].body["messages"][0]["content"][0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    with pytest.raises(ValueError, match=r"prompt_cache\(ttl='2h'\): Anthropic caches for '5m' or '1h'"):
        prompt_cache(ttl="2h")


@pytest.mark.parametrize("api", ["openai", "openai-responses"])
async def test_openai_gets_no_cache_field_its_caching_is_automatic(server: FakeProviderServer, api: str) -> None:
    """The request body is the same with and without `prompt_cache`."""
    model_class = OpenAIChatModel if api == "openai" else OpenAIResponsesModel
    model = model_class("gpt-test", base_url=server.openai_url, api_key="test-key")
    server.script(["a", "a"])
    await Agent(model, instructions="Be brief.").run("hi")
    await Agent(model, instructions="Be brief.").use(prompt_cache).run("hi")
    await model.aclose()
    assert server.requests[0].body == server.requests[1].body


async def test_cache_reads_and_writes_from_the_server_reach_run_usage_and_budget(
    server: FakeProviderServer, anthropic: AnthropicModel
) -> None:
    """The server's `cache_creation_input_tokens` / `cache_read_input_tokens` add up in `RunResult.usage`;
    `budget` charges reads at a tenth of the input price and writes at 1.25 times."""
    written = Usage(input_tokens=1_000_000, output_tokens=0, requests=1, cache_write_tokens=900_000)
    read = Usage(input_tokens=1_000_000, output_tokens=0, requests=1, cached_input_tokens=900_000)
    server.script(
        [
            ModelResponse(Message.assistant("", [call("add", a=1, b=2)]), written),
            ModelResponse(Message.assistant("3"), read),
        ]
    )
    limit = budget(max_cost=100, prices={"claude-test": (3.0, 15.0)})
    result = await Agent(anthropic, tools=[add]).use(limit, prompt_cache).run("add")
    assert result.usage == Usage(
        input_tokens=2_000_000, output_tokens=0, requests=2, cached_input_tokens=900_000, cache_write_tokens=900_000
    )
    uncached = 200_000 * 3.0
    assert result.state["cost"] == pytest.approx((uncached + 900_000 * 3.0 * 1.25 + 900_000 * 0.3) / 1_000_000)
