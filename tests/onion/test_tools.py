"""Tools: how onion defines them and runs them (threads, awaitables, what a tool raises or returns)."""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Callable
from typing import Any

import pytest

from onion import Agent, Tool, ToolBatch, ToolCall, ToolResult, tool
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


@pytest.mark.parametrize(
    ("define", "name", "suggested"),
    [
        (lambda: tool(name="crm.lookup")(lambda: None), "crm.lookup", "crm_lookup"),
        (lambda: Tool(len, name="files/read"), "files/read", "files_read"),
        (lambda: Tool(len, name="notes search"), "notes search", "notes_search"),
        (lambda: Tool(len, name="x" * 65), "x" * 65, "x" * 64),
        (lambda: Agent(ScriptedModel([]), name="research bot").as_tool(), "research bot", "research_bot"),
    ],
)
def test_a_tool_name_the_providers_refuse_is_a_value_error_naming_the_tool_the_rule_and_a_name_to_use(
    define: Callable[[], Any], name: str, suggested: str
) -> None:
    """Both APIs take tool names matching ^[a-zA-Z0-9_-]{1,64}$ and answer others with a bare 400: refused here."""
    with pytest.raises(ValueError) as raised:
        define()
    message = str(raised.value)
    assert f"tool name {name!r}" in message
    assert "^[a-zA-Z0-9_-]{1,64}$" in message
    assert f"name={suggested!r}" in message


def test_a_function_name_the_providers_refuse_is_refused_when_it_becomes_a_tool() -> None:
    """A function named outside the rule (a non-ASCII identifier) is refused by `@tool` too, suggesting a name."""

    def résumé() -> str:
        return "cv"

    with pytest.raises(ValueError, match=r"tool name 'résumé'.*name='r_sum_'"):
        tool(résumé)


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


class Weather:
    """A class, not a tool."""

    def __init__(self, city: str) -> None:
        self.city = city


class Ring:
    """A callable object without a `__name__`."""

    def __call__(self, number: str) -> str:
        return f"rang {number}"


@pytest.mark.parametrize(
    ("item", "named"),
    [
        (42, "42"),
        (..., "Ellipsis"),
        ("get_weather", "'get_weather'"),
        (Weather, "the class Weather"),
        (Agent(ScriptedModel(["x"]), name="helper"), r"pass agent\.as_tool\(\)"),
        (Ring(), r"Tool\(item\.__call__, name=\.\.\.\)"),
    ],
    ids=["int", "ellipsis", "str", "class", "agent", "callable-object"],
)
def test_a_non_tool_in_tools_is_a_type_error_naming_the_item_and_what_tools_takes(item: object, named: str) -> None:
    """`tools=[42]`, the docs' `tools=[...]` placeholder, a class or an agent: a `TypeError`, not `AttributeError`."""
    with pytest.raises(TypeError, match="tools=") as caught:
        Agent(ScriptedModel(["x"]), tools=[item])  # type: ignore[list-item]
    assert "functions" in str(caught.value)
    assert caught.match(named)


def test_a_callable_object_s_method_named_with_tool_is_a_tool() -> None:
    """What the refusal of a callable object suggests works: `Tool(Ring().__call__, name="ring")`."""
    agent = Agent(ScriptedModel(["x"]), tools=[Tool(Ring().__call__, name="ring")])
    assert [tool.name for tool in agent.tools] == ["ring"]


async def test_lone_surrogates_in_tool_results_are_replaced_before_anything_sees_them() -> None:
    """A result or an error message holding a lone surrogate reaches the history as UTF-8, U+FFFD in its place."""
    script = [[call("list_files"), call("open_file")], "ok"]
    result = await Agent(ScriptedModel(script), tools=[list_files, open_file]).run("x")
    listed, failed = result.messages[-3], result.messages[-2]
    assert listed.text == "notes.txt\nreport-\ufffd.txt" and not listed.is_error
    assert failed.is_error and "no such file: report-\ufffd.txt" in failed.text
    for message in result.messages:
        message.text.encode("utf-8")


