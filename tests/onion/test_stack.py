"""Composition: targeting, ordering, short-circuit, repeated call_next, contract checks."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from onion import Agent, Call, Message, ModelCall, ModelResponse, Run, Stack, ToolBatch, ToolCall, ToolResult, tool
from onion.errors import MiddlewareError
from onion.testing import ScriptedModel, call


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def tool_script() -> ScriptedModel:
    return ScriptedModel([[call("add", a=1, b=2), call("add", a=3, b=4)], "done"])


def recorder(seen: list[tuple[str, str]], label: str) -> Any:
    async def layer(ctx: Call, call_next: Any) -> Any:
        seen.append((label, ctx.kind))
        return await call_next(ctx)

    return layer


async def test_annotation_selects_the_kinds_a_function_wraps() -> None:
    seen: list[str] = []

    async def models(ctx: ModelCall, call_next: Any) -> Any:
        seen.append(ctx.kind)
        return await call_next(ctx)

    async def tools(ctx: ToolCall | ToolBatch, call_next: Any) -> Any:
        seen.append(ctx.kind)
        return await call_next(ctx)

    async def runs(ctx: Run, call_next: Any) -> Any:
        seen.append(ctx.kind)
        return await call_next(ctx)

    await Agent(tool_script(), tools=[add], middleware=[models, tools, runs]).run("go")
    assert sorted(seen) == sorted(["run", "model", "tools", "tool", "tool", "model"])


async def test_string_annotations_resolve_like_real_ones() -> None:
    namespace: dict[str, Any] = {}
    exec(
        "from __future__ import annotations\n"
        "async def layer(ctx: ModelCall, call_next):\n"
        "    return await call_next(ctx)\n",
        namespace,
    )
    assert Stack(namespace["layer"]).layers("model") and not Stack(namespace["layer"]).layers("tool")


async def test_unannotated_function_wraps_every_kind() -> None:
    seen: list[tuple[str, str]] = []
    await Agent(tool_script(), tools=[add], middleware=[recorder(seen, "a")]).run("go")
    assert [kind for _, kind in seen] == ["run", "model", "tools", "tool", "tool", "model"]


async def test_first_added_layer_is_outermost() -> None:
    events: list[str] = []

    def layer(label: str) -> Any:
        async def wrap(ctx: ModelCall, call_next: Any) -> Any:
            events.append(f"{label} in")
            response = await call_next(ctx)
            events.append(f"{label} out")
            return response

        return wrap

    await Agent(ScriptedModel(["hi"]), middleware=[layer("a"), layer("b")]).use(layer("c")).run("x")
    assert events == ["a in", "b in", "c in", "c out", "b out", "a out"]


async def test_object_with_wrap_methods_wraps_those_kinds() -> None:
    class Both:
        def __init__(self) -> None:
            self.kinds: list[str] = []

        async def wrap_model(self, ctx: ModelCall, call_next: Any) -> Any:
            self.kinds.append("model")
            return await call_next(ctx)

        async def wrap_tool(self, ctx: ToolCall, call_next: Any) -> Any:
            self.kinds.append("tool")
            return await call_next(ctx)

    layer = Both()
    await Agent(tool_script(), tools=[add], middleware=[layer]).run("go")
    assert layer.kinds == ["model", "tool", "tool", "model"]


async def test_class_is_instantiated_with_no_arguments() -> None:
    class Counter:
        instances = 0

        def __init__(self) -> None:
            Counter.instances += 1

        async def wrap_model(self, ctx: ModelCall, call_next: Any) -> Any:
            return await call_next(ctx)

    stack = Stack(Counter)
    assert Counter.instances == 1 and stack.layers("model")[0].name == "Counter"


async def test_short_circuit_never_reaches_the_model() -> None:
    model = ScriptedModel([])

    async def canned(ctx: ModelCall, call_next: Any) -> ModelResponse:
        return ModelResponse(message=Message.assistant("from cache"))

    result = await Agent(model, middleware=[canned]).run("x")
    assert result.output == "from cache" and model.requests == [] and result.usage.requests == 0


async def test_call_next_twice_retries_the_inner_stack() -> None:
    model = ScriptedModel([RuntimeError("flaky"), "second try"])

    async def retry_once(ctx: ModelCall, call_next: Any) -> Any:
        try:
            return await call_next(ctx)
        except RuntimeError:
            return await call_next(ctx)

    result = await Agent(model, middleware=[retry_once]).run("x")
    assert result.output == "second try" and len(model.requests) == 2


async def test_nested_stacks_flatten_in_order_and_share_layer_state() -> None:
    seen: list[tuple[str, str]] = []
    shared = Stack(recorder(seen, "shared"))
    agents = [Agent(ScriptedModel(["a"]), middleware=[recorder(seen, "own"), shared]) for _ in range(2)]
    for agent in agents:
        await agent.run("x")
    assert [label for label, kind in seen if kind == "model"] == ["own", "shared", "own", "shared"]
    assert [layer.name for layer in agents[0].stack.layers("model")] == ["recorder.layer", "recorder.layer"]


async def test_using_a_shared_stack_after_build_rebuilds_every_agent() -> None:
    shared = Stack()
    agent = Agent(ScriptedModel(["a", "b"]), middleware=[shared])
    await agent.run("x")
    seen: list[tuple[str, str]] = []
    shared.use(recorder(seen, "late"))
    await agent.run("y")
    assert ("late", "model") in seen


async def test_repr_shows_layers_per_kind() -> None:
    async def only_model(ctx: ModelCall, call_next: Any) -> Any:
        return await call_next(ctx)

    text = repr(Stack(only_model, name="app"))
    assert "model:  test_repr_shows_layers_per_kind.only_model" in text and "tool:   (none)" in text


async def test_stack_is_itself_a_middleware() -> None:
    seen: list[tuple[str, str]] = []
    inner = Stack(recorder(seen, "inner"))
    result = await inner(ToolBatch.__new__(ToolBatch), _echo)
    assert result == "echo" and seen == [("inner", "tools")]


async def _echo(ctx: Any) -> str:
    return "echo"


async def test_not_a_middleware_is_a_clear_type_error() -> None:
    with pytest.raises(TypeError, match="not a middleware"):
        Stack(42)
    with pytest.raises(TypeError, match=r"must take \(ctx, call_next\)"):
        Stack(lambda ctx: ctx)


@pytest.mark.parametrize("checked", [False, True])
async def test_wrong_result_type_names_the_layer(checked: bool) -> None:
    async def passthrough(ctx: ModelCall, call_next: Any) -> Any:
        return await call_next(ctx)

    async def broken(ctx: ModelCall, call_next: Any) -> Any:
        await call_next(ctx)
        return "not a response"

    layers = [broken] if not checked else [passthrough, broken]
    with pytest.raises(MiddlewareError, match="broken returned str"):
        await Agent(ScriptedModel(["x"]), middleware=layers, checked=checked).run("x")


async def test_checked_mode_names_the_exact_layer_among_several() -> None:
    async def passthrough(ctx: ToolCall, call_next: Any) -> Any:
        return await call_next(ctx)

    async def forgets_return(ctx: ToolCall, call_next: Any) -> Any:
        await call_next(ctx)

    agent = Agent(tool_script(), tools=[add], middleware=[passthrough, forgets_return], checked=True)
    with pytest.raises(MiddlewareError, match="forgets_return returned NoneType"):
        await agent.run("go")


async def test_fast_mode_lists_the_candidates_among_several() -> None:
    async def passthrough(ctx: ToolCall, call_next: Any) -> Any:
        return await call_next(ctx)

    async def forgets_return(ctx: ToolCall, call_next: Any) -> Any:
        await call_next(ctx)

    agent = Agent(tool_script(), tools=[add], middleware=[passthrough, forgets_return], checked=False)
    with pytest.raises(MiddlewareError, match=r"one of .*passthrough.*forgets_return.*ONION_CHECKED"):
        await agent.run("go")


@pytest.mark.parametrize("checked", [False, True])
async def test_unawaited_coroutine_names_the_layer(checked: bool) -> None:
    async def outer(ctx: ModelCall, call_next: Any) -> Any:
        return await call_next(ctx)

    async def lazy(ctx: ModelCall, call_next: Any) -> Any:
        return call_next(ctx)

    with pytest.raises(MiddlewareError, match="lazy returned an un-awaited coroutine"):
        await Agent(ScriptedModel(["x"]), middleware=[outer, lazy], checked=checked).run("x")


@pytest.mark.parametrize("checked", [False, True])
async def test_concurrent_call_next_is_a_contract_error(checked: bool) -> None:
    async def hedge(ctx: ToolCall, call_next: Any) -> Any:
        first, _ = await asyncio.gather(call_next(ctx), call_next(ctx))
        return first

    @tool
    async def slow() -> str:
        await asyncio.sleep(0.01)
        return "ok"

    agent = Agent(ScriptedModel([[call("slow")], "done"]), tools=[slow], middleware=[hedge], checked=checked)
    with pytest.raises(MiddlewareError, match=r"hedge.*concurrently|concurrently.*hedge"):
        await agent.run("go")


async def test_tool_layer_may_return_its_own_result() -> None:
    async def fixed(ctx: ToolCall, call_next: Any) -> ToolResult:
        return ToolResult(content="42", call_id=ctx.id)

    result = await Agent(tool_script(), tools=[add], middleware=[fixed]).run("go")
    assert [m.text for m in result.messages if m.role == "tool"] == ["42", "42"]


async def test_layers_accept_extra_keyword_only_parameters() -> None:
    async def configurable(ctx: ModelCall, call_next: Any, *, label: str = "x") -> Any:
        return await call_next(ctx)

    assert (await Agent(ScriptedModel(["ok"]), middleware=[configurable]).run("x")).output == "ok"


@pytest.mark.parametrize("checked", [False, True])
async def test_a_tools_layer_returning_unawaited_results_is_a_contract_error(checked: bool) -> None:
    """A list holding something other than ToolResults is a MiddlewareError naming the tools layers."""

    async def lazy(ctx: ToolBatch, call_next: Any) -> Any:
        return [call_next(ctx) for _ in ctx.calls]

    agent = Agent(tool_script(), tools=[add], middleware=[lazy], checked=checked)
    with pytest.raises(MiddlewareError, match=r"tools layers \['.*lazy'\] returned an un-awaited coroutine"):
        await agent.run("go")


async def test_layers_of_one_stack_can_be_added_to_another() -> None:
    """Iterating a stack gives its layers; each may be used again as it is."""
    seen: list[tuple[str, str]] = []
    copy = Stack(*Stack(recorder(seen, "a"), recorder(seen, "b")))
    await Agent(ScriptedModel(["ok"]), middleware=[copy]).run("x")
    assert [label for label, kind in seen if kind == "model"] == ["a", "b"]


def test_a_layer_that_cannot_take_ctx_and_call_next_is_refused_when_added() -> None:
    """Wrong parameters are a TypeError naming the layer at use(), not a failure mid-run."""

    class Forgetful:
        async def wrap_model(self, ctx: ModelCall) -> Any:
            return None

    async def keyword_only(ctx: ModelCall, *, call_next: Any) -> Any:
        return await call_next(ctx)

    with pytest.raises(TypeError, match=r"Forgetful\.wrap_model must take \(ctx, call_next\)"):
        Stack(Forgetful)
    with pytest.raises(TypeError, match=r"keyword_only must take \(ctx, call_next\)"):
        Stack(keyword_only)


def test_a_partial_is_named_after_its_function() -> None:
    """Error messages and repr name the function a functools.partial wraps."""
    import functools

    async def labelled(label: str, ctx: ModelCall, call_next: Any) -> Any:
        return await call_next(ctx)

    [layer] = Stack(functools.partial(labelled, "x")).layers("model")
    assert layer.name == "partial(test_a_partial_is_named_after_its_function.labelled)"


async def test_wrap_only_limits_an_object_to_some_of_its_wrap_methods() -> None:
    class Configurable:
        def __init__(self, tools: bool) -> None:
            self.wrap_only = ("model", "tool") if tools else ("model",)

        async def wrap_model(self, ctx: ModelCall, call_next: Any) -> Any:
            return await call_next(ctx)

        async def wrap_tool(self, ctx: ToolCall, call_next: Any) -> Any:
            raise AssertionError("configured off")

    assert [kind for layer in Stack(Configurable(tools=False)) for kind in layer.wraps] == ["model"]
    assert [kind for layer in Stack(Configurable(tools=True)) for kind in layer.wraps] == ["model", "tool"]
    result = await Agent(tool_script(), tools=[add], middleware=[Configurable(tools=False)]).run("go")
    assert result.output == "done"


def test_a_stack_that_would_contain_itself_is_refused_by_name() -> None:
    """Adding a stack into itself (directly or through a nested stack) is refused, naming it, not a RecursionError."""
    outer = Stack(name="outer")
    inner = Stack(outer, name="inner")
    with pytest.raises(MiddlewareError, match="stack 'inner' cannot be added to stack 'outer'"):
        outer.use(inner)
    with pytest.raises(MiddlewareError, match="would contain itself"):
        outer.use(outer)
    assert "Stack(outer)" in repr(outer)


def test_wrap_only_naming_a_missing_method_says_so() -> None:
    """`wrap_only=("tools",)` on an object without `wrap_tools` names the missing method."""

    class A:
        wrap_only = ("tools",)

        async def wrap_tool(self, ctx: ToolCall, call_next: Any) -> Any:
            return await call_next(ctx)

    with pytest.raises(TypeError, match=r"A\.wrap_only names 'tools' but A has no wrap_tools method"):
        Stack(A())


def test_wrap_only_with_an_unknown_kind_is_refused() -> None:
    class B:
        wrap_only = ("models",)

        async def wrap_model(self, ctx: ModelCall, call_next: Any) -> Any:
            return await call_next(ctx)

    with pytest.raises(TypeError, match="'models', which is not a kind"):
        Stack(B())


def test_a_misspelt_wrap_method_is_refused_with_a_suggestion() -> None:
    """A `wrap_tol` method would be silently ignored; it is a TypeError suggesting `wrap_tool`."""

    class C:
        async def wrap_tol(self, ctx: ToolCall, call_next: Any) -> Any:
            return await call_next(ctx)

    with pytest.raises(TypeError, match="C has wrap_tol, which onion never calls; did you mean wrap_tool"):
        Stack(C())


def test_a_layer_configured_off_for_every_kind_wraps_nothing() -> None:
    class D:
        wrap_only = ()

        async def wrap_model(self, ctx: ModelCall, call_next: Any) -> Any:
            return await call_next(ctx)

    assert Stack(D()).layers() and not Stack(D()).layers("model")


def test_print_shows_nested_stacks_by_name() -> None:
    async def log(ctx: ModelCall, call_next: Any) -> Any:
        return await call_next(ctx)

    async def retry(ctx: ModelCall, call_next: Any) -> Any:
        return await call_next(ctx)

    shared = Stack(retry, name="shared")
    text = repr(Stack(log, shared, name="app"))
    prefix = "test_print_shows_nested_stacks_by_name"
    assert f"model:  {prefix}.log -> shared[{prefix}.retry]" in text
    assert "tool:   (none)" in text


async def test_changing_one_stack_rebuilds_only_the_agents_that_use_it() -> None:
    """A per-stack version: `use()` on one stack leaves other agents' chains alone and reaches nesting agents."""
    shared = Stack(name="shared")
    user = Agent(ScriptedModel(["a", "b"]), middleware=[shared])
    other = Agent(ScriptedModel(["a", "b"]))
    await user.run("x")
    await other.run("x")
    user_chains, other_chains = user._chains, other._chains

    seen: list[str] = []

    async def spy(ctx: ModelCall, call_next: Any) -> Any:
        seen.append("spy")
        return await call_next(ctx)

    shared.use(spy)
    await user.run("x")
    await other.run("x")
    assert seen == ["spy"]
    assert user._chains is not user_chains and other._chains is other_chains


