"""One layer per kind of call, typed with the `call_next` types onion exports; `mypy --strict` clean.

Each kind has its own handler type (`RunNext`, `ModelNext`, `ToolsNext`,
`ToolNext`), so `return await call_next(ctx)` type-checks without an ignore
and your editor completes `ctx.args` on a `ToolCall`.

python examples/typed_layers.py
"""

from __future__ import annotations

import asyncio

from onion import (
    Agent,
    Message,
    ModelCall,
    ModelNext,
    ModelResponse,
    Run,
    RunNext,
    RunResult,
    ToolBatch,
    ToolCall,
    ToolNext,
    ToolResult,
    ToolsNext,
    tool,
)
from onion.testing import ScriptedModel, call

seen: list[str] = []


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


async def timed_run(ctx: Run, call_next: RunNext) -> RunResult:
    result = await call_next(ctx)
    seen.append(f"run: {result.output}")
    return result


async def count_tokens(ctx: ModelCall, call_next: ModelNext) -> ModelResponse:
    response = await call_next(ctx)
    seen.append(f"model: {response.usage.output_tokens} tokens out")
    return response


async def after_batch(ctx: ToolBatch, call_next: ToolsNext) -> list[ToolResult]:
    results = await call_next(ctx)
    ctx.run.inject(Message.user(f"{len(results)} tools ran"))
    return results


async def small_numbers_only(ctx: ToolCall, call_next: ToolNext) -> ToolResult:
    if any(isinstance(value, int) and value > 1000 for value in ctx.args.values()):
        return ctx.block("numbers above 1000 are not allowed")
    return await call_next(ctx)


async def main() -> list[str]:
    model = ScriptedModel([[call("add", a=2, b=3), call("add", a=5000, b=1)], "2 + 3 = 5"])
    agent = Agent(model, tools=[add]).use(timed_run, count_tokens, after_batch, small_numbers_only)
    await agent.run("What is 2 + 3, and 5000 + 1?")
    return seen


if __name__ == "__main__":
    for line in asyncio.run(main()):
        print(line)
