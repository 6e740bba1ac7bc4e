"""A worker process for `test_decisions_on_record.py`: it decides a paused run and dies (SIGKILL, from the test)
inside the approved tool.

`python decided_worker.py STORE NAMESPACE RUN_ID EFFECTS`: STORE is a Redis URL or a SQLite file's path. Ann
approves the paused `refund` and rejects the paused `close`; the resumed run writes `refund` to EFFECTS and then
hangs in the refund until it is killed.
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from typing import Any

from middleware import approve
from onion import Agent, Decisions, Message, ModelCall, ModelResponse, Principal, tool
from onion.stores import RedisStore, SQLiteStore
from onion.testing import FunctionModel, call

LEASE = 1.0
"""The worker's lease, in seconds: once it is killed, its run can be recovered that much later."""
ANN = Principal("ann", tenant="acme", roles={"refunds"})


def open_store(where: str, namespace: str) -> Any:
    return RedisStore(where, namespace=namespace) if where.startswith("redis://") else SQLiteStore(where)


def answer(request: ModelCall) -> ModelResponse:
    """Ask for `refund` and `close` at once; then answer with what the model read for them."""
    if request.messages[-1].role == "tool":
        read = [m.text for m in request.messages if m.role == "tool"]
        return ModelResponse(Message.assistant("read: " + " | ".join(read)))
    return ModelResponse(Message.assistant("", [call("refund", order="o-1"), call("close", order="o-1")]))


def build(store: Any, effects: Path, *, hang: bool) -> Agent:
    @tool
    def refund(order: str) -> str:
        """Refund an order."""
        with effects.open("a") as log:
            log.write(f"refund {order}\n")
        if hang:
            time.sleep(600)
        return f"refunded {order}"

    @tool
    def close(order: str) -> str:
        """Close an order."""
        with effects.open("a") as log:
            log.write(f"close {order}\n")
        return f"closed {order}"

    return Agent(FunctionModel(answer), tools=[refund, close], store=store, lease=LEASE, name="refunds").use(
        approve(["refund", "close"])
    )


async def main(where: str, namespace: str, run_id: str, effects: Path) -> None:
    store = open_store(where, namespace)
    agent = build(store, effects, hang=True)
    state = await store.load(run_id)
    refund_id, close_id = (pending.id for pending in state.pending)
    decisions = Decisions(approve=[refund_id], reject={close_id: "keep it open"})
    await agent.resume(await agent.decide(run_id, decisions, principal=ANN), principal=ANN)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], Path(sys.argv[4])))
