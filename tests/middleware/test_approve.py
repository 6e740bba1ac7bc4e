"""`approve`: pauses the calls its matcher selects; approved calls pass on resume."""

from __future__ import annotations

import re
from typing import Any

import pytest

from middleware import approve
from onion import Agent, ToolCall, ToolRequest, tool
from onion.testing import ScriptedModel


@tool
def read(path: str) -> str:
    """Read a file."""
    return f"contents of {path}"


@tool
def delete(path: str) -> str:
    """Delete a file."""
    return f"deleted {path}"


@tool
def delete_all() -> str:
    """Delete every file."""
    return "all gone"


BATCH = [
    ToolRequest("a", "read", {"path": "x"}),
    ToolRequest("b", "delete", {"path": "/tmp/y"}),
    ToolRequest("c", "delete_all", {}),
]


async def paused_ids(layer: Any) -> list[str]:
    agent = Agent(ScriptedModel([BATCH, "done"]), tools=[read, delete, delete_all]).use(layer)
    result = await agent.run("go")
    return [call.id for call in result.pending]


def outside_tmp(call: ToolCall) -> bool:
    return not str(call.args.get("path", "")).startswith("/tmp/")


@pytest.mark.parametrize(
    ("layer", "paused"),
    [
        (approve, ["a", "b", "c"]),
        (approve("delete"), ["b"]),
        (approve(["delete", "delete_all"]), ["b", "c"]),
        (approve(re.compile(r"delete.*")), ["b", "c"]),
        (approve(re.compile(r"del")), []),
        (approve(outside_tmp), ["a", "c"]),
        (approve("delete*"), ["b", "c"]),
        (approve("del?te"), ["b"]),
        (approve(["read", re.compile(r"delete_\w+")]), ["a", "c"]),
    ],
    ids=["bare", "name", "list", "regex", "regex-fullmatch", "function", "glob", "glob-one-character", "mixed-list"],
)
async def test_approve_pauses_the_calls_its_matcher_selects(layer: Any, paused: list[str]) -> None:
    """Bare it pauses every call; a name, glob, list, regex (whole name) or `fn(call)` selects which."""
    assert await paused_ids(layer) == paused


async def test_approve_gives_its_reason_and_lets_approved_calls_through() -> None:
    """`reason` is what `PendingCall.reason` says; on resume the approved call runs through the same layer."""
    agent = Agent(ScriptedModel([BATCH, "done"]), tools=[read, delete, delete_all])
    agent.use(approve("delete", reason="a person must confirm deletes"))
    result = await agent.run("go")
    assert [(p.name, p.reason) for p in result.pending] == [("delete", "a person must confirm deletes")]
    state = result.to_state()
    state.approve("b")
    done = await agent.resume(state)
    assert done.output == "done" and done.messages[3].text == "deleted /tmp/y"


async def test_approve_default_reason_names_the_tool() -> None:
    """Without `reason`, the pending call says the tool needs approval."""
    agent = Agent(ScriptedModel([BATCH]), tools=[read, delete, delete_all]).use(approve("delete_all"))
    assert [p.reason for p in (await agent.run("go")).pending] == ["delete_all needs approval"]


def test_approve_refuses_a_matcher_it_cannot_use() -> None:
    """A matcher that is not a name, list of names, regex or function is a `TypeError` saying what it takes."""
    with pytest.raises(TypeError, match="not a tool name, a list of names, a compiled regex or a function"):
        approve(42)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="must hold tool names"):
        approve(["delete", 3])  # type: ignore[list-item]
    assert repr(approve("delete")) == "<approve('delete')>"
    assert repr(approve(["delete", re.compile("d.*")])) == "<approve(['delete', re.compile('d.*')])>"


async def test_a_run_with_redact_and_limit_pauses_as_json_and_limit_counts_each_call_once() -> None:
    """`redact` keeps its memo out of `run.state` and `limit` keeps JSON counters there, so the run pauses;
    after a resume from JSON, `limit` has counted the call that ran before the pause and the approved call
    once each (a call paused inside it is not counted until it runs)."""
    from middleware import limit, redact
    from onion import RunState

    secret = "sk-ant-api03-" + "x" * 40
    script = [[BATCH[0]], [BATCH[1]], [ToolRequest("d", "read", {"path": "z"})], "unreachable"]
    model = ScriptedModel(script)
    stack = (redact, limit(tool_calls=2, on_limit="finish", final_text="stopped"), approve("delete"))
    agent = Agent(model, tools=[read, delete, delete_all], middleware=stack)
    result = await agent.run(f"my key is {secret}")
    assert result.paused and secret not in model.requests[0].messages[0].text
    state = RunState.from_json(result.to_state().to_json())
    state.approve("b")
    done = await agent.resume(state)
    assert done.messages[4].text == "deleted /tmp/y"
    assert done.messages[-2].text == "Tool call read was blocked: this run reached its limit of 2 tool calls"
    assert done.output == "stopped"


async def test_approve_leaves_calls_of_unknown_tools_to_be_answered_as_unknown() -> None:
    """A call of a tool the agent does not have never runs, so no person is asked: it is answered at once."""
    batch = [ToolRequest("a", "shred", {}), ToolRequest("b", "delete", {"path": "x"})]
    agent = Agent(ScriptedModel([batch, "done"]), tools=[read, delete]).use(approve)
    result = await agent.run("go")
    assert [call.id for call in result.pending] == ["b"]
    state = result.to_state()
    assert state.answered[0].text.startswith("Unknown tool 'shred'")
