"""Hooks: the nine events as middleware, their return values, matchers and error policy."""

from __future__ import annotations

import logging
import re
from typing import Any

import pytest

from onion import Agent, Message, ModelCall, ModelResponse, Run, RunResult, ToolBatch, ToolCall, ToolResult, tool
from onion.hooks import (
    EVENTS,
    Block,
    Modify,
    after_each_tool,
    after_llm,
    after_tools,
    after_user_input,
    before_each_tool,
    before_llm,
    before_tools,
    from_dict,
    on_complete,
    on_error,
)
from onion.testing import ScriptedModel, call


@tool
def add(a: int, b: int) -> int:
    return a + b


@tool
def send_email(to: str) -> str:
    return f"sent to {to}"


@tool
def explode() -> str:
    raise RuntimeError("boom")


def agent_with(*hooks: Any, script: list[Any] | None = None) -> tuple[Agent, ScriptedModel]:
    model = ScriptedModel(script or [[call("add", a=1, b=2), call("send_email", to="bob")], "done"])
    return Agent(model, tools=[add, send_email, explode], middleware=hooks), model


def test_there_are_nine_events() -> None:
    assert len(EVENTS) == 9


async def test_after_user_input_edits_messages_before_the_first_model_call() -> None:
    @after_user_input
    def add_context(run: Run) -> None:
        run.messages.insert(0, Message.system("today is Monday"))

    agent, model = agent_with(add_context)
    await agent.run("go")
    assert model.requests[0].messages[0].text == "today is Monday"
    assert sum(m.text == "today is Monday" for m in model.requests[1].messages) == 1


async def test_before_llm_can_answer_instead_of_the_model() -> None:
    @before_llm
    async def canned(c: ModelCall) -> ModelResponse:
        return ModelResponse(message=Message.assistant("canned"))

    agent, model = agent_with(canned)
    assert (await agent.run("go")).output == "canned" and model.requests == []


async def test_after_llm_replaces_the_response() -> None:
    @after_llm
    def shout(c: ModelCall, response: ModelResponse) -> ModelResponse | None:
        return ModelResponse(Message.assistant(response.text.upper())) if not response.tool_calls else None

    agent, _ = agent_with(shout)
    assert (await agent.run("go")).output == "DONE"


async def test_before_tools_block_answers_every_call_of_the_batch() -> None:
    @before_tools
    def freeze(batch: ToolBatch) -> Block:
        return Block("maintenance")

    agent, _ = agent_with(freeze)
    results = [m for m in (await agent.run("go")).messages if m.role == "tool"]
    assert len(results) == 2 and all(m.is_error and "maintenance" in m.text for m in results)


async def test_after_tools_injects_after_the_results() -> None:
    @after_tools
    def reflect(batch: ToolBatch, results: list[ToolResult]) -> None:
        batch.run.inject(f"{len(results)} results in; reflect before acting.")

    agent, model = agent_with(reflect)
    await agent.run("go")
    assert [m.role for m in model.requests[1].messages] == ["user", "assistant", "tool", "tool", "user"]


async def test_before_each_tool_matcher_blocks_only_matching_tools() -> None:
    @before_each_tool("send_email")
    def no_mail(c: ToolCall) -> Block:
        return Block("e-mail is disabled")

    agent, _ = agent_with(no_mail)
    added, mailed = [m for m in (await agent.run("go")).messages if m.role == "tool"]
    assert added.text == "3" and mailed.is_error and "e-mail is disabled" in mailed.text


async def test_before_each_tool_modify_replaces_arguments() -> None:
    @before_each_tool(re.compile("send_.*"))
    async def redirect(c: ToolCall) -> Modify:
        return Modify({"to": "sandbox@example.com"})

    agent, _ = agent_with(redirect)
    assert "sent to sandbox@example.com" in [m.text for m in (await agent.run("go")).messages]


async def test_after_each_tool_with_a_list_matcher_replaces_results() -> None:
    @after_each_tool(["add"])
    def hide(c: ToolCall, result: ToolResult) -> ToolResult:
        return ToolResult(content="hidden", call_id=c.id)

    agent, _ = agent_with(hide)
    assert [m.text for m in (await agent.run("go")).messages if m.role == "tool"] == ["hidden", "sent to bob"]


