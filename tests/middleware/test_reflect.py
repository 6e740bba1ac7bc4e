"""`reflect`: a reflection prompt after each tool batch, at a safe point."""

from __future__ import annotations

import pytest

from middleware import reflect
from middleware.reflect import DEFAULT_PROMPT
from onion import Agent, ToolBatch, ToolResult, check_history, tool
from onion.testing import ScriptedModel, call


@tool
def search(query: str) -> str:
    """Search."""
    if query == "bad":
        raise ValueError("no such thing")
    return f"results for {query}"


async def test_bare_reflect_injects_the_default_prompt_after_each_batch() -> None:
    model = ScriptedModel([[call("search", query="a"), call("search", query="b")], [call("search", query="c")], "done"])
    result = await Agent(model, tools=[search]).use(reflect).run("q")
    roles = [m.role for m in result.messages]
    assert roles == ["user", "assistant", "tool", "tool", "user", "assistant", "tool", "user", "assistant"]
    assert result.messages[4].text == DEFAULT_PROMPT
    assert model.requests[1].messages[-1].text == DEFAULT_PROMPT
    check_history(result.messages)


async def test_no_reflection_when_the_model_answers_without_tools() -> None:
    result = await Agent(ScriptedModel(["done"]), tools=[search]).use(reflect).run("q")
    assert [m.role for m in result.messages] == ["user", "assistant"]


async def test_prompt_may_be_a_function_of_the_batch_and_its_results() -> None:
    def prompt(batch: ToolBatch, results: list[ToolResult]) -> str | None:
        return None if len(batch.calls) > 1 else f"You got {results[0].content!r}. Think."

    model = ScriptedModel([[call("search", query="a"), call("search", query="b")], [call("search", query="c")], "x"])
    result = await Agent(model, tools=[search]).use(reflect(prompt)).run("q")
    reflections = [m.text for m in result.messages if m.role == "user"][1:]
    assert reflections == ["You got 'results for c'. Think."]
    check_history(result.messages)


async def test_when_errors_reflects_only_after_a_batch_with_an_error() -> None:
    model = ScriptedModel([[call("search", query="a")], [call("search", query="bad")], "x"])
    result = await Agent(model, tools=[search]).use(reflect("What went wrong?", when="errors")).run("q")
    assert [m.text for m in result.messages if m.role == "user"] == ["q", "What went wrong?"]
    assert result.messages[-3].is_error
    check_history(result.messages)


def test_invalid_arguments_are_rejected() -> None:
    with pytest.raises(ValueError, match="when must be"):
        reflect(when="sometimes")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="prompt must be a str or a callable"):
        reflect(42)  # type: ignore[arg-type]
