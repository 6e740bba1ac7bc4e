"""A worker process for `test_budget_workers.py`: concurrent runs of tenant "acme" spending one shared day's budget.

`python budget_worker.py STORE NAMESPACE RUNS`: STORE is a Redis URL or a SQLite file's path. After printing
`ready` it waits for `go`, then runs RUNS runs of tenant "acme" at once, each asking the model again and again
(every call costs 1/64 USD) until `BudgetExceeded` stops it, then one run of tenant "beta" (two calls). It prints
`calls N stopped M beta OUTPUT`: the model calls it made, the runs the budget stopped, beta's answer.
"""

from __future__ import annotations

import asyncio
import random
import sys
from typing import Any

from middleware import budget
from onion import Agent, Message, ModelCall, ModelResponse, Principal, Usage, tool
from onion.errors import BudgetExceeded
from onion.stores import RedisStore, SQLiteStore
from onion.testing import FunctionModel, call

PRICES = {"priced": (1.0, 1.0)}
CALL_COST = 1 / 64
"""What each model call costs: 15,625 input tokens at $1 per million (exact in binary, so sums are too)."""

calls = 0


@tool
def step() -> str:
    """One more step."""
    return "again"


async def answer(request: ModelCall) -> ModelResponse:
    """Ask for `step` forever (tenant acme) or answer after one step (tenant beta), after a short random wait."""
    global calls
    calls += 1
    await asyncio.sleep(random.uniform(0.001, 0.01))
    principal = request.run.principal
    done = principal is not None and principal.tenant == "beta" and len(request.messages) > 2
    message = Message.assistant("beta done") if done else Message.assistant("", [call("step")])
    return ModelResponse(message, Usage(15_625, 0, 1), model="priced")


async def spend_until_stopped(agent: Agent[Any], who: Principal) -> bool:
    try:
        await agent.run("go", principal=who)
    except BudgetExceeded:
        return True
    return False


async def main(where: str, namespace: str, runs: int) -> None:
    store: Any = RedisStore(where, namespace=namespace) if where.startswith("redis://") else SQLiteStore(where)
    layer = budget(max_cost=1.0, per="tenant", window="day", prices=PRICES, store=store)
    agent = Agent(FunctionModel(answer, name="priced"), tools=[step], max_steps=10_000).use(layer)
    print("ready", flush=True)
    assert sys.stdin.readline() == "go\n"
    acme = [Principal(f"u-{n}", tenant="acme") for n in range(runs)]
    stopped = await asyncio.gather(*(spend_until_stopped(agent, who) for who in acme))
    beta = await agent.run("go", principal=Principal("b-1", tenant="beta"))
    print("calls", calls, "stopped", sum(stopped), "beta", beta.output.replace(" ", "-"), flush=True)
    await store.aclose()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