async def test_on_error_recovers_a_failing_tool_or_reraises() -> None:
    @on_error
    def recover(c: Any, error: Exception) -> ToolResult | None:
        return ToolResult(content=f"recovered from {error}", call_id=c.id) if isinstance(c, ToolCall) else None

    agent, _ = agent_with(recover, script=[[call("explode")], "done"])
    assert "recovered from boom" in [m.text for m in (await agent.run("go")).messages]

    agent, _ = agent_with(recover, script=[RuntimeError("model down")])
    with pytest.raises(RuntimeError, match="model down"):
        await agent.run("go")


async def test_on_error_recovers_a_failing_model() -> None:
    @on_error
    def fallback_answer(c: Any, error: Exception) -> ModelResponse:
        return ModelResponse(Message.assistant("sorry, try later"))

    agent, _ = agent_with(fallback_answer, script=[RuntimeError("down")])
    assert (await agent.run("go")).output == "sorry, try later"


async def test_on_complete_sees_the_result() -> None:
    seen: list[str] = []

    @on_complete
    async def done(run: Run, result: RunResult) -> None:
        seen.append(result.output)

    agent, _ = agent_with(done)
    await agent.run("go")
    assert seen == ["done"]


async def test_a_failing_hook_propagates_by_default() -> None:
    @after_llm
    def broken(c: ModelCall, response: ModelResponse) -> None:
        raise ValueError("guard says no")

    agent, _ = agent_with(broken)
    with pytest.raises(ValueError, match="guard says no"):
        await agent.run("go")


async def test_an_observer_hook_failure_is_logged_and_the_run_goes_on(caplog: pytest.LogCaptureFixture) -> None:
    @after_llm(errors="log")
    def broken(c: ModelCall, response: ModelResponse) -> None:
        raise ValueError("metrics backend down")

    agent, _ = agent_with(broken)
    with caplog.at_level(logging.ERROR, logger="onion.hooks"):
        assert (await agent.run("go")).output == "done"
    assert "after_llm" in caplog.text and "metrics backend down" in caplog.text


def test_hooks_without_a_matcher_refuse_one() -> None:
    with pytest.raises(TypeError, match="takes no matcher"):
        before_llm("add")


def test_unknown_error_policy_is_refused() -> None:
    with pytest.raises(ValueError, match="errors must be"):
        after_llm(errors="ignore")(lambda c, r: None)  # type: ignore[arg-type]


async def test_from_dict_builds_a_stack_of_hooks() -> None:
    seen: list[str] = []
    stack = from_dict(
        {
            "after_llm": [lambda c, r: seen.append("llm")],
            "before_each_tool": lambda c: seen.append(f"tool {c.name}"),
        }
    )
    agent, _ = agent_with(stack)
    await agent.run("go")
    assert seen == ["llm", "tool add", "tool send_email", "llm"]


async def test_from_dict_rejects_unknown_events() -> None:
    with pytest.raises(ValueError, match="unknown hook event 'before_everything'"):
        from_dict({"before_everything": [print]})


async def test_agent_on_adds_a_hook_to_one_agent() -> None:
    agent, _ = agent_with()
    seen: list[str] = []

    @agent.on("before_each_tool", "add")
    def watch(c: ToolCall) -> None:
        seen.append(c.name)

    await agent.run("go")
    assert seen == ["add"] and "before_each_tool(" in repr(agent.stack)


async def test_on_error_with_a_matcher_leaves_model_errors_alone() -> None:
    """`@on_error("name")` is about those tools: a failing model call never reaches it."""
    seen: list[Any] = []

    @on_error("explode")
    def tools_only(c: ToolCall, error: Exception) -> ToolResult:
        seen.append(c)
        return c.block("explode is broken")

    agent, _ = agent_with(tools_only, script=[RuntimeError("model down")])
    with pytest.raises(RuntimeError, match="model down"):
        await agent.run("go")
    assert seen == []


def test_a_matcher_for_an_event_that_takes_none_is_refused_in_every_style() -> None:
    """hook(), agent.on() and the decorators all refuse a matcher the hook would ignore."""
    from onion.hooks import hook

    with pytest.raises(TypeError, match="after_llm takes no matcher"):
        hook("after_llm", lambda c, r: None, "add")
    agent, _ = agent_with()
    with pytest.raises(TypeError, match="before_llm takes no matcher"):
        agent.on("before_llm", "add")(lambda c: None)


SIGNATURES = {
    "after_user_input": "fn(run)",
    "before_llm": "fn(call)",
    "after_llm": "fn(call, response)",
    "before_tools": "fn(batch)",
    "after_tools": "fn(batch, results)",
    "before_each_tool": "fn(call)",
    "after_each_tool": "fn(call, result)",
    "on_error": "fn(call, error)",
    "on_complete": "fn(run, result)",
}


