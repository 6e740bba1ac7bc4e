"""The demo: a small agent on a scripted model, run twice through a real stack, captured by `onion.tracing`."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import tracing
from ._agent import Agent
from ._calls import ModelResponse, RunResult, ToolBatch, ToolCall, ToolResult
from ._messages import Message, ToolRequest, Usage
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


def build(model: Any) -> Agent:
    from middleware import cache, log, rate_limit, retry

    return Agent(
        model,
        tools=[get_weather, to_fahrenheit, delete_files],
        instructions="You answer weather questions with tools.",
        middleware=[log(payloads=False), rate_limit(rpm=600), cache, retry(attempts=3), no_deletes, reflect],
        name="weather",
    )


async def main(
    model_name: str | None = None, out: Callable[[str], None] = print, html: str | Path | None = None
) -> list[RunResult]:
    """Run the demo agent twice, printing each run's messages and trace; with `html`, write the trace page there."""
    from .testing import ScriptedModel

    logging.basicConfig(stream=sys.stdout, level=logging.INFO, format="    log: %(message)s")
    model: Any = model_name or ScriptedModel(script())
    agent = build(model)
    out(f"onion demo: the agent '{agent.name}' on {getattr(agent.model, 'name', agent.model)}, offline\n")
    out(repr(agent.stack) + "\n")
    results = []
    with tracing.capture() as trace:
        for attempt in (1, 2):
            out(f"== run {attempt}: {QUESTION}")
            result = await agent.run(QUESTION)
            show_messages(result.messages, out)
            out("  the run as a tree: each call, the layers it passed (outermost first) with their own time:")
            out("    " + str(trace.runs[-1]).replace("\n", "\n    "))
            usage = result.usage
            tokens = f"{usage.input_tokens} input + {usage.output_tokens} output tokens"
            out(f"  usage: {usage.requests} model requests, {tokens}")
            if attempt == 2 and usage.requests == 0:
                out("  run 2 was served from the cache: no model request, zero tokens.")
            out("")
            results.append(result)
    if html is not None:
        out(f"the trace page: {trace.to_html(html)}")
    return results
