"""The workload of shared/PEERS.md, on onion: three parallel `add` calls, then an answer.

One run = model call 1 asks for `add(1,2) add(3,4) add(5,6)` (arguments arrive
as JSON and are validated as ints), the tools run concurrently, model call 2
answers `FINAL`. "N layers" = N no-op middleware, each wrapping both model
calls and all three tool calls.
"""

from __future__ import annotations

import asyncio
import json

from onion import Agent, Handler, Message, ModelCall, ModelResponse, ToolCall, ToolRequest, ToolResult, Usage, tool

ARGUMENTS = ('{"a": 1, "b": 2}', '{"a": 3, "b": 4}', '{"a": 5, "b": 6}')
"""The three tool calls' arguments, as a provider sends them."""
FINAL = "sums: 3,7,11"
QUESTION = "add 1+2, 3+4 and 5+6"


async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


class StepModel:
    """A fake model that answers by step: tool calls after the question, `FINAL` after results.

    Unlike `ScriptedModel` it keeps no script and records nothing, so one
    instance serves any number of runs. `latency` is awaited on every request.
    """

    name = "step"

    def __init__(self, latency: float = 0.0) -> None:
        self.latency = latency

    async def request(self, call: ModelCall) -> ModelResponse:
        if self.latency:
            await asyncio.sleep(self.latency)
        if call.messages[-1].role == "user":
            requests = [
                ToolRequest(id=f"call_{index}", name="add", args=json.loads(arguments))
                for index, arguments in enumerate(ARGUMENTS)
            ]
            return ModelResponse(Message.assistant("", requests), Usage(requests=1))
        return ModelResponse(Message.assistant(FINAL), Usage(requests=1))


async def noop(ctx: ModelCall | ToolCall, call_next: Handler) -> ModelResponse | ToolResult:
    """A layer that does nothing, around model calls and tool calls."""
    return await call_next(ctx)  # type: ignore[no-any-return]


def onion_agent(layers: int, latency: float = 0.0) -> Agent:
    """An agent for the workload with `layers` no-op layers (unchecked, as in production)."""
    return Agent(StepModel(latency), tools=[tool(add)], middleware=[noop] * layers, checked=False)


def check(answer: str, tool_texts: list[str]) -> None:
    """Fail loudly if a system did not do the whole workload."""
    if answer != FINAL or tool_texts != ["3", "7", "11"]:
        raise AssertionError(f"wrong workload result: {answer!r}, tool results {tool_texts!r}")