def one_parameter(call: Any) -> None:
    pass


def two_parameters(call: Any, extra: Any) -> None:
    pass


def test_every_event_has_its_signature_listed() -> None:
    assert set(SIGNATURES) == set(EVENTS)


@pytest.mark.parametrize("event", EVENTS)
@pytest.mark.parametrize("style", ["decorator", "hook", "from_dict", "agent.on"])
def test_a_hook_whose_function_cannot_take_the_events_arguments_is_refused_when_made(event: str, style: str) -> None:
    """A function with the wrong number of parameters: TypeError naming the event, its signature and the function."""
    from onion import hooks

    expected = SIGNATURES[event]
    wrong = one_parameter if "," in expected else two_parameters
    message = re.escape(f"{event} calls {expected}") + ".*" + re.escape(f"{wrong.__name__}(")
    with pytest.raises(TypeError, match=message):
        if style == "decorator":
            getattr(hooks, event)(wrong)
        elif style == "hook":
            hooks.hook(event, wrong)
        elif style == "from_dict":
            hooks.from_dict({event: [wrong]})
        else:
            agent_with()[0].on(event)(wrong)


def test_hook_functions_that_can_take_the_arguments_are_accepted() -> None:
    """Defaults, `*args`, async functions, bound methods and callable objects all pass the check."""

    class Counter:
        def __call__(self, call: Any, result: Any) -> None:
            pass

        def method(self, call: Any, result: Any = None) -> None:
            pass

    async def asynchronous(call: Any, result: Any) -> None:
        pass

    for function in (Counter(), Counter().method, asynchronous, lambda *args: None, lambda c, r, extra=1: None, print):
        after_each_tool(function)


async def test_a_failing_after_each_tool_hook_stops_the_run_instead_of_blaming_the_tool() -> None:
    """The e-mail was sent: the hook's error stops the run; the model is never told the tool failed."""
    from middleware import retry

    sent: list[str] = []

    @tool
    def mail(to: str) -> str:
        sent.append(to)
        return f"sent to {to}"

    @after_each_tool("mail")
    def audit(c: ToolCall, result: ToolResult) -> None:
        raise ConnectionError("audit log unreachable")

    model = ScriptedModel([[call("mail", to="bob")], "done"])
    agent = Agent(model, tools=[mail]).use(retry(tools=True, initial=0, jitter=0), audit)
    with pytest.raises(ConnectionError, match="audit log unreachable"):
        await agent.run("go")
    assert sent == ["bob"]
    assert len(model.requests) == 1


async def test_a_failing_before_each_tool_guard_stops_the_run_and_on_error_does_not_see_it() -> None:
    """A guard that raises is not the tool's failure: the tool never runs and an on_error recovery is not asked."""
    recovered: list[str] = []

    @on_error
    def recover(c: ToolCall, error: Exception) -> ToolResult:
        recovered.append(c.name)
        return c.block("recovered")

    @before_each_tool("send_email")
    def guard(c: ToolCall) -> None:
        raise PermissionError("mail is disabled")

    agent, model = agent_with(recover, guard)
    with pytest.raises(PermissionError, match="mail is disabled"):
        await agent.run("go")
    assert recovered == [] and len(model.requests) == 1


async def test_before_tools_pause_runs_the_approved_calls_of_a_batch_and_pauses_the_rest() -> None:
    """In a batch mixing approved and unapproved calls, `Pause` sends only the approved ones inward
    (as one batch) and pauses the others; results keep call order."""
    from onion import ToolRequest
    from onion.hooks import Pause

    agent = Agent(ScriptedModel([]))
    run = Run(agent, "", [])
    calls = [
        ToolCall(run, ToolRequest(id, "t", {}), None, approved)
        for id, approved in [("a", False), ("b", True), ("c", False), ("d", True)]
    ]
    batch = ToolBatch(run, calls, ModelResponse(Message.assistant("")))
    inner: list[list[str]] = []

    async def call_next(batch: ToolBatch) -> list[ToolResult]:
        inner.append([call.id for call in batch.calls])
        return [ToolResult(f"ran {call.id}", call_id=call.id) for call in batch.calls]

    results = await before_tools(lambda batch: Pause("check")).wrap_tools(batch, call_next)
    assert inner == [["b", "d"]] and batch.calls == calls
    assert [r.content for r in results[1::2]] == ["ran b", "ran d"]
    assert [call.pause_reason for call in calls] == ["check", None, "check", None]
