"""Streaming through the real SDKs: events as they arrive, a full response at the end, layers watching."""

from __future__ import annotations

from typing import Any

import openai.types.responses
import pytest

from onion import (
    Agent,
    Message,
    ModelCall,
    ModelCallFinished,
    ModelResponse,
    TextDelta,
    ToolCallStarted,
    ToolRequest,
    tool,
)
from onion.errors import RateLimitedError, ResponseFormatError
from onion.providers._anthropic_wire import AnthropicStreamReader
from onion.providers._openai_chat_wire import ChatStreamReader
from onion.providers._openai_responses_wire import ResponsesStreamReader
from onion.testing import FakeProviderServer


@tool
def lookup(query: str, limit: int) -> str:
    """Look something up."""
    return f"{limit} results for {query}"


LONG_ARGS = {"query": "the quick brown fox jumps over the lazy dog", "limit": 12345}


async def test_text_and_tool_calls_are_assembled_from_fragments(
    api: str, server: FakeProviderServer, make_model: Any
) -> None:
    """Text first, then two calls whose JSON arguments arrive in 4-character fragments."""
    calls = [ToolRequest("call_x", "lookup", LONG_ARGS), ToolRequest("call_y", "lookup", {"query": "é", "limit": 1})]
    server.script([ModelResponse(Message.assistant("Let me look that up.", calls)), "done"])
    events = [event async for event in Agent(make_model(api), tools=[lookup]).stream("find")]
    responses = [event.response for event in events if isinstance(event, ModelCallFinished)]

    first = responses[0]
    assert first.text == "Let me look that up."
    assert first.tool_calls == calls
    assert first.stop_reason == "tool_use"
    head = events[: events.index(next(e for e in events if isinstance(e, ModelCallFinished)))]
    assert [type(e).__name__ for e in head if not isinstance(e, TextDelta)] == ["ToolCallStarted"] * 2
    assert [(e.id, e.args) for e in head if isinstance(e, ToolCallStarted)] == [(c.id, c.args) for c in calls]
    assert "".join(e.text for e in head if isinstance(e, TextDelta)) == "Let me look that up."
    assert isinstance(head[0], TextDelta)


async def test_layers_observe_the_deltas_of_their_call(api: str, server: FakeProviderServer, make_model: Any) -> None:
    seen: list[Any] = []

    async def watch(call: ModelCall, call_next: Any) -> ModelResponse:
        call.observe(seen.append)
        response: ModelResponse = await call_next(call)
        return response

    server.script([[ToolRequest("call_1", "lookup", {"query": "q", "limit": 1})], "all done here"])
    events = [event async for event in Agent(make_model(api), tools=[lookup], middleware=[watch]).stream("go")]

    assert seen[0] == ToolCallStarted("call_1", "lookup")
    assert "".join(e.text for e in seen if isinstance(e, TextDelta)) == "all done here"
    assert [e for e in seen if isinstance(e, TextDelta)] == [e for e in events if isinstance(e, TextDelta)]
    assert [e for e in events if isinstance(e, ToolCallStarted)] == [
        ToolCallStarted("call_1", "lookup", {"query": "q", "limit": 1})
    ]


async def test_a_short_circuited_call_still_streams_its_text_and_costs_nothing(
    api: str, server: FakeProviderServer, make_model: Any
) -> None:
    """A cache layer answers the second identical call: synthesized events, `cached`, no request sent."""
    store: dict[str, ModelResponse] = {}

    async def cache(call: ModelCall, call_next: Any) -> ModelResponse:
        key = "|".join(message.text for message in call.messages)
        if key in store:
            return ModelResponse(store[key].message, cached=True)
        response: ModelResponse = await call_next(call)
        store[key] = response
        return response

    server.script(["an answer worth keeping"])
    agent = Agent(make_model(api), middleware=[cache])
    live = [event async for event in agent.stream("same question")]
    hit = [event async for event in agent.stream("same question")]

    assert len(server.requests) == 1
    assert sum(isinstance(e, TextDelta) for e in live) > 1
    assert [e.text for e in hit if isinstance(e, TextDelta)] == ["an answer worth keeping"]
    finished = next(e for e in hit if isinstance(e, ModelCallFinished))
    assert finished.cached
    assert finished.usage.requests == 0


async def test_leaving_a_stream_early_leaves_nothing_running(
    api: str, server: FakeProviderServer, make_model: Any
) -> None:
    server.script(["a long answer " * 50])
    stream = Agent(make_model(api)).stream("talk")
    async for event in stream:
        assert isinstance(event, TextDelta)
        break
    await stream.aclose()
    assert len(server.requests) == 1


@pytest.mark.parametrize("reader", [AnthropicStreamReader, ChatStreamReader, ResponsesStreamReader])
def test_a_stream_that_ends_cleanly_without_its_final_event_is_a_malformed_response(reader: Any) -> None:
    """A body that ends cleanly but early (a proxy cut it) is a retryable format error, not a lost connection."""
    with pytest.raises(ResponseFormatError, match="ended cleanly before") as caught:
        reader().finish()
    assert caught.value.retryable


def test_a_failed_responses_stream_raises_the_mapped_error() -> None:
    failed = openai.types.responses.ResponseFailedEvent.construct(
        type="response.failed",
        sequence_number=3,
        response={
            "id": "resp_1",
            "status": "failed",
            "error": {"code": "rate_limit_exceeded", "message": "slow down"},
            "output": [],
        },
    )
    with pytest.raises(RateLimitedError, match="slow down"):
        ResponsesStreamReader().feed(failed)
