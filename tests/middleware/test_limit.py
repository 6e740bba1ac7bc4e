"""`limit`: bounds on model calls and tool calls per run."""

from __future__ import annotations

import pytest

from middleware import approve, cache, limit
from middleware.limit import LimitReached
from onion import Agent, OnionError, RunState, ToolCall, ToolNext, ToolResult, check_history, tool
from onion.stores import MemoryStore
from onion.testing import ScriptedModel, call


@tool
def search(query: str) -> str:
    """Search."""
    return f"results for {query}"


@tool
def fetch(url: str) -> str:
    """Fetch a page."""
    return f"page {url}"


def looping_model(batches: int, final: str = "done") -> ScriptedModel:
    return ScriptedModel([[call("search", query=str(i))] for i in range(batches)] + [final])


def test_bare_limit_raises_type_error_naming_its_arguments() -> None:
    """limit has nothing to bound without arguments, so bare use says which it needs."""
    with pytest.raises(TypeError, match="model_calls=N"):
        Agent(ScriptedModel(["x"])).use(limit)


@pytest.mark.parametrize("kwargs", [{"model_calls": -1}, {"tool_calls": 1.5}, {"per_tool": {"search": -2}}])
def test_negative_or_non_int_bounds_are_rejected(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError, match="non-negative int"):
        limit(**kwargs)  # type: ignore[arg-type]


def test_unknown_on_limit_is_rejected() -> None:
    with pytest.raises(ValueError, match="on_limit"):
        limit(model_calls=1, on_limit="stop")  # type: ignore[arg-type]


async def test_run_within_the_limits_is_untouched() -> None:
    agent = Agent(looping_model(2), tools=[search]).use(limit(model_calls=3, tool_calls=2))
    result = await agent.run("q")
    assert result.output == "done"


async def test_model_calls_limit_raises_limit_reached_with_a_valid_history() -> None:
    """The call past the bound raises before reaching the model; every tool call is answered."""
    model = looping_model(5)
    agent = Agent(model, tools=[search]).use(limit(model_calls=2))
    with pytest.raises(LimitReached, match=r"limit of model_calls \(2\)") as caught:
        await agent.run("q")
    assert isinstance(caught.value, OnionError)
    assert (caught.value.what, caught.value.maximum) == ("model_calls", 2)
    assert len(model.requests) == 2
    assert caught.value.usage.requests == 2
    check_history(caught.value.messages)


async def test_model_calls_limit_with_finish_ends_with_a_canned_answer_costing_nothing() -> None:
    model = looping_model(5)
    agent = Agent(model, tools=[search]).use(limit(model_calls=2, on_limit="finish", final_text="Stopped: {what}."))
    result = await agent.run("q")
    assert result.output == "Stopped: model calls."
    assert len(model.requests) == 2
    assert result.usage.requests == 2
    check_history(result.messages)


async def test_tool_calls_beyond_the_limit_are_blocked_then_the_run_stops() -> None:
    model = ScriptedModel([[call("search", query="a"), call("search", query="b"), call("search", query="c")], "x"])
    agent = Agent(model, tools=[search]).use(limit(tool_calls=2))
    with pytest.raises(LimitReached) as caught:
        await agent.run("q")
    assert caught.value.what == "tool_calls"
    tool_messages = [m for m in caught.value.messages if m.role == "tool"]
    assert [m.is_error for m in tool_messages] == [False, False, True]
    assert "limit of 2 tool calls" in tool_messages[2].text
    check_history(caught.value.messages)
    assert model.remaining == 1


async def test_tool_calls_limit_with_finish_answers_the_blocked_call_and_finishes() -> None:
    model = looping_model(3)
    agent = Agent(model, tools=[search]).use(limit(tool_calls=1, on_limit="finish"))
    result = await agent.run("q")
    assert "limit of tool calls (1)" in result.output
    assert len(model.requests) == 2
    assert result.messages[-2].is_error
    check_history(result.messages)