def profiled_calls(agent: Agent[Any], *, runs: int) -> dict[str, int]:
    """How many calls cProfile counted for each function name over `runs` runs of `agent`."""
    import cProfile
    import pstats

    profile = cProfile.Profile()
    profile.enable()
    for _ in range(runs):
        asyncio.run(agent.run("go"))
    profile.disable()
    return {name: stats[1] for (_, _, name), stats in pstats.Stats(profile).stats.items()}  # type: ignore[attr-defined]


def test_every_layer_call_is_visible_to_cprofile() -> None:
    """Profilers key functions by file, line and name: each of a layer's calls is counted once, however bound."""

    async def plain(ctx, call_next):  # type: ignore[no-untyped-def]
        return await call_next(ctx)

    async def annotated(ctx: ToolCall, call_next: Any) -> Any:
        return await call_next(ctx)

    agent = Agent(ScriptedModel([[call("add", a=1, b=2)] * 3, "done"] * 4), tools=[add], middleware=[plain, annotated])
    counts = profiled_calls(agent, runs=4)
    # 4 runs x (1 run + 2 model + 1 batch + 3 tool calls) = 28 calls of `plain`, 12 tool calls of `annotated`.
    # cProfile counts a coroutine once per resumption (a tool call waiting on its thread may add one on 3.13): `plain`
    # counts as `annotated` over the tool calls, plus its 16 other calls. A profile keeping one copy of it counts less.
    per_call = counts["annotated"] // 12
    assert per_call >= 1 and counts["plain"] >= counts["annotated"] + 16 * per_call


