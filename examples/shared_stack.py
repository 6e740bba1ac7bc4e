"""One stack reused by two agents: its layers (and their state) are shared.

python examples/shared_stack.py
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

from onion import Agent, ModelCall, Stack, ToolCall
from onion.testing import ScriptedModel, call


class CallCounter:
    """A layer with state: counts model and tool calls of every agent that shares it."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()

    async def wrap_model(self, ctx: ModelCall, call_next: Any) -> Any:
        self.counts[f"{ctx.run.agent.name}: model"] += 1
        return await call_next(ctx)

    async def wrap_tool(self, ctx: ToolCall, call_next: Any) -> Any:
        self.counts[f"{ctx.run.agent.name}: tool {ctx.name}"] += 1
        return await call_next(ctx)


def shout(text: str) -> str:
    """Upper-case a text."""
    return text.upper()


async def main() -> Counter[str]:
    counter = CallCounter()
    shared = Stack(counter, name="company-policy")
    writer = Agent(ScriptedModel([[call("shout", text="hi")], "HI"]), tools=[shout], middleware=[shared], name="writer")
    critic = Agent(ScriptedModel(["Looks fine."]), middleware=[shared], name="critic")
    await asyncio.gather(writer.run("Say hi loudly."), critic.run("Review it."))
    print(shared)
    for key, value in sorted(counter.counts.items()):
        print(f"{key}: {value}")
    return counter.counts


if __name__ == "__main__":
    asyncio.run(main())
