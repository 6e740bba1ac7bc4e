"""Tools: how onion defines them and runs them (threads, awaitables, what a tool raises or returns)."""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Callable
from typing import Any

import pytest

from onion import Agent, tool
from onion.testing import FakeProviderServer, ScriptedModel, call


async def test_a_sync_wrapper_around_an_async_tool_is_awaited() -> None:
    """A `functools.wraps` sync wrapper returning a coroutine: the coroutine runs, the model reads its value."""
    ran: list[str] = []

    def logged(function: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(function)
        def wrapper(**kwargs: Any) -> Any:
            return function(**kwargs)

        return wrapper

    @tool
    @logged
    async def greet(name: str) -> str:
        """Greet someone."""
        await asyncio.sleep(0)
        ran.append(name)
        return f"hello {name}"

    result = await Agent(ScriptedModel([[call("greet", name="ada")], "ok"]), tools=[greet]).run("x")
    assert ran == ["ada"]
    assert result.messages[-2].text == "hello ada" and not result.messages[-2].is_error


def test_a_positional_only_parameter_is_refused_when_the_tool_is_defined() -> None:
    """Tools are called with keyword arguments: a parameter before `/` is a TypeError naming tool and parameter."""

    def square(x: int, /) -> int:
        return x * x

    with pytest.raises(TypeError, match=r"tool square: the parameter 'x' is positional-only"):
        tool(square)


def listed_name() -> str:
    """A file name as `os.listdir` gives it when its bytes are not UTF-8: a lone surrogate."""
    return b"report-\xff.txt".decode("utf-8", "surrogateescape")


@tool
def list_files() -> str:
    """List the files."""
    return "\n".join(["notes.txt", listed_name()])


@tool
def open_file() -> str:
    """Open the file."""
    raise FileNotFoundError(f"no such file: {listed_name()}")


async def test_lone_surrogates_in_tool_results_are_replaced_before_anything_sees_them() -> None:
    """A result or an error message holding a lone surrogate reaches the history as UTF-8, U+FFFD in its place."""
    script = [[call("list_files"), call("open_file")], "ok"]
    result = await Agent(ScriptedModel(script), tools=[list_files, open_file]).run("x")
    listed, failed = result.messages[-3], result.messages[-2]
    assert listed.text == "notes.txt\nreport-\ufffd.txt" and not listed.is_error
    assert failed.is_error and "no such file: report-\ufffd.txt" in failed.text
    for message in result.messages:
        message.text.encode("utf-8")


@pytest.mark.parametrize("api", ["anthropic", "openai", "openai-responses"])
async def test_a_tool_result_with_a_lone_surrogate_goes_through_the_real_sdks(
    api: str, server: FakeProviderServer, one_ssl_context: None
) -> None:
    """The SDK sends the replaced text: the run ends with the model's answer, not a UnicodeEncodeError."""
    from onion.providers import AnthropicModel, OpenAIChatModel, OpenAIResponsesModel

    server.script([[call("list_files")], "one file"])
    model: Any
    if api == "anthropic":
        model = AnthropicModel("claude-test", base_url=server.url, api_key="test-key")
    elif api == "openai":
        model = OpenAIChatModel("gpt-test", base_url=server.openai_url, api_key="test-key")
    else:
        model = OpenAIResponsesModel("gpt-test", base_url=server.openai_url, api_key="test-key")
    try:
        result = await Agent(model, tools=[list_files]).run("x")
    finally:
        await model.aclose()
    assert result.output == "one file"
    assert "report-\ufffd.txt" in json.dumps(server.requests[1].body, ensure_ascii=False)
