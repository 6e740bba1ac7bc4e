"""Pause, approve, resume: `ctx.pause`, `hooks.Pause`, `RunResult.to_state`, `agent.resume`."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from onion import (
    Agent,
    Handler,
    Message,
    Run,
    RunFinished,
    RunPaused,
    RunResult,
    RunState,
    RunStateError,
    ToolBatch,
    ToolCall,
    ToolRequest,
    ToolResult,
    ToolResultEvent,
    check_history,
    tool,
)
from onion.hooks import Pause, before_each_tool, before_tools
from onion.testing import ScriptedModel


class Tools:
    """Tools that record each run, in order, and can be held until the test lets them go."""

    def __init__(self) -> None:
        self.ran: list[tuple[str, str]] = []

        @tool
        async def read(path: str) -> str:
            """Read a file."""
            self.ran.append(("read", path))
            return f"contents of {path}"

        @tool
        async def delete(path: str) -> str:
            """Delete a file."""
            self.ran.append(("delete", path))
            return f"deleted {path}"

        self.read, self.delete = read, delete

    def agent(self, model: ScriptedModel, *middleware: Any, **options: Any) -> Agent:
        return Agent(model, tools=[self.read, self.delete], middleware=middleware, name="tidy", **options)


def req(id: str, name: str, path: str) -> ToolRequest:
    return ToolRequest(id, name, {"path": path})


async def pause_deletes(ctx: ToolCall, call_next: Handler) -> ToolResult:
    if ctx.name == "delete" and not ctx.approved:
        return ctx.pause(f"delete {ctx.args['path']}?")
    result: ToolResult = await call_next(ctx)
    return result


BATCH = [req("a", "read", "1"), req("b", "delete", "2"), req("c", "read", "3")]


async def test_a_batch_of_three_with_one_paused_runs_two_before_the_pause_and_one_after() -> None:
    """Siblings of a paused call run at once; the paused one runs on resume; results keep call order."""
    tools = Tools()
    model = ScriptedModel([BATCH, "done"])
    agent = tools.agent(model, pause_deletes)
    result = await agent.run("tidy")
    assert result.status == "paused" and result.paused and result.output == ""
    assert [(p.id, p.name, p.args, p.reason) for p in result.pending] == [("b", "delete", {"path": "2"}, "delete 2?")]
    assert sorted(tools.ran) == [("read", "1"), ("read", "3")]
    assert result.messages[-1].tool_calls == BATCH and len(model.requests) == 1

    state = result.to_state()
    state.approve("b")
    done = await agent.resume(state)
    assert done.status == "completed" and done.output == "done" and done.pending == []
    assert tools.ran[2:] == [("delete", "2")]
    sent = model.requests[1].messages
    check_history(sent)
    assert [(m.tool_call_id, m.text) for m in sent[2:]] == [
        ("a", "contents of 1"),
        ("b", "deleted 2"),
        ("c", "contents of 3"),
    ]


async def test_rejected_calls_never_run_and_the_model_reads_the_reason_edited_ones_run_with_new_args() -> None:
    """A rejection answers with an error carrying the reason; an edit runs the tool with the new arguments."""
    tools = Tools()
    model = ScriptedModel([[req("a", "delete", "1"), req("b", "delete", "2"), req("c", "delete", "3")], "ok"])
    agent = tools.agent(model, pause_deletes)
    state = RunState.from_json((await agent.run("tidy")).to_state().to_json())
    state.approve("a")
    state.reject("b", reason="keep file 2")
    state.edit("c", {"path": "3.bak"})
    await agent.resume(state)
    assert tools.ran == [("delete", "1"), ("delete", "3.bak")]
    answers = model.requests[1].messages[2:]
    assert answers[1] == Message.tool("b", "Tool call delete was rejected: keep file 2", is_error=True)
    assert answers[2].text == "deleted 3.bak"


async def test_resumed_calls_go_through_the_whole_tool_stack_marked_approved() -> None:
    """On resume the tools layers see a batch of the approved calls, and each tool layer sees `ctx.approved`."""
    tools = Tools()
    seen: list[tuple[str, Any]] = []

    async def batches(ctx: ToolBatch, call_next: Handler) -> list[ToolResult]:
        seen.append(("batch", [call.id for call in ctx.calls]))
        results: list[ToolResult] = await call_next(ctx)
        return results

    async def calls(ctx: ToolCall, call_next: Handler) -> ToolResult:
        seen.append((ctx.id, ctx.approved))
        result: ToolResult = await call_next(ctx)
        return result

    agent = tools.agent(ScriptedModel([BATCH, "done"]), batches, calls, pause_deletes, parallel_tools=False)
    state = (await agent.run("tidy")).to_state()
    state.approve_all()
    await agent.resume(state)
    assert seen == [
        ("batch", ["a", "b", "c"]),
        ("a", False),
        ("b", False),
        ("c", False),
        ("batch", ["b"]),
        ("b", True),
    ]


async def test_hooks_pause_each_tool_and_whole_batches_and_let_approved_calls_through() -> None:
    """`Pause` from `before_each_tool` pauses matching calls; from `before_tools`, every call of the batch."""
    tools = Tools()
    each = before_each_tool("delete")(lambda call: Pause("deleting needs a person"))
    agent = tools.agent(ScriptedModel([BATCH, "done"]), each)
    result = await agent.run("tidy")
    assert [(p.id, p.reason) for p in result.pending] == [("b", "deleting needs a person")]
    state = result.to_state()
    state.approve_all()
    assert (await agent.resume(state)).output == "done"

    tools = Tools()
    whole = before_tools(lambda batch: Pause("batches need a person"))
    agent = tools.agent(ScriptedModel([BATCH, "done"]), whole)
    result = await agent.run("tidy")
    assert [p.id for p in result.pending] == ["a", "b", "c"] and tools.ran == []
    state = result.to_state()
    state.approve("a")
    state.reject("b")
    state.approve("c")
    assert (await agent.resume(state)).output == "done"
    assert tools.ran == [("read", "1"), ("read", "3")]


async def test_a_resumed_run_can_pause_again_and_keeps_steps_usage_state_and_name() -> None:
    """The second batch pauses the resumed run again; steps, usage, `run.state` and the run id carry on."""
    tools = Tools()
    model = ScriptedModel([[req("a", "delete", "1")], [req("b", "delete", "2")], "done"])

    async def count(ctx: ToolCall, call_next: Handler) -> ToolResult:
        ctx.run.state["calls"] = ctx.run.state.get("calls", 0) + 1
        result: ToolResult = await call_next(ctx)
        return result

    agent = tools.agent(model, count, pause_deletes, max_steps=3)
    first = await agent.run("tidy", state={"user": "ann"})
    state = RunState.from_json(first.to_state().to_json())
    assert (state.agent, state.steps, state.usage.requests, state.state) == ("tidy", 1, 1, {"user": "ann", "calls": 1})
    state.approve("a")
    second = await agent.resume(state)
    assert second.paused and second.run_id == first.run_id and [p.id for p in second.pending] == ["b"]
    state = RunState.from_json(second.to_state().to_json())
    assert (state.steps, state.usage.requests, state.state["calls"]) == (2, 2, 3)
    state.approve("b")
    done = await agent.resume(state)
    assert done.output == "done" and done.usage.requests == 3 and done.state == {"user": "ann", "calls": 4}
    check_history(done.messages)


async def test_max_steps_counts_the_steps_before_the_pause() -> None:
    """A resumed run may make only the model calls its `max_steps` has left."""
    tools = Tools()
    agent = tools.agent(ScriptedModel([[req("a", "delete", "1")], [req("b", "read", "2")], "x"]), pause_deletes)
    agent.max_steps = 2
    state = (await agent.run("tidy")).to_state()
    state.approve_all()
    from onion import MaxStepsExceeded

    with pytest.raises(MaxStepsExceeded):
        await agent.resume(state)


async def test_messages_injected_before_the_pause_land_after_the_batch_on_resume() -> None:
    """An injection queued in the paused batch is saved and lands at the safe point after its results."""
    tools = Tools()
    model = ScriptedModel([BATCH, "done"])

    async def note(ctx: ToolCall, call_next: Handler) -> ToolResult:
        if not ctx.approved and ctx.id == "a":
            ctx.run.inject("remember the backup")
        result: ToolResult = await call_next(ctx)
        return result

    agent = tools.agent(model, note, pause_deletes)
    result = await agent.run("tidy")
    assert result.messages[-1].role == "assistant"
    state = RunState.from_json(result.to_state().to_json())
    assert state.injected == [Message.user("remember the backup")]
    state.approve_all()
    await agent.resume(state)
    sent = model.requests[1].messages
    assert [m.role for m in sent[-4:]] == ["tool", "tool", "tool", "user"] and sent[-1].text == "remember the backup"


async def test_stream_ends_a_paused_run_with_run_paused_carrying_the_state() -> None:
    """`agent.stream` ends with `RunPaused` (a `RunFinished`) holding the result and its state."""
    tools = Tools()
    agent = tools.agent(ScriptedModel([BATCH, "done"]), pause_deletes)
    events = [event async for event in agent.stream("tidy")]
    last = events[-1]
    assert isinstance(last, RunPaused) and isinstance(last, RunFinished) and last.result.paused
    assert [p.id for p in last.state.pending] == ["b"] and last.state.paused
    assert sorted(e.call_id for e in events if isinstance(e, ToolResultEvent)) == ["a", "c"]
    last.state.approve("b")
    assert (await agent.resume(last.state)).output == "done"


async def test_resume_with_an_undecided_call_is_a_clear_error() -> None:
    """Resuming before every pending call is decided raises `RunStateError` naming the calls and what to do."""
    tools = Tools()
    agent = tools.agent(ScriptedModel([[req("a", "delete", "1"), req("b", "delete", "2")], "done"]), pause_deletes)
    state = (await agent.run("tidy")).to_state()
    state.approve("a")
    with pytest.raises(RunStateError, match=r"undecided pending calls: b \(delete\).*state.approve\(id\)"):
        await agent.resume(state)
    assert tools.ran == []


async def test_resuming_a_completed_run_is_a_clear_error() -> None:
    """A completed run's state says there is nothing to resume."""
    tools = Tools()
    agent = tools.agent(ScriptedModel(["hello"]))
    result = await agent.run("hi")
    assert result.status == "completed" and not result.paused and result.pending == []
    state = RunState.from_json(result.to_state().to_json())
    assert state.status == "completed" and state.output == "hello"
    with pytest.raises(RunStateError, match="is completed: there is nothing to resume"):
        await agent.resume(state)


