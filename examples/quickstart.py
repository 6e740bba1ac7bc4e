"""Quickstart: two tools, one custom layer, a scripted model. Runs offline.

python examples/quickstart.py
"""

from __future__ import annotations

import asyncio
import time
from typing import Annotated, Any

from pydantic import Field

from onion import Agent, Call, tool
from onion.testing import ScriptedModel, call


@tool
def add(a: float, b: float) -> float:
    """Add two numbers."""
    return a + b


@tool
async def lookup_price(item: Annotated[str, Field(description="The product name")]) -> float:
    """Price of a product in euros."""
    return {"apple": 0.5, "bread": 2.25}.get(item, 1.0)


async def timing(ctx: Call, call_next: Any) -> Any:
    """A custom layer around every kind of call: prints what it wrapped and how long it took."""
    started = time.perf_counter()
    result = await call_next(ctx)
    print(f"  [{ctx.kind:5}] {(time.perf_counter() - started) * 1e3:6.2f} ms")
    return result


async def main() -> str:
    model = ScriptedModel(
        [
            [call("lookup_price", item="apple"), call("lookup_price", item="bread")],
            [call("add", a=0.5, b=2.25)],
            "An apple and a loaf of bread cost 2.75 EUR together.",
        ]
    )
    agent = Agent(model, tools=[add, lookup_price], instructions="You are a shop assistant.", middleware=[timing])
    result = await agent.run("What do an apple and a loaf of bread cost?")
    for message in result.messages:
        calls = ", ".join(f"{c.name}{c.args}" for c in message.tool_calls)
        print(f"{message.role:9} {message.text or calls}")
    print("answer:", result.output)
    return result.output


if __name__ == "__main__":
    asyncio.run(main())
