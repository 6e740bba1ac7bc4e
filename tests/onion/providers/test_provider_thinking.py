"""The provider-neutral `thinking` setting, and thinking kept across tool turns, through the real SDKs."""

from __future__ import annotations

from typing import Any

import pytest

from onion import Agent, Message, ModelResponse, ToolRequest, tool
from onion.testing import FakeProviderServer
from onion.testing._fake_wire import thinking_signature

from .conftest import ModelFactory

THINKING = "anthropic_thinking"  # where Message.meta keeps Anthropic thinking blocks (docs/providers.md)
REASONING = "openai_reasoning"  # where Message.meta keeps Responses reasoning items (docs/providers.md)


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def thinking_turn(step: int, api: str) -> ModelResponse:
    """An assistant turn that thought (a block or a reasoning item, as the API gives) and then called `add`."""
    message = Message.assistant("", [ToolRequest(f"call_{step}", "add", {"a": step, "b": step})])
    if api == "anthropic":
        message.meta = {THINKING: [{"type": "thinking", "thinking": f"step {step}: add"}]}
    elif api == "openai-responses":
        summary = [{"type": "summary_text", "text": f"step {step}"}]
        message.meta = {REASONING: [{"type": "reasoning", "id": f"rs_{step}", "summary": summary}]}
    return ModelResponse(message)


SENT = {
    "anthropic": ("thinking", {"type": "enabled", "budget_tokens": 4096}),
    "openai": ("reasoning_effort", "medium"),
    "openai-responses": ("reasoning", {"effort": "medium"}),
}


async def test_thinking_on_over_two_tool_turns_sends_each_turns_thinking_back_in_order(
    api: str, server: FakeProviderServer, make_model: ModelFactory
) -> None:
    """`settings={"thinking": 4096}`: Anthropic budgeted thinking, OpenAI a reasoning effort; each later
    request carries every earlier turn's thinking blocks (with their signatures) or reasoning items, in order."""
    server.script([thinking_turn(1, api), thinking_turn(2, api), "4 then 2"])
    result = await Agent(make_model(api), tools=[add], settings={"thinking": 4096}).run("go")
    assert result.output == "4 then 2"
    field, value = SENT[api]
    assert all(request.body[field] == value for request in server.requests)
    last = server.requests[2].body
    if api == "anthropic":
        turns = [entry["content"] for entry in last["messages"] if entry["role"] == "assistant"]
        assert [turn[0] for turn in turns] == [
            {"type": "thinking", "thinking": text, "signature": thinking_signature(text)}
            for text in ("step 1: add", "step 2: add")
        ]
        assert [turn[1]["type"] for turn in turns] == ["tool_use", "tool_use"]
    elif api == "openai-responses":
        kinds = [(item.get("type"), item.get("id") or item.get("call_id")) for item in last["input"][1:]]
        assert kinds == [
            ("reasoning", "rs_1"),
            ("function_call", "call_1"),
            ("function_call_output", "call_1"),
            ("reasoning", "rs_2"),
            ("function_call", "call_2"),
            ("function_call_output", "call_2"),
        ]


@pytest.mark.parametrize(
    ("setting", "anthropic", "effort"),
    [
        (True, {"thinking": {"type": "adaptive"}}, "medium"),
        ("high", {"thinking": {"type": "adaptive"}, "output_config": {"effort": "high"}}, "high"),
        (1024, {"thinking": {"type": "enabled", "budget_tokens": 1024}}, "low"),
        (32000, {"thinking": {"type": "enabled", "budget_tokens": 32000}}, "high"),
    ],
)
async def test_each_thinking_setting_becomes_each_apis_own_field(
    setting: Any, anthropic: dict[str, Any], effort: str, server: FakeProviderServer, make_model: ModelFactory
) -> None:
    server.script(["a", "b", "c"])
    for api in ("anthropic", "openai", "openai-responses"):
        await Agent(make_model(api), settings={"thinking": setting}).run("hi")
    bodies = [request.body for request in server.requests]
    assert {key: bodies[0][key] for key in anthropic} == anthropic
    assert bodies[1]["reasoning_effort"] == effort
    assert bodies[2]["reasoning"] == {"effort": effort}
    assert "thinking" not in bodies[1] and "thinking" not in bodies[2]


async def test_a_thinking_setting_no_api_has_is_refused_before_the_request(
    server: FakeProviderServer, make_model: ModelFactory
) -> None:
    with pytest.raises(ValueError, match=r"settings\['thinking'\]='deep': use True, 'adaptive'"):
        await Agent(make_model("openai"), settings={"thinking": "deep"}).run("hi")
    assert server.requests == []
