"""Content beyond text on streamed runs, through the real SDKs: images in, thinking and reasoning kept.

`agent.stream` must send and keep exactly what `agent.run` does: the same request bodies, the same
signed thinking blocks and reasoning items carried across tool turns, the same messages at the end.
"""

from __future__ import annotations

from typing import Any

from onion import Agent, Image, Message, ModelResponse, RunFinished, RunResult, TextDelta, ToolRequest, tool
from onion.testing import FakeProviderServer
from onion.testing._fake_wire import thinking_signature

from .conftest import ModelFactory
from .test_provider_content import IMAGE_IN_USER, PNG, first_user_content, screenshot

THINKING = "anthropic_thinking"  # where Message.meta keeps Anthropic thinking blocks (docs/providers.md)
REASONING = "openai_reasoning"  # where Message.meta keeps Responses reasoning items (docs/providers.md)


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


async def streamed(agent: Agent, input: str | Message) -> tuple[RunResult, str]:
    """The result of `agent.stream(input)` and the text its consumer was shown."""
    shown: list[str] = []
    result = None
    async for event in agent.stream(input):
        if isinstance(event, TextDelta):
            shown.append(event.text)
        elif isinstance(event, RunFinished):
            result = event.result
    assert result is not None
    return result, "".join(shown)


async def test_an_image_in_the_input_of_a_streamed_run_is_sent_as_in_run(
    api: str, server: FakeProviderServer, make_model: ModelFactory
) -> None:
    server.script(["a cat"])
    message = Message.user(
        "what is this?", Image(data=PNG, media_type="image/png"), Image.from_url("https://example.com/cat.png")
    )
    result, shown = await streamed(Agent(make_model(api)), message)
    assert (result.output, shown) == ("a cat", "a cat")
    body = server.requests[0].body
    assert body["stream"] is True
    assert first_user_content(api, body) == IMAGE_IN_USER[api]
    assert result.messages[0].parts == message.parts


async def test_a_tool_image_in_a_streamed_run_reaches_the_next_request_as_in_run(
    api: str, server: FakeProviderServer, make_model: ModelFactory
) -> None:
    """The same two request bodies, streamed or not (bar `stream` and the stream options)."""
    bodies = []
    for stream in (False, True):
        server.requests.clear()
        server.script([[ToolRequest("call_shot", "screenshot", {})], "a desktop"])
        agent = Agent(make_model(api), tools=[screenshot])
        result = (await streamed(agent, "look"))[0] if stream else await agent.run("look")
        assert result.output == "a desktop"
        assert result.messages[2].parts == [Image(data=PNG, media_type="image/png")]
        bodies.append([without_stream_fields(request.body) for request in server.requests])
    assert bodies[0] == bodies[1]


def without_stream_fields(body: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in body.items() if key not in ("stream", "stream_options")}


def thinking_turn(step: int, api: str, text: str = "") -> ModelResponse:
    """A turn that thought twice (Anthropic: a thinking block and a redacted one; Responses: two reasoning
    items, one with encrypted content), said `text` and called `add`."""
    message = Message.assistant(text, [ToolRequest(f"call_{step}", "add", {"a": step, "b": step})])
    if api == "anthropic":
        message.meta = {
            THINKING: [
                {"type": "thinking", "thinking": f"step {step}: I should add {step} and {step}, carefully."},
                {"type": "redacted_thinking", "data": f"opaque-{step}"},
            ]
        }
    else:
        summary = [{"type": "summary_text", "text": f"step {step}: adding"}]
        message.meta = {
            REASONING: [
                {"type": "reasoning", "id": f"rs_{step}a", "summary": summary},
                {"type": "reasoning", "id": f"rs_{step}b", "summary": [], "encrypted_content": f"enc-{step}"},
            ]
        }
    return ModelResponse(message)


async def test_thinking_blocks_stream_in_and_go_back_signed_in_order_over_two_tool_turns(
    server: FakeProviderServer, make_model: ModelFactory
) -> None:
    """Anthropic, streamed: thinking deltas and the signature delta make whole signed blocks (the server checks
    each signature it gets back), a redacted block comes back as it came, and none of it is shown as text."""
    server.script([thinking_turn(1, "anthropic", "Let me add."), thinking_turn(2, "anthropic"), "4 then 2"])
    agent = Agent(make_model("anthropic"), tools=[add], settings={"thinking": 4096})
    result, shown = await streamed(agent, "go")
    assert (result.output, shown) == ("4 then 2", "Let me add.4 then 2")
    assert [request.body["stream"] for request in server.requests] == [True] * 3
    turns = [entry["content"] for entry in server.requests[2].body["messages"] if entry["role"] == "assistant"]
    assert [turn[:2] for turn in turns] == [
        [
            {"type": "thinking", "thinking": text, "signature": thinking_signature(text)},
            {"type": "redacted_thinking", "data": f"opaque-{step}"},
        ]
        for step, text in (
            (1, "step 1: I should add 1 and 1, carefully."),
            (2, "step 2: I should add 2 and 2, carefully."),
        )
    ]
    assert [block["type"] for block in turns[0][2:]] == ["text", "tool_use"]


async def test_reasoning_items_stream_in_and_go_back_in_order_over_two_tool_turns(
    server: FakeProviderServer, make_model: ModelFactory
) -> None:
    """OpenAI Responses, streamed: each turn's reasoning items (summary and encrypted content) go back before
    its calls, in order."""
    server.script([thinking_turn(1, "openai-responses"), thinking_turn(2, "openai-responses"), "4 then 2"])
    agent = Agent(make_model("openai-responses"), tools=[add], settings={"thinking": 4096})
    result, shown = await streamed(agent, "go")
    assert (result.output, shown) == ("4 then 2", "4 then 2")
    sent = server.requests[2].body["input"][1:]
    assert [(item.get("type"), item.get("id") or item.get("call_id")) for item in sent] == [
        ("reasoning", "rs_1a"),
        ("reasoning", "rs_1b"),
        ("function_call", "call_1"),
        ("function_call_output", "call_1"),
        ("reasoning", "rs_2a"),
        ("reasoning", "rs_2b"),
        ("function_call", "call_2"),
        ("function_call_output", "call_2"),
    ]
    assert sent[0]["summary"] == [{"type": "summary_text", "text": "step 1: adding"}]
    assert sent[1]["encrypted_content"] == "enc-1"


async def test_a_streamed_run_keeps_the_same_thinking_as_run(
    server: FakeProviderServer, make_model: ModelFactory
) -> None:
    """Streamed or not, the run ends with equal messages, thinking blocks and reasoning items included."""
    for api in ("anthropic", "openai-responses"):
        ends = []
        for stream in (False, True):
            server.script([thinking_turn(1, api, "Adding."), "2"])
            agent = Agent(make_model(api), tools=[add], settings={"thinking": True})
            result = (await streamed(agent, "go"))[0] if stream else await agent.run("go")
            ends.append([message.to_dict() for message in result.messages])
        assert ends[0] == ends[1]
        kept = ends[1][1]["meta"]
        if api == "anthropic":
            thought = "step 1: I should add 1 and 1, carefully."
            assert kept[THINKING][0] == {
                "type": "thinking",
                "thinking": thought,
                "signature": thinking_signature(thought),
            }
            assert kept[THINKING][1] == {"type": "redacted_thinking", "data": "opaque-1"}
        else:
            assert kept == thinking_turn(1, api).message.meta
