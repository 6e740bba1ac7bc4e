"""The demo: a small agent on a scripted model, run twice through a real stack, captured by `onion.tracing`."""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import tracing
from ._agent import Agent
from ._calls import ToolBatch, ToolCall
from ._messages import Message, ToolRequest, Usage
from ._results import ModelResponse, ToolResult
from ._run import RunResult
from ._tools import tool
from .errors import RateLimitedError
from .hooks import Block, after_tools, before_each_tool

QUESTION = "Is it warmer in Paris or in Oslo right now, in Fahrenheit?"
PROG = "python -m onion demo"
MAX_STEPS = 10
"""The demo's question takes three model calls: a model still calling tools after ten is looping."""


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


def build(model: Any, logger: logging.Logger | None = None) -> Agent:
    from middleware import cache, log, rate_limit, retry

    return Agent(
        model,
        tools=[get_weather, to_fahrenheit, delete_files],
        instructions="You answer weather questions with tools.",
        middleware=[log(logger, payloads=False), rate_limit(rpm=600), cache, retry(attempts=3), no_deletes, reflect],
        name="weather",
        max_steps=MAX_STEPS,
    )


class _Lines(logging.Handler):
    """Each record as a `    log: ...` line through `out`."""

    def __init__(self, out: Callable[[str], None]) -> None:
        super().__init__()
        self.out = out
        self.setFormatter(logging.Formatter("    log: %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        self.out(self.format(record))


def demo_logger(out: Callable[[str], None]) -> logging.Logger:
    """The demo's `log` layer writes here: a logger outside the logging tree, so only its records read `log:`."""
    logger = logging.Logger("onion.demo")
    logger.addHandler(_Lines(out))
    return logger


def cli(model_name: str | None = None, html: Path | None = None) -> None:
    """`python -m onion demo`: every error (a bad model string, no API key, a model that never answers, an html
    path that cannot be written) is one line on stderr and exit status 1, not a traceback."""
    try:
        asyncio.run(main(model_name, html=html))
    except KeyboardInterrupt:
        raise SystemExit(130) from None
    except BrokenPipeError:  # `python -m onion demo | head`: the reader has gone; end quietly, as on SIGPIPE
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise SystemExit(141) from None
    except Exception as error:
        raise SystemExit(f"{PROG}: {_said(error)}") from None


def _said(error: Exception) -> str:
    """The error as one line: its message (with its type when the message alone would not say what it is)."""
    from .errors import OnionError

    text = " ".join(str(error).split()) or type(error).__name__
    known = isinstance(error, OnionError | ValueError | OSError | ImportError)
    return text if known else f"{type(error).__name__}: {text}"


async def main(
    model_name: str | None = None, out: Callable[[str], None] = print, html: str | Path | None = None
) -> list[RunResult]:
    """Run the demo agent twice, printing each run's messages and trace; with `html`, write the trace page there."""
    from .testing import ScriptedModel

    if html is not None and not Path(html).parent.is_dir():
        raise OSError(f"cannot write the trace page to {html}: there is no folder {Path(html).parent}")
    model: Any = model_name or ScriptedModel(script())
    agent = build(model, demo_logger(out))
    name = getattr(agent.model, "name", agent.model)
    on = f"{name}, offline" if model_name is None else f"{name} ({model_name}), live: real requests, with its API key"
    out(f"onion demo: the agent '{agent.name}' on {on}\n")
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
                out("  (a cached answer that asks for tools still runs those tools in the new run, side effects too;")
                out("  cache(tool_calls=False) caches only answers without tool calls: docs/middleware-library.md)")
            out("")
            results.append(result)
    if html is not None:
        try:
            out(f"the trace page: {trace.to_html(html)}")
        except OSError as error:
            raise OSError(f"cannot write the trace page to {html}: {error.strerror or error}") from error
    return results
