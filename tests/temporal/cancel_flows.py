"""An agent whose tool runs long enough to cancel its workflow meanwhile (tests/temporal/test_cancel.py)."""

from __future__ import annotations

import asyncio
from typing import Any

from temporalio import workflow

from onion import Agent, ModelCall, tool
from onion.testing import FunctionModel, call

SEEN: list[str] = []
"""What the in-process worker's tool and model did, in order: `model`, `send started`, `send cancelled`, ..."""


@tool
async def send(order: int) -> str:
    """Sends an order; takes half a minute, unless its call is cancelled."""
    SEEN.append("send started")
    try:
        await asyncio.sleep(30)
    except asyncio.CancelledError:
        SEEN.append("send cancelled")
        raise
    SEEN.append("send done")
    return f"order {order} sent"


def sender(model_call: ModelCall) -> Any:
    """Asks to send order 7, then to send it again, then answers."""
    SEEN.append("model")
    sent = [m for m in model_call.messages if m.role == "tool"]
    return [call("send", order=7)] if len(sent) < 2 else "sent twice"


courier = Agent(FunctionModel(sender, name="sender"), name="courier", tools=[send])

AGENTS = [courier]


@workflow.defn
class Courier:
    """Runs the courier agent on one request."""

    @workflow.run
    async def run(self, question: str) -> str:
        return (await courier.run(question)).output
