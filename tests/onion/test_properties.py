"""Property-based: random stacks over random scripted batches keep every promise of the onion."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from onion import (
    Agent,
    Call,
    Message,
    ModelCall,
    ModelResponse,
    RunResult,
    ToolRequest,
    ToolResult,
    Usage,
    tool,
)
from onion.errors import OnionError
from onion.testing import FunctionModel

KINDS = ("run", "model", "tools", "tool")


@dataclass
class Spec:
    kinds: frozenset[str]
    behaviour: str  # pass | short | twice | inject


def valid(messages: list[Message]) -> bool:
    """An oracle independent of onion.check_history: each call answered right after, in order, once."""
    position = 0
    while position < len(messages):
        message = messages[position]
        if message.role == "tool":
            return False
        position += 1
        if message.role == "assistant" and message.tool_calls:
            answers = messages[position : position + len(message.tool_calls)]
            if [m.role for m in answers] != ["tool"] * len(message.tool_calls):
                return False
            if [m.tool_call_id for m in answers] != [c.id for c in message.tool_calls]:
                return False
            position += len(message.tool_calls)
    return True


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[int, str, int, str]] = []
        self.contexts: dict[int, Call] = {}

    def layer(self, index: int, spec: Spec) -> Any:
        recorder = self

        class Layer:
            name = f"layer{index}"

            async def handle(self, ctx: Any, call_next: Any) -> Any:
                recorder.contexts[id(ctx)] = ctx
                recorder.events.append((id(ctx), "in", index, ctx.kind))
                try:
                    return await self.act(ctx, call_next)
                finally:
                    recorder.events.append((id(ctx), "out", index, ctx.kind))

            async def act(self, ctx: Any, call_next: Any) -> Any:
                behaviour = spec.behaviour
                if behaviour == "inject":
                    ctx.run.inject(Message.user(f"note from {index} at {ctx.kind}"))
                if behaviour == "short" and ctx.kind != "run":
                    if ctx.kind == "model":
                        return ModelResponse(Message.assistant(f"short {index}"))
                    if ctx.kind == "tools":
                        return [call.block(f"by {index}") for call in ctx.calls]
                    return ToolResult(content=f"short {index}", call_id=ctx.id)
                if behaviour == "twice":
                    await call_next(ctx)
                return await call_next(ctx)

        instance = Layer()
        for kind in spec.kinds:
            setattr(instance, f"wrap_{kind}", instance.handle)
        return instance


def scripted(batches: list[int]) -> FunctionModel:
    def answer(call: ModelCall) -> Any:
        step = sum(1 for m in call.messages if m.role == "assistant")
        assert valid(call.messages), [(m.role, m.tool_call_id) for m in call.messages]
        if step >= len(batches):
            return f"final after {step}"
        return ModelResponse(
            Message.assistant("", [ToolRequest(f"s{step}c{i}", "echo", {"n": i}) for i in range(batches[step])]),
            Usage(requests=1),
        )

    return FunctionModel(answer)


@tool
async def echo(n: int) -> int:
    return n


specs = st.builds(
    Spec,
    kinds=st.frozensets(st.sampled_from(KINDS), min_size=1),
    behaviour=st.sampled_from(["pass", "pass", "short", "twice", "inject"]),
)


def assert_nested(recorder: Recorder, layer_kinds: list[frozenset[str]]) -> None:
    by_context: dict[int, list[tuple[str, int, str]]] = {}
    for context, direction, index, kind in recorder.events:
        by_context.setdefault(context, []).append((direction, index, kind))
    for trace in by_context.values():
        kind = trace[0][2]
        wrapping = [i for i, kinds in enumerate(layer_kinds) if kind in kinds]
        assert trace[0] == ("in", wrapping[0], kind), "the outermost layer must see the call first"
        open_layers: list[int] = []
        for direction, index, _ in trace:
            if direction == "in":
                assert not open_layers or index > open_layers[-1], f"layer {index} entered out of order: {trace}"
                open_layers.append(index)
            else:
                assert open_layers and open_layers[-1] == index, f"layer {index} left out of order: {trace}"
                open_layers.pop()
        assert not open_layers


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    layer_specs=st.lists(specs, max_size=6),
    batches=st.lists(st.integers(min_value=1, max_value=4), max_size=4),
    checked=st.booleans(),
    parallel=st.booleans(),
)
def test_random_stacks_keep_order_history_and_outcome(
    layer_specs: list[Spec], batches: list[int], checked: bool, parallel: bool
) -> None:
    import asyncio

    recorder = Recorder()
    layers = [recorder.layer(i, spec) for i, spec in enumerate(layer_specs)]
    model = scripted(batches)
    agent = Agent(model, tools=[echo], middleware=layers, max_steps=20, checked=checked, parallel_tools=parallel)
    try:
        result = asyncio.run(agent.run("go"))
    except OnionError as error:
        assert isinstance(error, OnionError)
    else:
        assert isinstance(result, RunResult)
        assert valid(result.messages)
        assert result.messages[-1].role in ("assistant", "user")
    for request in model.requests:
        assert valid(request.messages)
    assert_nested(recorder, [spec.kinds for spec in layer_specs])