async def test_resuming_on_an_agent_without_the_tools_is_a_clear_error() -> None:
    """Approved calls of a tool the resuming agent lacks raise `RunStateError` naming the tool; rejecting them works."""
    tools = Tools()
    state = (await tools.agent(ScriptedModel([BATCH]), pause_deletes).run("tidy")).to_state()
    state.approve("b")
    model = ScriptedModel(["done"])
    other = Agent(model, tools=[tools.read], name="reader")
    with pytest.raises(RunStateError, match=r"tool\(s\) delete that agent reader does not have \(its tools: read\)"):
        await other.resume(state)
    state.reject("b", reason="cannot delete here")
    assert (await other.resume(state)).output == "done"


async def test_a_state_that_does_not_fit_together_is_refused() -> None:
    """A pending call that the last assistant message did not ask for is a `RunStateError`."""
    tools = Tools()
    state = (await tools.agent(ScriptedModel([BATCH]), pause_deletes).run("tidy")).to_state()
    state.approve("b")
    state.messages = state.messages[:-1]
    with pytest.raises(RunStateError, match="do not fit together"):
        await tools.agent(ScriptedModel([])).resume(state)
    with pytest.raises(TypeError, match=r"RunState\.from_json"):
        await tools.agent(ScriptedModel([])).resume(state.to_json())  # type: ignore[arg-type]


