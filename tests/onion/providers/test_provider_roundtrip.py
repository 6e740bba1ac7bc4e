"""A whole agent run through each real SDK and the fake server: the exact bodies the SDK sent.

One run: model call 1 asks for three `add` calls at once, the tools run,
model call 2 answers. Checked for Anthropic Messages, OpenAI Chat
Completions and OpenAI Responses, with `agent.run` and `agent.stream`.
"""

from __future__ import annotations

from typing import Any

from onion import (
    Agent,
    Message,
    ModelCallFinished,
    ModelResponse,
    RunFinished,
    TextDelta,
    ToolCallStarted,
    ToolRequest,
    ToolResultEvent,
    Usage,
    tool,
)
from onion.testing import FakeProviderServer


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


CALLS = [
    ToolRequest(id="call_a", name="add", args={"a": 1, "b": 2}),
    ToolRequest(id="call_b", name="add", args={"a": 3, "b": 4}),
    ToolRequest(id="call_c", name="add", args={"a": 5, "b": 6}),
]
SCRIPT = [
    ModelResponse(Message.assistant("", CALLS), Usage(input_tokens=50, output_tokens=20, cached_input_tokens=10)),
    ModelResponse(Message.assistant("sums: 3,7,11"), Usage(input_tokens=80, output_tokens=5, cached_input_tokens=40)),
]
ARGS = ['{"a": 1, "b": 2}', '{"a": 3, "b": 4}', '{"a": 5, "b": 6}']
RESULTS = ["3", "7", "11"]


def anthropic_bodies() -> tuple[dict[str, Any], dict[str, Any]]:
    first: dict[str, Any] = {
        "model": "claude-test",
        "max_tokens": 4096,
        "system": "Answer with sums.",
        "messages": [{"role": "user", "content": [{"type": "text", "text": "add these"}]}],
        "tools": [{"name": "add", "description": "Add two integers.", "input_schema": add.parameters}],
    }
    assistant = {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": c.id, "name": "add", "input": c.args} for c in CALLS],
    }
    results = {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": c.id, "content": r, "is_error": False}
            for c, r in zip(CALLS, RESULTS, strict=True)
        ],
    }
    return first, {**first, "messages": [*first["messages"], assistant, results]}


def chat_bodies() -> tuple[dict[str, Any], dict[str, Any]]:
    function = {"name": "add", "description": "Add two integers.", "parameters": add.parameters}
    first: dict[str, Any] = {
        "model": "gpt-test",
        "messages": [{"role": "system", "content": "Answer with sums."}, {"role": "user", "content": "add these"}],
        "tools": [{"type": "function", "function": function}],
    }
    assistant = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": c.id, "type": "function", "function": {"name": "add", "arguments": a}}
            for c, a in zip(CALLS, ARGS, strict=True)
        ],
    }
    results = [{"role": "tool", "tool_call_id": c.id, "content": r} for c, r in zip(CALLS, RESULTS, strict=True)]
    return first, {**first, "messages": [*first["messages"], assistant, *results]}


def responses_bodies() -> tuple[dict[str, Any], dict[str, Any]]:
    first: dict[str, Any] = {
        "model": "gpt-test",
        "instructions": "Answer with sums.",
        "input": [{"role": "user", "content": "add these"}],
        "tools": [
            {
                "type": "function",
                "name": "add",
                "description": "Add two integers.",
                "parameters": add.parameters,
                "strict": False,
            }
        ],
    }
    calls = [
        {"type": "function_call", "call_id": c.id, "name": "add", "arguments": arguments}
        for c, arguments in zip(CALLS, ARGS, strict=True)
    ]
    outputs = [
        {"type": "function_call_output", "call_id": c.id, "output": r} for c, r in zip(CALLS, RESULTS, strict=True)
    ]
    return first, {**first, "input": [*first["input"], *calls, *outputs]}


BODIES = {"anthropic": anthropic_bodies, "openai": chat_bodies, "openai-responses": responses_bodies}
PATHS = {"anthropic": "/v1/messages", "openai": "/v1/chat/completions", "openai-responses": "/v1/responses"}


async def test_three_parallel_tool_calls_over_two_model_calls(
    api: str, streamed: bool, server: FakeProviderServer, make_model: Any, run_agent: Any
) -> None:
    """The SDK sends exactly onion's translation: the calls, then every result right after, ids kept."""
    server.script(SCRIPT)
    agent = Agent(make_model(api), tools=[add], instructions="Answer with sums.")

    result, _ = await run_agent(agent, "add these")

    assert result.output == "sums: 3,7,11"
    assert result.usage == Usage(input_tokens=130, output_tokens=25, requests=2, cached_input_tokens=50)
    assert [m.role for m in result.messages] == ["system", "user", "assistant", "tool", "tool", "tool", "assistant"]
    assert [c.id for c in result.messages[2].tool_calls] == ["call_a", "call_b", "call_c"]
    first, second = BODIES[api]()
    if streamed:
        extra: dict[str, Any] = {"stream": True}
        if api == "openai":
            extra["stream_options"] = {"include_usage": True}
        first, second = {**first, **extra}, {**second, **extra}
    assert [request.path for request in server.requests] == [PATHS[api]] * 2
    assert server.requests[0].body == first
    assert server.requests[1].body == second
    assert server.requests[0].headers["authorization"] == "Bearer test-key"


async def test_streamed_run_yields_the_events_in_order(api: str, server: FakeProviderServer, make_model: Any) -> None:
    """Tool calls are announced as they stream in, text arrives in pieces, RunFinished comes last."""
    server.script(SCRIPT)
    agent = Agent(make_model(api), tools=[add], instructions="Answer with sums.")

    events = [event async for event in agent.stream("add these")]

    kinds = [type(event).__name__ for event in events]
    assert kinds[:4] == ["ToolCallStarted"] * 3 + ["ModelCallFinished"]
    assert [e.id for e in events[:3] if isinstance(e, ToolCallStarted)] == ["call_a", "call_b", "call_c"]
    assert sorted(e.call_id for e in events if isinstance(e, ToolResultEvent)) == ["call_a", "call_b", "call_c"]
    deltas = [e.text for e in events if isinstance(e, TextDelta)]
    assert len(deltas) > 1
    assert "".join(deltas) == "sums: 3,7,11"
    finished = [e for e in events if isinstance(e, ModelCallFinished)]
    assert [f.usage for f in finished] == [
        Usage(input_tokens=50, output_tokens=20, requests=1, cached_input_tokens=10),
        Usage(input_tokens=80, output_tokens=5, requests=1, cached_input_tokens=40),
    ]
    assert [f.response.stop_reason for f in finished] == ["tool_use", "end"]
    assert not any(f.cached for f in finished)
    assert isinstance(events[-1], RunFinished)
    assert kinds.count("RunFinished") == 1


async def test_non_streamed_run_does_not_ask_to_stream(api: str, server: FakeProviderServer, make_model: Any) -> None:
    """`agent.run` uses the model's plain request: no `stream` in the body."""
    server.script(["hello"])
    result = await Agent(make_model(api)).run("hi")
    assert result.output == "hello"
    assert "stream" not in server.requests[0].body
