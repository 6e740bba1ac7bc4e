"""Agents whose tools run long: long enough to cancel the workflow meanwhile (tests/temporal/test_cancel.py), or
to outlast the activity's timeout and be tried again (tests/temporal/test_idempotency.py)."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy

from onion import Agent, ModelCall, ToolCall, ToolNext, ToolResult, tool
from onion.temporal import ActivityOptions
from onion.temporal._activities import forget_conversations
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


KEYS: list[str] = []
"""The idempotency key each attempt of `book` saw, in order."""


@tool(idempotent=True)
async def book(room: int, call: ToolCall) -> str:
    """Books a room with the payment API's idempotency key; its first attempt outlasts the activity's timeout."""
    KEYS.append(call.idempotency_key)
    if len(KEYS) == 1:
        await asyncio.sleep(10)
    return f"room {room} booked"


async def keyed(call: ToolCall, call_next: ToolNext) -> ToolResult:
    """Notes, in workflow code, the key of each tool call (in `run.state`)."""
    call.run.state.setdefault("keys", []).append(call.idempotency_key)
    return await call_next(call)


def booker(model_call: ModelCall) -> Any:
    """Asks to book room 4, then answers with what the tool said."""
    results = [m.text for m in model_call.messages if m.role == "tool"]
    return [call("book", room=4)] if not results else results[-1]


hotel = Agent(FunctionModel(booker, name="booker"), name="hotel", tools=[book]).use(keyed)

AGENTS.append(hotel)

HOTEL_OPTIONS = ActivityOptions(
    start_to_close_timeout=timedelta(seconds=2),
    heartbeat_timeout=timedelta(seconds=1),
    heartbeat_every=0.2,
    retry=RetryPolicy(initial_interval=timedelta(milliseconds=100), maximum_attempts=3),
)
"""A call still running after 2 s is given up and, being idempotent, tried again."""


@workflow.defn
class Hotel:
    """Runs the hotel agent: its answer and the keys the workflow's tool calls had."""

    @workflow.run
    async def run(self, question: str) -> dict[str, Any]:
        result = await hotel.run(question)
        return {"output": result.output, "keys": result.state["keys"]}


DUMPS: list[int] = []
"""Each run of `dump`, with the size it was asked for."""


@tool(idempotent=True)
def dump(size: int) -> str:
    """Dumps `size` characters of the archive."""
    DUMPS.append(size)
    return "x" * size


def archivist(model_call: ModelCall) -> Any:
    """Asks for 3 MB of the archive, then answers with the first 300 characters of what the tool said."""
    results = [m.text for m in model_call.messages if m.role == "tool"]
    return [call("dump", size=3_000_000)] if not results else results[-1][:300]


archive = Agent(FunctionModel(archivist, name="archivist"), name="archive", tools=[dump])

AGENTS.append(archive)


@workflow.defn
class Archive:
    """Runs the archive agent."""

    @workflow.run
    async def run(self, question: str) -> str:
        return (await archive.run(question)).output


PAGE = "lorem ipsum " * 1_700
"""About 20 KB: each page the long agent reads adds that much to its conversation."""

FORGET_AT: list[int] = []
"""The page after which the worker forgets the conversations it keeps (as a new worker would not have them)."""


@tool
def page(n: int) -> str:
    """Reads page `n` of a long document."""
    if FORGET_AT and n == FORGET_AT[0]:
        forget_conversations()
    return f"page {n}: {PAGE}"


def reader(model_call: ModelCall) -> Any:
    """Reads 40 pages one model call at a time, then says how many pages its conversation held."""
    read = [m for m in model_call.messages if m.role == "tool"]
    if len(read) < 40:
        return [call("page", n=len(read) + 1)]
    return f"read {len(read)} pages, {sum(len(m.text) for m in read)} characters"


long_reader = Agent(FunctionModel(reader, name="reader"), name="long-reader", tools=[page])

AGENTS.append(long_reader)


@workflow.defn
class LongRead:
    """Runs the long reader: 41 model calls over a conversation that grows to about 800 KB."""

    @workflow.run
    async def run(self, question: str) -> str:
        return (await long_reader.run(question)).output