async def test_tool_calls_reaching_but_not_passing_the_limit_let_the_model_answer() -> None:
    agent = Agent(looping_model(2), tools=[search]).use(limit(tool_calls=2))
    assert (await agent.run("q")).output == "done"


async def test_per_tool_limit_blocks_that_tool_and_stops_offering_it() -> None:
    """A per-tool bound is soft: the tool is withdrawn, the run goes on."""
    model = ScriptedModel(
        [
            [call("search", query="a")],
            [call("search", query="b"), call("fetch", url="u")],
            "answer",
        ]
    )
    agent = Agent(model, tools=[search, fetch]).use(limit(per_tool={"search": 1}))
    result = await agent.run("q")
    assert result.output == "answer"
    assert [t.name for t in model.requests[0].tools] == ["search", "fetch"]
    assert [t.name for t in model.requests[1].tools] == ["fetch"]
    results = [m for m in result.messages if m.role == "tool"]
    assert [m.is_error for m in results] == [False, True, False]
    assert "search may be called at most 1 times" in results[1].text
    check_history(result.messages)


async def test_per_tool_limit_of_zero_never_offers_the_tool() -> None:
    model = ScriptedModel(["ok"])
    await Agent(model, tools=[search, fetch]).use(limit(per_tool={"search": 0})).run("q")
    assert [t.name for t in model.requests[0].tools] == ["fetch"]


async def test_counters_are_per_run_when_the_layer_is_shared() -> None:
    layer = limit(model_calls=1)
    first = Agent(ScriptedModel(["a"])).use(layer)
    second = Agent(ScriptedModel(["b"])).use(layer)
    assert (await first.run("q")).output == "a"
    assert (await second.run("q")).output == "b"


async def test_the_canned_answer_is_marked_as_not_from_a_model_so_a_cache_outside_never_stores_it() -> None:
    """cache -> limit(finish): the stop message is served without a model, so it is never cached for later runs."""
    shared = cache()
    model = ScriptedModel(["a real answer"])
    stopped = await Agent(model).use(shared, limit(model_calls=0, on_limit="finish")).run("q")
    assert stopped.output.startswith("I stopped here")
    result = await Agent(model).use(shared).run("q")
    assert result.output == "a real answer" and len(model.requests) == 1


class Crash(BaseException):
    """Stands in for the worker dying: nothing in the run catches it."""


async def crash_after_search(call_: ToolCall, call_next: ToolNext) -> ToolResult:
    """The worker dies right after `search` ran, before its result is recorded."""
    result = await call_next(call_)
    if call_.name == "search":
        raise Crash
    return result


async def test_counters_live_in_run_private_and_survive_a_pause_resumed_from_json() -> None:
    """The model call made before the pause still counts after `RunState` went through JSON: the next one stops."""
    agent = Agent(looping_model(3), tools=[search]).use(limit(model_calls=1), approve("search"))
    paused = await agent.run("q")
    assert paused.paused and not any(key.startswith("limit") for key in paused.state)
    state = RunState.from_json(paused.to_state().to_json())
    assert state.private[limit(model_calls=1).key]["model"] == 1
    state.approve_all()
    with pytest.raises(LimitReached, match="model_calls"):
        await agent.resume(state)


async def test_counters_survive_a_crash_through_the_journal() -> None:
    """A worker dies after the run's one allowed model call: recovered elsewhere, the next model call stops."""
    store = MemoryStore()
    worker = Agent(looping_model(3), tools=[search], store=store).use(limit(model_calls=1), crash_after_search)
    with pytest.raises(Crash):
        await worker.run("q")
    (record,) = await store.runs()
    later = looping_model(3)
    with pytest.raises(LimitReached, match="model_calls"):
        await Agent(later, tools=[search], store=store).use(limit(model_calls=1)).recover(record.run_id)
    assert later.requests == []