async def test_a_result_a_layer_makes_with_a_lone_surrogate_reaches_the_history_replaced() -> None:
    """Results that no tool rendered (a tool layer's, a tools layer's) are made valid UTF-8 too."""

    async def refuse(ctx: ToolCall, call_next: Any) -> Any:
        return ctx.block(listed_name()) if ctx.name == "open_file" else await call_next(ctx)

    async def rename(ctx: ToolBatch, call_next: Any) -> Any:
        results = await call_next(ctx)
        return [ToolResult(f"{result.content} {listed_name()}", call_id=result.call_id) for result in results]

    script = [[call("list_files"), call("open_file")], "ok"]
    result = await Agent(ScriptedModel(script), tools=[list_files, open_file], middleware=[rename, refuse]).run("x")
    listed, refused = result.messages[-3], result.messages[-2]
    assert listed.text == "notes.txt\nreport-\ufffd.txt report-\ufffd.txt"
    assert refused.text == "Tool call open_file was blocked: report-\ufffd.txt report-\ufffd.txt"


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


@tool
def parse_flags(flags: list[str]) -> str:
    """Parse command-line flags."""
    import argparse

    parser = argparse.ArgumentParser(prog="report")
    parser.add_argument("--year", type=int)
    return str(parser.parse_args(flags))


@tool
async def quit_now() -> str:
    """Exit."""
    raise KeyboardInterrupt


async def test_a_tool_that_raises_system_exit_fails_only_its_own_call(capsys: pytest.CaptureFixture[str]) -> None:
    """An argparse error (`SystemExit`) in one run's tool is that call's error result; 10 concurrent runs all end."""

    def agent(index: int) -> Agent:
        flags = ["--bogus"] if index == 3 else ["--year", "2024"]
        script = [
            [call("parse_flags", flags=flags), call("quit_now")] if index == 3 else [call("parse_flags", flags=flags)]
        ]
        return Agent(ScriptedModel([*script, f"run {index} done"]), tools=[parse_flags, quit_now])

    results = await asyncio.gather(*(agent(i).run("x") for i in range(10)))
    assert [result.output for result in results] == [f"run {i} done" for i in range(10)]
    parsed, quit = results[3].messages[-3], results[3].messages[-2]
    assert parsed.is_error and "SystemExit: 2" in parsed.text and "ToolAborted" in parsed.text
    assert quit.is_error and "KeyboardInterrupt" in quit.text
    assert results[0].messages[-2].text == "Namespace(year=2024)"
    assert "unrecognized arguments: --bogus" in capsys.readouterr().err


async def test_an_aborted_tool_is_not_retried() -> None:
    """`ToolAborted` is not retryable: `retry(tools=True)` runs a tool that raised `SystemExit` once."""
    from middleware import retry

    runs: list[int] = []

    @tool
    def leave() -> str:
        """Leave."""
        runs.append(1)
        raise SystemExit(1)

    agent = Agent(ScriptedModel([[call("leave")], "ok"]), tools=[leave]).use(retry(tools=True, initial=0, jitter=0))
    result = await agent.run("x")
    assert runs == [1] and result.messages[-2].is_error


@pytest.mark.parametrize("value", [0, -7, 2**64 + 5, -(10**40), True, False, 1.5, {"n": 3}, [1, 2]])
async def test_a_result_reads_as_the_json_of_what_the_tool_returned(value: Any) -> None:
    """ints (rendered without the serializer), bools, floats, dicts and lists all read as their JSON."""

    @tool
    def give() -> Any:
        """Give the value."""
        return value

    result = await Agent(ScriptedModel([[call("give")], "ok"]), tools=[give]).run("x")
    [answer] = [m.text for m in result.messages if m.role == "tool"]
    assert answer == json.dumps(value, separators=(",", ":"))
