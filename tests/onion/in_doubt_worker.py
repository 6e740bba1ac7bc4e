"""A worker process for `test_in_doubt_processes.py`: it dies (SIGKILL, from the test) inside a refund.

`python in_doubt_worker.py STORE NAMESPACE EFFECTS`: STORE is a Redis URL or a SQLite file's path. The run asks
for `refund`, a tool with `in_doubt="ask"` that writes `refund RUN_ID KEY` to EFFECTS (the payment API's log: what
it did, under which idempotency key) and then hangs until it is killed. `agent` is the same agent, its refund not
hanging, writing to the file $EFFECTS names: `python -m onion runs ... --agent in_doubt_worker:agent` decides.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path
from typing import Any

from onion import Agent, Message, ModelCall, ModelResponse, ToolCall, tool
from onion.stores import RedisStore, SQLiteStore
from onion.testing import FunctionModel, call

LEASE = 1.0
"""The worker's lease, in seconds: once it is killed, its run can be recovered that much later."""


def open_store(where: str, namespace: str) -> Any:
    return RedisStore(where, namespace=namespace) if where.startswith("redis://") else SQLiteStore(where)


def answer(request: ModelCall) -> ModelResponse:
    """Ask for `refund` first; then answer with what the model read for it."""
    last = request.messages[-1]
    if last.role == "tool":
        return ModelResponse(Message.assistant(f"read: {last.text}"))
    return ModelResponse(Message.assistant("", [call("refund", order="o-1")]))


def refund_tool(effects: Path, *, hang: bool) -> Any:
    @tool(in_doubt="ask")
    def refund(order: str, call: ToolCall) -> str:
        """Refund an order."""
        with effects.open("a") as log:
            log.write(f"refund {call.run.id} {call.idempotency_key}\n")
        if hang:
            time.sleep(600)
        return f"refunded {order}"

    return refund


async def main(where: str, namespace: str, effects: Path) -> None:
    store = open_store(where, namespace)
    agent = Agent(FunctionModel(answer), tools=[refund_tool(effects, hang=True)], store=store, lease=LEASE)
    await agent.run("refund o-1")


agent = Agent(FunctionModel(answer), tools=[refund_tool(Path(os.environ.get("EFFECTS", "payments.log")), hang=False)])

if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], Path(sys.argv[3])))