def test_each_copy_of_a_layer_runs_its_own_code_unless_a_profiler_is_on() -> None:
    """A layer used at two depths: each copy gets its own code object (so CPython specialises each
    copy's call of `call_next` for its one callee), equal to the user's; under a profiler they share it."""
    import sys

    from onion._stack import profiling

    if profiling():
        pytest.skip("a profiler is already on")

    async def noop(ctx: ModelCall, call_next: Any) -> Any:
        return await call_next(ctx)

    async def terminal(ctx: ModelCall) -> ModelResponse:
        return ModelResponse(Message.assistant("ok"))

    outer = Stack(noop, noop).compose("model", terminal, checked=False)
    inner = outer.__defaults__[0]  # type: ignore[attr-defined]
    assert outer.__code__ == inner.__code__ == noop.__code__
    assert len({id(outer.__code__), id(inner.__code__), id(noop.__code__)}) == 3
    sys.setprofile(lambda frame, event, arg: None)
    try:
        outer = Stack(noop, noop).compose("model", terminal, checked=False)
    finally:
        sys.setprofile(None)
    assert outer.__code__ is outer.__defaults__[0].__code__ is noop.__code__  # type: ignore[attr-defined]


@pytest.mark.skipif(not hasattr(__import__("sys"), "monitoring"), reason="sys.monitoring is Python 3.12+")
def test_a_profiler_registered_with_sys_monitoring_is_seen_as_cprofile_is_from_python_3_12() -> None:
    """cProfile registers with `sys.monitoring` from Python 3.12 (`sys.getprofile()` stays None): copies of a
    layer then share its code object too, and an agent built before rebuilds its chains."""
    import sys

    from onion._stack import profiling

    async def noop(ctx: ModelCall, call_next: Any) -> Any:
        return await call_next(ctx)

    async def terminal(ctx: ModelCall) -> ModelResponse:
        return ModelResponse(Message.assistant("ok"))

    monitoring: Any = getattr(sys, "monitoring")  # noqa: B009 (absent before 3.12)
    if monitoring.get_tool(monitoring.PROFILER_ID) is not None:
        pytest.skip("a profiler is already on")
    agent = Agent(ScriptedModel(["ok", "ok"]), middleware=[noop])
    agent.run_sync("hi")
    before = agent._chains
    monitoring.use_tool_id(monitoring.PROFILER_ID, "test profiler")
    try:
        assert profiling()
        outer = Stack(noop, noop).compose("model", terminal, checked=False)
        agent.run_sync("hi")
    finally:
        monitoring.free_tool_id(monitoring.PROFILER_ID)
    assert outer.__code__ is outer.__defaults__[0].__code__ is noop.__code__  # type: ignore[attr-defined]
    assert agent._chains is not before and not profiling()


def test_an_agent_that_ran_before_cprofile_started_rebuilds_its_chains_so_every_layer_call_is_counted() -> None:
    """Chains built without a profiler are built again once one is on, sharing the user's code objects."""

    async def plain(ctx: ToolCall, call_next: Any) -> Any:
        return await call_next(ctx)

    async def once(ctx: ToolCall, call_next: Any) -> Any:
        return await call_next(ctx)

    script = [[call("add", a=1, b=2)] * 3, "done"] * 3
    agent = Agent(ScriptedModel(script), tools=[add], middleware=[plain, once, plain])
    asyncio.run(agent.run("go"))
    counts = profiled_calls(agent, runs=2)
    assert counts["once"] >= 6 and counts["plain"] == 2 * counts["once"]  # at two depths, 6 tool calls
