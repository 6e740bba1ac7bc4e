"""The built-ins composed bare: `agent.use(rate_limit, cache, log)`, offline.

The same question is asked twice: the first run reaches the scripted model
(a tool call, then the answer), the second is served entirely from the cache
with zero usage. `log` sits inside `cache`, so it only records what reached
the model.

python examples/compose.py
"""

from __future__ import annotations

import asyncio
import logging
import sys

from middleware import cache, log, rate_limit
from onion import Agent, Message, ModelResponse, RunResult, Usage, tool
from onion.testing import ScriptedModel, call


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


async def main() -> list[RunResult]:
    model = ScriptedModel(
        [
            ModelResponse(Message.assistant("", [call("add", a=2, b=3)]), Usage(40, 12, 1)),
            ModelResponse(Message.assistant("2 + 3 = 5"), Usage(60, 8, 1)),
        ]
    )
    agent = Agent(model, tools=[add]).use(rate_limit, cache, log(payloads=False))
    print(agent.stack)
    results = []
    for attempt in ("first", "second"):
        print(f"{attempt} run:")
        result = await agent.run("What is 2 + 3?")
        print(f"  output: {result.output!r}  cache: {result.state['cache']}  tokens: {result.usage.total_tokens}")
        results.append(result)
    print(f"the model was called {len(model.requests)} times for 2 runs")
    return results


if __name__ == "__main__":
    logging.basicConfig(stream=sys.stdout, level=logging.INFO, format="  log: %(message)s")
    asyncio.run(main())
