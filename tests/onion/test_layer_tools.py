"""Tools that model layers add to `call.tools` run like the agent's own; a tool may answer with a `ToolResult`."""

from __future__ import annotations

from typing import Any

import pytest

from onion import Agent, ModelCall, ModelNext, ModelResponse, ToolCall, ToolNext, ToolResult, tool
from onion.testing import ScriptedModel, call


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
def write_todos(todos: list[str], call: ToolCall) -> str:
    """Replace the run's todo list."""
    call.run.state["todos"] = todos
    return f"{len(todos)} todos written"


async def planning(ctx: ModelCall, call_next: ModelNext) -> ModelResponse:
    """A model layer that offers the model a planning tool the agent does not have."""
    ctx.tools.append(write_todos)
    return await call_next(ctx)


async def test_a_model_layer_adding_write_todos_lets_the_model_call_it() -> None:
    """The call runs through the tool stack and answers like any tool (it used to answer "Unknown tool")."""
    seen: list[str] = []

    async def watch(ctx: ToolCall, call_next: ToolNext) -> ToolResult:
        seen.append(ctx.name)
        return await call_next(ctx)

    model = ScriptedModel([[call("write_todos", todos=["read", "write"]), call("add", a=1, b=2)], "planned"])
    agent = Agent(model, tools=[add]).use(planning, watch)
    result = await agent.run("plan it")
    answers = [(m.text, m.is_error) for m in result.messages if m.role == "tool"]
    assert answers == [("2 todos written", False), ("3", False)]
    assert result.state["todos"] == ["read", "write"]
    assert sorted(seen) == ["add", "write_todos"]
    assert [t.name for t in model.requests[0].tools] == ["add", "write_todos"]


async def test_a_tool_a_layer_replaces_runs_as_the_model_was_offered_it() -> None:
    """The tool is found among the tools offered by the model call that produced the request."""

    @tool(name="add")
    def add_twice(a: int, b: int) -> int:
        return 2 * (a + b)

    async def swap(ctx: ModelCall, call_next: ModelNext) -> ModelResponse:
        ctx.tools = [add_twice if t.name == "add" else t for t in ctx.tools]
        return await call_next(ctx)

    result = await Agent(ScriptedModel([[call("add", a=1, b=2)], "done"]), tools=[add]).use(swap).run("go")
    assert [m.text for m in result.messages if m.role == "tool"] == ["6"]


async def test_a_tool_a_layer_hid_from_the_model_is_still_found_by_name() -> None:
    """Hiding a tool from one model call does not make the agent forget it: tool layers decide about such calls."""

    async def hide(ctx: ModelCall, call_next: ModelNext) -> ModelResponse:
        ctx.tools = []
        return await call_next(ctx)

    result = await Agent(ScriptedModel([[call("add", a=1, b=2)], "done"]), tools=[add]).use(hide).run("go")
    assert [m.text for m in result.messages if m.role == "tool"] == ["3"]


async def test_a_tool_returning_a_tool_result_answers_with_it() -> None:
    """An error result a tool returns itself reaches the model as an error, with the call's id."""

    @tool
    def lookup(key: str) -> ToolResult:
        """Look a key up."""
        return ToolResult(f"no entry for {key}", is_error=True)

    result = await Agent(ScriptedModel([[call("lookup", key="k")], "done"]), tools=[lookup]).run("go")
    answer = next(m for m in result.messages if m.role == "tool")
    assert (answer.text, answer.is_error) == ("no entry for k", True)
    asked = next(m for m in result.messages if m.tool_calls)
    assert answer.tool_call_id == asked.tool_calls[0].id


async def test_a_tool_source_offers_its_tools_beside_the_agents_and_must_list_them() -> None:
    """A `ToolSource` is listed before each model call; one without `list_tools` cannot be made."""
    from onion._tool_sources import ToolSource

    @tool
    def shout(text: str) -> str:
        """Shout."""
        return text.upper()

    class Source(ToolSource):
        async def list_tools(self, run: Any) -> list[Any]:
            return [shout]

    class Broken(ToolSource):
        pass

    with pytest.raises(TypeError, match="abstract"):
        Broken()  # type: ignore[abstract]
    result = await Agent(ScriptedModel([[call("shout", text="hi")], "done"]), tools=[Source()]).run("go")
    assert [m.text for m in result.messages if m.role == "tool"] == ["HI"]
