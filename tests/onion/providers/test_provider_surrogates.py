"""Which strings of a model call are read for lone surrogates before its request is built."""

from __future__ import annotations

from typing import Any

import pytest

from onion import Agent, Image, Message, ModelCall, Run, ToolRequest, tool
from onion.providers._surrogates import call_has_surrogate
from onion.testing import ScriptedModel

LONE = "report-\udcff.txt"


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def call_with(
    messages: list[Message], tools: list[Any] | None = None, settings: dict[str, Any] | None = None
) -> ModelCall:
    agent = Agent(ScriptedModel([]))
    return ModelCall(Run(agent, "", messages), messages, tools or [add], agent.model, settings or {})


CLEAN = [
    Message.user("add 1 and 2 é 😀"),
    Message.assistant("", [ToolRequest("call_1", "add", {"a": 1, "b": 2})]),
    Message.tool("call_1", "3"),
]


def test_a_call_without_surrogates_is_clean() -> None:
    """Text, non-ASCII characters included, tool calls, results and tool schemas pass: no body is walked."""
    assert not call_has_surrogate(call_with(list(CLEAN)), "gpt-test")
    assert not call_has_surrogate(call_with(list(CLEAN)), "gpt-test"), "again, with the schema known clean"


@pytest.mark.parametrize(
    "message",
    [
        Message.user(LONE),
        Message.assistant("", [ToolRequest("call_1", "add", {"path": LONE})]),
        Message.assistant("", [ToolRequest("call_1", "add", {LONE: 1})]),
        Message.assistant("", [ToolRequest("call_1", "add", {"a": [{"b": LONE}]})]),
        Message.assistant("", [ToolRequest("call_1", "add", {}, raw_args=LONE)]),
        Message.assistant("", [ToolRequest(LONE, "add", {})]),
        Message.tool(LONE, "3"),
        Message.tool("call_1", LONE),
        Message.user("see", Image(url=f"https://example.com/{LONE}")),
        Message("assistant", "thought", meta={"anthropic_thinking": [{"thinking": LONE}]}),
    ],
)
def test_a_surrogate_anywhere_a_message_carries_text_is_found(message: Message) -> None:
    """Message text, tool-call ids, names and arguments (keys, nested values, raw text), parts and meta."""
    assert call_has_surrogate(call_with([*CLEAN, message]), "gpt-test")


def test_a_surrogate_in_a_tool_settings_or_the_model_name_is_found() -> None:
    """Tool names, descriptions and schemas, the settings and the model's name are read too."""

    @tool(description=LONE)
    def described() -> str:
        return ""

    @tool
    def schema_tool(path: str) -> str:
        return path

    schema_tool.parameters = {"type": "object", "properties": {LONE: {"type": "string"}}}
    assert call_has_surrogate(call_with(list(CLEAN), tools=[described]), "gpt-test")
    assert call_has_surrogate(call_with(list(CLEAN), tools=[schema_tool]), "gpt-test")
    assert call_has_surrogate(call_with(list(CLEAN), settings={"metadata": {"file": LONE}}), "gpt-test")
    assert call_has_surrogate(call_with(list(CLEAN)), f"gpt-{LONE}")


def test_a_literal_backslash_u_d_in_arguments_is_not_a_surrogate() -> None:
    """The quick `repr` check's near miss (a Windows path) is settled by the walk: clean."""
    message = Message.assistant("", [ToolRequest("call_1", "add", {"path": "C:\\udata\\x"})])
    assert not call_has_surrogate(call_with([*CLEAN, message]), "gpt-test")
