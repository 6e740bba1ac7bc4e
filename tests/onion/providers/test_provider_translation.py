"""Translation between onion's messages and each wire format, in both directions."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import anthropic.types
import openai.types.responses
import pytest

from onion import Agent, Message, ModelCall, ModelResponse, Run, Tool, ToolRequest, Usage, tool
from onion.providers import _anthropic_wire, _openai_chat_wire, _openai_responses_wire
from onion.providers._tool_arguments import tool_request
from onion.testing import FakeProviderServer, ScriptedModel, malformed_call
from onion.testing import call as call_of


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def model_call(
    messages: Sequence[Message], tools: Sequence[Tool] = (), settings: dict[str, Any] | None = None
) -> ModelCall:
    """A `ModelCall` as the agent would make it, for the pure translation functions."""
    agent = Agent(ScriptedModel([]))
    return ModelCall(Run(agent, "", list(messages)), list(messages), list(tools), agent.model, dict(settings or {}))


CALL = ToolRequest(id="call_1", name="add", args={"a": 1, "b": 2})
HISTORY = [
    Message.system("Be brief."),
    Message.user("add 1 and 2"),
    Message.assistant("Adding.", [CALL]),
    Message.tool("call_1", "boom", is_error=True),
    Message.user("(injected) mind the error"),
    Message.system("Later instruction."),
    Message.user("go on"),
]


# -- Anthropic -------------------------------------------------------------------


def test_anthropic_hoists_system_messages_and_merges_same_role_turns() -> None:
    """Results first in the next user turn, then the user text that followed; later system text joins `system`."""
    params = _anthropic_wire.request_params(model_call(HISTORY), "claude-test", 4096)
    assert params["system"] == "Be brief.\n\nLater instruction."
    assert params["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "add 1 and 2"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Adding."},
                {"type": "tool_use", "id": "call_1", "name": "add", "input": {"a": 1, "b": 2}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "call_1", "content": "boom", "is_error": True},
                {"type": "text", "text": "(injected) mind the error"},
                {"type": "text", "text": "go on"},
            ],
        },
    ]


def test_anthropic_requires_max_tokens_and_passes_settings_through() -> None:
    call = model_call([Message.user("hi")], [add], {"temperature": 0.2, "stop_sequences": ["END"]})
    params = _anthropic_wire.request_params(call, "claude-test", 4096)
    assert params["max_tokens"] == 4096
    assert params["temperature"] == 0.2
    assert params["stop_sequences"] == ["END"]
    assert params["tools"] == [{"name": "add", "description": "Add two integers.", "input_schema": add.parameters}]
    capped = model_call([Message.user("hi")], settings={"max_tokens": 50})
    overridden = _anthropic_wire.request_params(capped, "c", 4096)
    assert overridden["max_tokens"] == 50


def test_anthropic_skips_empty_text_blocks() -> None:
    params = _anthropic_wire.request_params(
        model_call([Message.user("hi"), Message.assistant(""), Message.user("again")]), "c", 10
    )
    assert params["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "hi"}, {"type": "text", "text": "again"}]}
    ]


def test_anthropic_thinking_blocks_and_cache_usage_round_trip() -> None:
    """Thinking blocks land in `meta` and go back first in the assistant turn; cache reads and writes count as input."""
    message = anthropic.types.Message.construct(
        id="msg_1",
        type="message",
        role="assistant",
        model="claude-test",
        content=[
            {"type": "thinking", "thinking": "1+2 is 3", "signature": "sig"},
            {"type": "text", "text": "Let me check."},
            {"type": "tool_use", "id": "toolu_1", "name": "add", "input": {"a": 1, "b": 2}},
        ],
        stop_reason="tool_use",
        usage={
            "input_tokens": 5,
            "output_tokens": 9,
            "cache_read_input_tokens": 100,
            "cache_creation_input_tokens": 20,
        },
    )
    response = _anthropic_wire.read_response(message)
    assert response.text == "Let me check."
    assert response.tool_calls == [ToolRequest(id="toolu_1", name="add", args={"a": 1, "b": 2})]
    assert response.stop_reason == "tool_use"
    assert response.usage == Usage(
        input_tokens=125, output_tokens=9, requests=1, cached_input_tokens=100, cache_write_tokens=20
    )
    history = [Message.user("q"), response.message, Message.tool("toolu_1", "3")]
    sent = _anthropic_wire.request_params(model_call(history), "c", 10)["messages"][1]["content"]
    assert sent[0] == {"type": "thinking", "thinking": "1+2 is 3", "signature": "sig"}
    assert [block["type"] for block in sent] == ["thinking", "text", "tool_use"]


# -- OpenAI Chat Completions -----------------------------------------------------


def test_chat_translation_of_a_whole_history() -> None:
    params = _openai_chat_wire.request_params(model_call(HISTORY, settings={"max_tokens": 99}), "gpt-test", "developer")
    assert params["messages"] == [
        {"role": "developer", "content": "Be brief."},
        {"role": "user", "content": "add 1 and 2"},
        {
            "role": "assistant",
            "content": "Adding.",
            "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "add", "arguments": '{"a": 1, "b": 2}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "Error: boom"},
        {"role": "user", "content": "(injected) mind the error"},
        {"role": "developer", "content": "Later instruction."},
        {"role": "user", "content": "go on"},
    ]
    assert params["max_completion_tokens"] == 99
    assert "max_tokens" not in params


# -- OpenAI Responses ------------------------------------------------------------


def test_responses_translation_of_a_whole_history() -> None:
    params = _openai_responses_wire.request_params(model_call(HISTORY, settings={"max_tokens": 99}), "gpt-test")
    assert params["instructions"] == "Be brief."
    assert params["input"] == [
        {"role": "user", "content": "add 1 and 2"},
        {"role": "assistant", "content": "Adding."},
        {"type": "function_call", "call_id": "call_1", "name": "add", "arguments": '{"a": 1, "b": 2}'},
        {"type": "function_call_output", "call_id": "call_1", "output": "Error: boom"},
        {"role": "user", "content": "(injected) mind the error"},
        {"role": "system", "content": "Later instruction."},
        {"role": "user", "content": "go on"},
    ]
    assert params["max_output_tokens"] == 99


def test_responses_reasoning_items_go_back_with_their_turn() -> None:
    response = openai.types.responses.Response.construct(
        id="resp_1",
        model="gpt-test",
        status="completed",
        output=[
            {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "opaque"},
            {"type": "function_call", "id": "fc_1", "call_id": "call_9", "name": "add", "arguments": '{"a":1,"b":2}'},
        ],
        usage={"input_tokens": 30, "output_tokens": 4, "input_tokens_details": {"cached_tokens": 10}},
    )
    read = _openai_responses_wire.read_response(response)
    assert read.tool_calls == [ToolRequest(id="call_9", name="add", args={"a": 1, "b": 2})]
    assert read.stop_reason == "tool_use"
    assert read.usage == Usage(input_tokens=30, output_tokens=4, requests=1, cached_input_tokens=10)
    history = [Message.user("q"), read.message, Message.tool("call_9", "3")]
    sent = _openai_responses_wire.request_params(model_call(history), "gpt-test")["input"]
    assert sent[1] == {"id": "rs_1", "summary": [], "type": "reasoning", "encrypted_content": "opaque"}
    assert [item.get("type") for item in sent[1:]] == ["reasoning", "function_call", "function_call_output"]


# -- Through the real SDKs and the fake server -----------------------------------


async def test_usage_with_cached_tokens_reaches_the_run(
    api: str, server: FakeProviderServer, make_model: Any, run_agent: Any
) -> None:
    """`input_tokens` counts cached tokens too; `cached_input_tokens` says how many; one request per response."""
    usage = Usage(input_tokens=1000, output_tokens=42, cached_input_tokens=600)
    server.script([ModelResponse(Message.assistant("cached"), usage)])
    result, _ = await run_agent(Agent(make_model(api)), "hi")
    assert result.usage == Usage(input_tokens=1000, output_tokens=42, requests=1, cached_input_tokens=600)


STOP_REASONS = {
    "anthropic": ["end", "max_tokens", "stop_sequence"],
    "openai": ["end", "max_tokens", "content_filter"],
    "openai-responses": ["end", "max_tokens", "content_filter"],
}


async def test_stop_reasons_come_back_as_onion_names(
    api: str, server: FakeProviderServer, make_model: Any, run_agent: Any
) -> None:
    """Each API's own stop reason (`end_turn`, `length`, an `incomplete` status, ...) is read back as onion's name."""
    seen: list[str] = []

    async def record(call: ModelCall, call_next: Any) -> ModelResponse:
        response: ModelResponse = await call_next(call)
        seen.append(response.stop_reason)
        return response

    agent = Agent(make_model(api), middleware=[record])
    for stop_reason in STOP_REASONS[api]:
        server.script([ModelResponse(Message.assistant("cut"), stop_reason=stop_reason)])
        result, _ = await run_agent(agent, "hi")
        assert result.output == "cut"
    assert seen == STOP_REASONS[api]


@pytest.mark.parametrize("raw", ['{"a": 1,', "[1, 2]", "not json"])
async def test_malformed_tool_arguments_become_an_error_result_the_model_sees(
    api: str, raw: str, server: FakeProviderServer, make_model: Any, run_agent: Any
) -> None:
    """Never a crash: `args={}` with `raw_args`, answered by an error result that quotes them."""
    server.script([[malformed_call("add", raw, id="call_bad")], "fixed it"])
    result, _ = await run_agent(Agent(make_model(api), tools=[add]), "add")
    assert result.output == "fixed it"
    request = result.messages[1].tool_calls[0]
    assert (request.args, request.raw_args) == ({}, raw)
    assert result.messages[2].is_error
    assert "not valid JSON" in result.messages[2].text
    body = server.requests[1].body
    if api == "anthropic":
        assert body["messages"][1]["content"] == [{"type": "tool_use", "id": "call_bad", "name": "add", "input": {}}]
        assert body["messages"][2]["content"][0]["is_error"] is True
    elif api == "openai":
        assert body["messages"][1]["tool_calls"][0]["function"]["arguments"] == raw
        assert body["messages"][2]["content"].startswith("Error: The arguments for add were not valid JSON")
    else:
        assert body["input"][1]["arguments"] == raw
        assert body["input"][2]["output"].startswith("Error: The arguments for add were not valid JSON")


async def test_settings_reach_the_wire_and_stream_is_onions_to_decide(
    api: str, streamed: bool, server: FakeProviderServer, make_model: Any, run_agent: Any
) -> None:
    server.script(["ok"])
    agent = Agent(make_model(api), settings={"temperature": 0.25, "max_tokens": 77, "stream": not streamed})
    await run_agent(agent, "hi")
    body = server.requests[0].body
    assert body["temperature"] == 0.25
    limit = {"anthropic": "max_tokens", "openai": "max_completion_tokens", "openai-responses": "max_output_tokens"}
    assert body[limit[api]] == 77
    assert body.get("stream", False) is streamed


@tool
def list_reports() -> str:
    """A file name as `os.listdir` gives it for bytes that are not UTF-8 (a lone surrogate)."""
    return "report-\udcff.txt"


async def test_lone_surrogates_are_replaced_before_a_request_leaves_onion(
    api: str, server: FakeProviderServer, make_model: Any, run_agent: Any
) -> None:
    """A lone surrogate in the input or a tool result goes out as U+FFFD; a surrogate pair as its character."""
    server.script([[call_of("list_reports")], "one report"])
    agent = Agent(make_model(api), tools=[list_reports])
    result, _ = await run_agent(agent, "list \udc80 them \ud83d\ude00")
    assert result.output == "one report"
    assert result.messages[0].text == "list \udc80 them \ud83d\ude00", "the history keeps what the user wrote"
    sent = json.dumps([request.body for request in server.requests], ensure_ascii=False)
    assert sent.count("list \ufffd them \U0001f600") == 2
    assert "report-\ufffd.txt" in sent
    assert not any("\ud800" <= char <= "\udfff" for char in sent)


@pytest.mark.parametrize("depth", [101, 3_000])
async def test_tool_arguments_nested_too_deeply_become_an_error_result(
    api: str, depth: int, server: FakeProviderServer, make_model: Any, run_agent: Any
) -> None:
    """Arguments nested over 100 levels (a `RecursionError` to parse, or later to send) are answered as an error."""
    raw = '{"a": ' + "[" * depth + "]" * depth + "}"
    server.script([[malformed_call("add", raw, id="call_deep")], "gave up"])
    result, _ = await run_agent(Agent(make_model(api), tools=[add]), "add")
    assert result.output == "gave up"
    request = result.messages[1].tool_calls[0]
    assert (request.args, request.raw_args) == ({}, raw)
    answer = result.messages[2]
    assert (answer.tool_call_id, answer.is_error) == ("call_deep", True)
    assert len(server.requests) == 2


def test_arguments_nested_100_levels_are_accepted_and_101_refused() -> None:
    """The object counts as a level: `{"a": [[...]]}` with 99 lists is 100 levels."""
    hundred = '{"a": ' + "[" * 99 + "]" * 99 + "}"
    accepted = tool_request("call_1", "add", hundred)
    assert accepted.raw_args is None
    assert accepted.args == json.loads(hundred)
    too_deep = '{"a": ' + "[" * 100 + "]" * 100 + "}"
    assert tool_request("call_2", "add", too_deep).raw_args == too_deep
    assert tool_request("call_3", "add", json.loads(too_deep)).args == {}


def test_brackets_inside_strings_do_not_count_as_nesting() -> None:
    """The depth is read from the text before parsing it: brackets in a string (escaped quotes too) are text."""
    flat = json.dumps({"code": "[" * 500 + '\\"{' * 200, "n": [[1]]})
    assert tool_request("call_1", "add", flat).args == json.loads(flat)
    hidden = '{"a": "\\"", "b": ' + "[" * 100 + "]" * 100 + "}"
    assert tool_request("call_2", "add", hidden).raw_args == hidden
