"""The trajectory checks of `onion.evals`: each passes on what it describes and fails saying what happened instead."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from middleware import approve
from onion import Agent, Message, ModelResponse, ToolCall, ToolNext, ToolResult, Usage, tool
from onion.evals import (
    Case,
    Trajectory,
    Verdict,
    blocked,
    called,
    called_in_order,
    not_called,
    output_equals,
    output_is,
    output_matches,
    paused,
    usage_under,
)
from onion.evals._checks import verdict
from onion.evals._trajectory import trajectory
from onion.testing import ScriptedModel, call


@tool
def search(query: str, limit: int = 5) -> str:
    """Search."""
    return f"found {query}"


@tool
def book(flight: str) -> str:
    """Book a flight."""
    return f"booked {flight}"


@tool
def cancel(flight: str) -> str:
    """Cancel a flight."""
    return "cancelled"


async def no_cancel(ctx: ToolCall, call_next: ToolNext) -> ToolResult:
    if ctx.name == "cancel":
        return ctx.block("cancelling needs a person")
    return await call_next(ctx)


async def trip(*script: Any, input: Any = "book me a flight", output_type: Any = None) -> Trajectory:
    """The trajectory of one run of the travel agent on `script`."""
    agent = Agent(ScriptedModel(list(script), name="claude-haiku-4-5"), tools=[search, book, cancel])
    agent.use(no_cancel, approve("book"))
    case = Case(input)
    result = await agent.run(input, output_type=output_type)
    return trajectory(case, result, "claude-haiku-4-5")


async def judged(check: Any, path: Trajectory) -> Verdict:
    return await verdict(check, path)


async def test_called_matches_a_tool_by_name_and_by_some_of_its_arguments() -> None:
    """`called(name, **args)` passes when a call has those arguments (others may differ); fails naming the calls."""
    path = await trip([call("search", query="Rome", limit=2)], "done")
    assert (await judged(called("search"), path)).passed
    assert (await judged(called("search", query="Rome"), path)).passed
    wrong = await judged(called("search", query="Oslo"), path)
    assert not wrong.passed and wrong.detail == "search was called with {'query': 'Rome', 'limit': 2}"
    never = await judged(called("book"), path)
    assert never.detail == "book was never called (the calls: search(query='Rome', limit=2))"


async def test_not_called_fails_naming_each_call_of_the_tool() -> None:
    """`not_called(name)` counts what the model asked for, blocked calls included."""
    path = await trip([call("cancel", flight="AZ1")], "I cannot cancel it.")
    failed = await judged(not_called("cancel"), path)
    assert not failed.passed and failed.detail == "cancel was called 1 time(s): cancel(flight='AZ1')"
    assert (await judged(not_called("book"), path)).passed


async def test_called_in_order_accepts_calls_in_between_and_fails_showing_the_order() -> None:
    """The named tools must appear in this order; other calls may come between them."""
    path = await trip([call("search", query="x")], [call("cancel", flight="A")], [call("search", query="y")], "ok")
    assert (await judged(called_in_order("search", "search"), path)).passed
    assert (await judged(called_in_order("cancel", "search"), path)).passed
    backwards = await judged(called_in_order("search", "cancel", "cancel"), path)
    assert backwards.detail == "the calls were, in order: search(query='x'), cancel(flight='A'), search(query='y')"


async def test_blocked_and_paused_read_what_became_of_each_call() -> None:
    """A call a layer blocked is `blocked` (with its reason); a call waiting for approval is `paused`."""
    cancelled = await trip([call("cancel", flight="A")], "no")
    assert (await judged(blocked("cancel"), cancelled)).passed
    assert cancelled.steps[0].outcome == "blocked" and cancelled.steps[0].reason == "cancelling needs a person"
    assert not (await judged(paused(), cancelled)).passed
    booking = await trip([call("search", query="x"), call("book", flight="AZ1")])
    assert (await judged(paused("book"), booking)).passed
    assert [step.outcome for step in booking.steps] == ["ok", "paused"]
    assert (await judged(blocked(), booking)).detail == "nothing was blocked (search: ok, book: paused)"


class Flight(BaseModel):
    code: str


async def test_output_checks_compare_match_and_validate_the_output() -> None:
    """`output_equals`, `output_matches` (a regex search) and `output_is` (pydantic, JSON text parsed)."""
    path = await trip("Your flight is AZ1.")
    assert (await judged(output_equals("Your flight is AZ1."), path)).passed
    assert (await judged(output_equals("AZ2"), path)).detail == "the output was 'Your flight is AZ1.'"
    assert (await judged(output_matches(r"AZ\d"), path)).passed
    assert not (await judged(output_matches("BA"), path)).passed
    typed = await trip('{"code": "AZ1"}', output_type=Flight)
    assert (await judged(output_is(Flight), typed)).passed
    text = await trip('{"code": 7}')
    assert (await judged(output_is(Flight), text)).detail == "code: Input should be a valid string"


async def test_usage_under_bounds_tokens_requests_and_cost() -> None:
    """Each bound given is checked; cost is priced as `middleware.budget` prices the agent's model."""
    path = await trip(ModelResponse(Message.assistant("hi"), Usage(600_000, 100_000, 1)))
    assert (await judged(usage_under(tokens=700_000, requests=1), path)).passed
    over = await judged(usage_under(tokens=10, cost=0.5), path)
    assert over.detail == "tokens 700000 > 10; cost 1.1 > 0.5"  # haiku: $1 in, $5 out per million
    assert (await judged(usage_under(cost=2.0), path)).passed
    with pytest.raises(TypeError, match="needs a bound"):
        usage_under()


async def test_a_check_of_ones_own_may_answer_a_bool_a_verdict_or_raise() -> None:
    """Plain functions (sync or async) are checks; an AssertionError fails with its message, other errors too."""

    def short(t: Trajectory) -> bool:
        return len(t.output) < 5

    async def polite(t: Trajectory) -> Verdict:
        return Verdict("please" in t.output, "no please")

    def strict(t: Trajectory) -> bool:
        assert t.output.endswith("!"), "no exclamation mark"
        return True

    def broken(t: Trajectory) -> bool:
        raise KeyError("oops")

    path = await trip("ok please")
    assert not (await judged(short, path)).passed
    assert (await judged(polite, path)) == Verdict(True, "no please")
    assert (await judged(strict, path)) == Verdict(False, "no exclamation mark")
    assert (await judged(broken, path)) == Verdict(False, "the check raised KeyError: 'oops'")


async def test_the_trajectory_leaves_out_tool_calls_of_the_input_history() -> None:
    """Only the calls this run made are steps; those already in the case's input are not."""
    history = [
        Message.user("earlier"),
        Message.assistant("", [call("search", query="old")]),
        Message.tool("", "found old"),
        Message.user("book AZ1"),
    ]
    history[2].tool_call_id = history[1].tool_calls[0].id
    path = await trip([call("search", query="new")], "done", input=history)
    assert [(step.name, step.args) for step in path.steps] == [("search", {"query": "new"})]
