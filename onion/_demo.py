"""The demo: a small agent on a scripted model, run twice through a real stack, traced layer by layer."""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

from ._agent import Agent
from ._calls import Call, ModelResponse, Run, RunResult, ToolBatch, ToolCall, ToolResult
from ._layers import Layer
from ._messages import Message, ToolRequest, Usage
from ._stack import Handler, Stack
from ._tools import tool
from .errors import RateLimitedError
from .hooks import Block, after_tools, before_each_tool

QUESTION = "Is it warmer in Paris or in Oslo right now, in Fahrenheit?"


@tool
async def get_weather(city: str) -> dict[str, Any]:
    """Current temperature in Celsius for a city."""
    return {"city": city, "celsius": {"Paris": 18, "Oslo": 4}.get(city, 10)}


@tool
def to_fahrenheit(celsius: float) -> float:
    """Convert Celsius to Fahrenheit."""
    return round(celsius * 9 / 5 + 32, 1)


@tool
def delete_files(path: str) -> str:
    """Delete files under a path."""
    raise AssertionError("never runs: blocked by a before_each_tool hook")


def script() -> list[Any]:
    """What the scripted model answers, in order: once rate limited, then a real conversation."""

    def asks(*calls: ToolRequest, tokens: tuple[int, int]) -> ModelResponse:
        return ModelResponse(Message.assistant("", list(calls)), Usage(tokens[0], tokens[1], 1), model="scripted")

    return [
        RateLimitedError("429 Too Many Requests (scripted)", retry_after=0.05),
        asks(
            ToolRequest("call_1", "get_weather", {"city": "Paris"}),
            ToolRequest("call_2", "get_weather", {"city": "Oslo"}),
            ToolRequest("call_3", "delete_files", {"path": "/tmp/cache"}),
            tokens=(120, 40),
        ),
        asks(
            ToolRequest("call_4", "to_fahrenheit", {"celsius": 18}),
            ToolRequest("call_5", "to_fahrenheit", {"celsius": 4}),
            tokens=(210, 30),
        ),
        ModelResponse(
            Message.assistant("Paris is warmer: 64.4°F against 39.2°F in Oslo."), Usage(260, 20, 1), model="scripted"
        ),
    ]


@before_each_tool("delete_files")
def no_deletes(call: ToolCall) -> Block:
    return Block("deleting files is not allowed in the demo")


@after_tools
def reflect(batch: ToolBatch, results: list[ToolResult]) -> None:
    batch.run.inject(f"{len(results)} tool results arrived. Check them before answering.")


class Trace:
    """Wraps each layer of a stack to record, per call, the layers passed and the time spent in each."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[tuple[str, float, int]]]] = []
        self._open: dict[int, list[tuple[str, float, int]]] = {}

    def wrap(self, stack: Stack) -> Stack:
        return Stack(*(self._timed(layer) for layer in stack.layers()), name=stack.name)

    def _timed(self, layer: Layer) -> SimpleNamespace:
        proxy = SimpleNamespace(name=layer.name)
        for kind, function in layer.wraps.items():
            setattr(proxy, f"wrap_{kind}", self._timer(layer.name, function))
        return proxy

    def _timer(self, name: str, function: Callable[..., Any]) -> Callable[[Call, Handler], Any]:
        async def timed(ctx: Call, call_next: Handler) -> Any:
            if id(ctx) not in self._open:
                entries: list[tuple[str, float, int]] = []
                self._open[id(ctx)] = entries
                self.calls.append((describe(ctx), entries))
            entry = len(self._open[id(ctx)])
            self._open[id(ctx)].append((name, 0.0, 0))
            inner = 0.0
            passes = 0

            async def timed_next(ctx: Call) -> Any:
                nonlocal inner, passes
                passes += 1
                started = time.perf_counter()
                try:
                    return await call_next(ctx)
                finally:
                    inner += time.perf_counter() - started

            started = time.perf_counter()
            try:
                return await function(ctx, timed_next)
            finally:
                self._open[id(ctx)][entry] = (name, time.perf_counter() - started - inner, passes)
                if entry == 0:
                    del self._open[id(ctx)]

        return timed


def describe(ctx: Call) -> str:
    if isinstance(ctx, Run):
        return "run"
    if isinstance(ctx, ToolBatch):
        return f"tools [{', '.join(call.name for call in ctx.calls)}]"
    if isinstance(ctx, ToolCall):
        return f"tool {ctx.name}({arguments(ctx.args)})"
    return f"model call {ctx.run.steps}"


def arguments(args: dict[str, Any]) -> str:
    return ", ".join(f"{key}={value!r}" for key, value in args.items())


def show_messages(messages: list[Message], out: Callable[[str], None]) -> None:
    for message in messages:
        if message.tool_calls:
            calls = ", ".join(f"{c.name}({arguments(c.args)})" for c in message.tool_calls)
            out(f"  {message.role:9} -> {calls}")
        else:
            flag = " (error)" if message.is_error else ""
            out(f"  {message.role:9} {message.text}{flag}")


def show_trace(trace: Trace, out: Callable[[str], None]) -> None:
    out("  calls, with the layers each passed through (outermost first) and the time spent in each layer itself:")
    notes = {0: " (answered itself)", 1: ""}
    for what, entries in trace.calls:
        layers = " -> ".join(
            f"{name} {seconds * 1e3:.2f}ms{notes.get(passes, f' (called the next layer {passes} times)')}"
            for name, seconds, passes in entries
        )
        out(f"    {what:38} {layers}")


def build(model: Any) -> Agent:
    from middleware import cache, log, rate_limit, retry

    return Agent(
        model,
        tools=[get_weather, to_fahrenheit, delete_files],
        instructions="You answer weather questions with tools.",
        middleware=[log(payloads=False), rate_limit(rpm=600), cache, retry(attempts=3), no_deletes, reflect],
        name="weather",
    )


async def main(model_name: str | None = None, out: Callable[[str], None] = print) -> list[RunResult]:
    from .testing import ScriptedModel

    logging.basicConfig(stream=sys.stdout, level=logging.INFO, format="    log: %(message)s")
    model: Any = model_name or ScriptedModel(script())
    agent = build(model)
    out(f"onion demo: the agent '{agent.name}' on {getattr(agent.model, 'name', agent.model)}, offline\n")
    out(repr(agent.stack) + "\n")
    results = []
    for attempt in (1, 2):
        trace = Trace()
        traced = Agent(agent.model, tools=agent.tools, instructions=agent.instructions, name=agent.name)
        traced.stack = trace.wrap(agent.stack)
        out(f"== run {attempt}: {QUESTION}")
        result = await traced.run(QUESTION)
        show_messages(result.messages, out)
        show_trace(trace, out)
        usage = result.usage
        tokens = f"{usage.input_tokens} input + {usage.output_tokens} output tokens"
        out(f"  usage: {usage.requests} model requests, {tokens}")
        if attempt == 2 and usage.requests == 0:
            out("  run 2 was served from the cache: no model request, zero tokens.")
        out("")
        results.append(result)
    return results
