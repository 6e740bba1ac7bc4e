"""The limit: a minimal hand-written asyncio agent loop doing the workload's work.

Plain dicts for messages, pydantic for the arguments (the same validation
onion does), `asyncio.gather` for the tool batch, and layers hand-composed
once as one closure each: what CPython allows without a framework.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import pydantic

from .workload import ARGUMENTS, FINAL, add

Next = Callable[[Any], Awaitable[Any]]


class AddArguments(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")
    a: int
    b: int


def noop_layer(call_next: Next) -> Next:
    """A no-op layer, composed once around `call_next`."""

    async def layer(ctx: Any) -> Any:
        return await call_next(ctx)

    return layer


def compose(layers: int, terminal: Next) -> Next:
    chain = terminal
    for _ in range(layers):
        chain = noop_layer(chain)
    return chain


class HandLoop:
    """`await HandLoop(layers).run(question)` returns the final answer and the history."""

    def __init__(self, layers: int = 0, latency: float = 0.0) -> None:
        self.latency = latency
        self.model = compose(layers, self._model)
        self.tool = compose(layers, self._tool)

    async def _model(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        if self.latency:
            await asyncio.sleep(self.latency)
        if messages[-1]["role"] == "user":
            calls = [{"id": f"call_{i}", "name": "add", "args": json.loads(a)} for i, a in enumerate(ARGUMENTS)]
            return {"role": "assistant", "content": "", "tool_calls": calls}
        return {"role": "assistant", "content": FINAL, "tool_calls": []}

    async def _tool(self, call: dict[str, Any]) -> str:
        arguments = AddArguments.model_validate(call["args"])
        return str(await add(arguments.a, arguments.b))

    async def run(self, question: str) -> tuple[str, list[dict[str, Any]]]:
        messages: list[dict[str, Any]] = [{"role": "user", "content": question}]
        while True:
            reply = await self.model(list(messages))
            messages.append(reply)
            if not reply["tool_calls"]:
                return reply["content"], messages
            results = await asyncio.gather(*(self.tool(call) for call in reply["tool_calls"]))
            messages.extend(
                {"role": "tool", "tool_call_id": call["id"], "content": result}
                for call, result in zip(reply["tool_calls"], results, strict=True)
            )