async def test_a_pause_with_a_state_value_that_is_not_json_names_the_key() -> None:
    """`run.state` holding a non-JSON value makes the pause raise `RunStateError` naming the key;
    the history a layer sees stays valid: results that ran are kept, the paused call is answered as not run."""
    tools = Tools()
    seen: list[Message] = []

    async def keep_history(ctx: Run, call_next: Handler) -> RunResult:
        try:
            result: RunResult = await call_next(ctx)
            return result
        finally:
            seen.extend(ctx.messages)

    agent = tools.agent(ScriptedModel([BATCH]), keep_history, pause_deletes)
    with pytest.raises(RunStateError, match=r"run.state\['client'\] is not JSON-serialisable"):
        await agent.run("tidy", state={"ok": 1, "client": object()})
    check_history(seen)
    assert [m.text for m in seen[2:]] == [
        "contents of 1",
        "No result: the run could not pause (run.state is not JSON data).",
        "contents of 3",
    ]


async def test_resume_sync_works_without_a_loop_and_refuses_inside_one() -> None:
    """`resume_sync` runs the resume in its own loop; inside a running loop it says to await `resume`."""
    tools = Tools()
    agent = tools.agent(ScriptedModel([BATCH, "done"]), pause_deletes)
    state = (await agent.run("tidy")).to_state()
    state.approve_all()
    with pytest.raises(RuntimeError, match=r"await agent\.resume"):
        agent.resume_sync(state)
    result = await asyncio.to_thread(agent.resume_sync, state)
    assert result.output == "done"


async def test_edited_arguments_that_do_not_fit_the_tool_are_refused_before_anything_runs() -> None:
    """An edit whose arguments fail the tool's schema raises `RunStateError` naming the call and the argument."""
    tools = Tools()
    agent = tools.agent(ScriptedModel([[req("a", "delete", "1"), req("b", "delete", "2")], "done"]), pause_deletes)
    state = (await agent.run("tidy")).to_state()
    state.approve("a")
    state.edit("b", {"file": "2"})
    with pytest.raises(RunStateError, match=r"edited arguments of call b do not fit: .*path.*state\.edit\('b', args\)"):
        await agent.resume(state)
    assert tools.ran == []
