"""The soak's agent and workflow: each run charges its order (not idempotent) and resends its receipt (idempotent).

Both tools take `SOAK_TOOL_SECONDS` and write `start`/`done` lines to the
side-effects file ($ONION_EFFECTS) with the call's id and the worker's pid, so
the soak can count what ran twice and which kills landed mid-call.
"""

from __future__ import annotations

import os
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy

from onion import Agent, ModelCall, tool
from onion.temporal import ActivityOptions
from onion.testing import FunctionModel, call

SOAK_TOOL_SECONDS = 1.0

SOAK_OPTIONS = ActivityOptions(
    heartbeat_timeout=timedelta(seconds=1),
    heartbeat_every=0.2,
    retry=RetryPolicy(initial_interval=timedelta(milliseconds=100), maximum_attempts=20),
)
"""A dead worker's call is given up after 1 s; a lost model call or resend is tried again 0.1 s later."""


def effect(event: str, call_id: str) -> None:
    """Appends `<event> <call id> <pid>` to the side-effects file in one write (O_APPEND: lines never interleave)."""
    fd = os.open(Path(os.environ["ONION_EFFECTS"]), os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, f"{event} {call_id} {os.getpid()}\n".encode())
    finally:
        os.close(fd)


@tool
def charge(order: int) -> str:
    """Charges an order (not idempotent): never to run twice for one call."""
    effect("start", f"charge-{order}")
    time.sleep(SOAK_TOOL_SECONDS)
    effect("done", f"charge-{order}")
    return f"charged order {order}"


@tool(idempotent=True)
def resend(order: int) -> str:
    """Sends an order's receipt again (idempotent): may run again after its worker died."""
    effect("start", f"resend-{order}")
    time.sleep(SOAK_TOOL_SECONDS)
    effect("done", f"resend-{order}")
    return f"receipt of order {order} sent"


def teller(model_call: ModelCall) -> Any:
    """Calls charge and resend for the order the question ends with, then reports both results."""
    results = [m.text for m in model_call.messages if m.role == "tool"]
    if not results:
        order = int(model_call.messages[-1].text.split()[-1])
        return [call("charge", order=order), call("resend", order=order)]
    return "; ".join(results)


soak = Agent(FunctionModel(teller, name="teller"), name="soak", tools=[charge, resend])


@workflow.defn
class Soak:
    """Runs the soak agent on one order."""

    @workflow.run
    async def run(self, question: str) -> str:
        return (await soak.run(question)).output
