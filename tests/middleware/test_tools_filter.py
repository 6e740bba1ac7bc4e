"""`allow_tools` / `deny_tools`: what the model is offered and what may run."""

from __future__ import annotations

import re

import pytest

from middleware import allow_tools, deny_tools
from onion import Agent, check_history, tool
from onion.testing import ScriptedModel, call

ran: list[str] = []


@tool
def search(query: str) -> str:
    """Search."""
    ran.append("search")
    return "found"


@tool
def read_file(path: str) -> str:
    """Read a file."""
    ran.append("read_file")
    return "contents"


@tool
def delete_file(path: str) -> str:
    """Delete a file."""
    ran.append("delete_file")
    return "deleted"


@tool
def db_query(sql: str) -> str:
    """Query the database."""
    ran.append("db_query")
    return "rows"


TOOLS = [search, read_file, delete_file, db_query]


@pytest.fixture(autouse=True)
def clear_ran() -> None:
    ran.clear()


@pytest.mark.parametrize("layer", [allow_tools, deny_tools])
def test_bare_filter_raises_type_error_asking_for_names(layer: type) -> None:
    with pytest.raises(TypeError, match="needs at least one tool name, glob pattern or compiled regex"):
        Agent(ScriptedModel(["x"])).use(layer)


def test_a_pattern_that_is_neither_str_nor_regex_is_rejected() -> None:
    with pytest.raises(TypeError, match="is not a tool name"):
        deny_tools(42)  # type: ignore[arg-type]


async def test_allow_tools_offers_only_matching_tools() -> None:
    model = ScriptedModel(["ok"])
    await Agent(model, tools=TOOLS).use(allow_tools("search", "read_*")).run("q")
    assert [t.name for t in model.requests[0].tools] == ["search", "read_file"]


async def test_deny_tools_hides_matching_tools_by_glob_and_regex() -> None:
    model = ScriptedModel(["ok"])
    await Agent(model, tools=TOOLS).use(deny_tools("delete_*", re.compile(r"db_\w+"))).run("q")
    assert [t.name for t in model.requests[0].tools] == ["search", "read_file"]


async def test_call_to_a_denied_tool_is_blocked_with_a_reason_and_siblings_run() -> None:
    model = ScriptedModel([[call("delete_file", path="/"), call("search", query="x")], "done"])
    result = await Agent(model, tools=TOOLS).use(deny_tools("delete_file")).run("q")
    blocked, found = (m for m in result.messages if m.role == "tool")
    assert blocked.is_error and "delete_file is denied by policy" in blocked.text
    assert found.text == "found" and not found.is_error
    assert ran == ["search"]
    check_history(result.messages)


async def test_call_to_a_tool_not_allowed_is_blocked_even_if_the_model_names_it() -> None:
    model = ScriptedModel([[call("delete_file", path="/")], "done"])
    result = await Agent(model, tools=TOOLS).use(allow_tools("search")).run("q")
    assert "delete_file is not among the tools allowed here" in result.messages[-2].text
    assert ran == []
    check_history(result.messages)


async def test_custom_reason_is_given_to_the_model() -> None:
    model = ScriptedModel([[call("delete_file", path="/")], "done"])
    result = await Agent(model, tools=TOOLS).use(deny_tools("delete_file", reason="ask a human")).run("q")
    assert result.messages[-2].text.endswith("ask a human")


def test_regex_must_match_the_whole_name() -> None:
    layer = allow_tools(re.compile("read"))
    assert not layer.permits("read_file")
    assert allow_tools(re.compile("read.*")).permits("read_file")


def test_exact_names_are_not_globs_and_globs_are_case_sensitive() -> None:
    layer = deny_tools("search", "Read_*")
    assert not layer.permits("search")
    assert layer.permits("search2")
    assert layer.permits("read_file")


async def test_unchanged_tool_list_is_not_copied_when_everything_is_allowed() -> None:
    model = ScriptedModel(["ok"])
    agent = Agent(model, tools=TOOLS).use(deny_tools("nothing_matches"))
    await agent.run("q")
    assert [t.name for t in model.requests[0].tools] == [t.name for t in TOOLS]


def test_repr_lists_the_patterns() -> None:
    assert repr(deny_tools("a", "b_*", re.compile("c"))) == "deny_tools('a', 'b_*', re.compile('c'))"
