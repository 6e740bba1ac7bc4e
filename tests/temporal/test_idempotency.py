"""A tool activity gets its `ToolCall`, with the idempotency key the call has in workflow code, the same for
every attempt of the activity; a result too large for Temporal's history is answered as such, once."""

from __future__ import annotations

import uuid
from datetime import timedelta

import cancel_flows
from conftest import AGENTS
from temporalio.client import Client
from temporalio.worker import Worker

from onion.temporal import OnionPlugin


async def test_a_tool_activity_gets_its_calls_idempotency_key_on_every_attempt(temporal_address: str) -> None:
    """The tool's first attempt outlasts the activity's timeout and is tried again: both attempts see the key the
    workflow's tool layer read for the call, an onion key (not None)."""
    cancel_flows.KEYS.clear()
    client = await Client.connect(temporal_address, plugins=[OnionPlugin(*AGENTS, options=cancel_flows.HOTEL_OPTIONS)])
    queue = f"q-{uuid.uuid4().hex}"
    async with Worker(client, task_queue=queue, workflows=[cancel_flows.Hotel]):
        done = await client.execute_workflow(
            cancel_flows.Hotel.run, "book room 4", id=f"w-{uuid.uuid4().hex}", task_queue=queue
        )
    assert done["output"] == "room 4 booked"
    [key] = done["keys"]
    assert key.startswith("onion-")
    assert [key, key] == cancel_flows.KEYS


async def test_a_tool_result_over_the_payload_limit_is_answered_as_too_large_and_not_retried(client: Client) -> None:
    """A 3 MB result (Temporal's limit is 2 MB a payload): the model reads that it was too large, with its size and
    the limit; the idempotent tool ran once (nothing retried for a limit that will not change)."""
    cancel_flows.DUMPS.clear()
    queue = f"q-{uuid.uuid4().hex}"
    async with Worker(client, task_queue=queue, workflows=[cancel_flows.Archive]):
        answer = await client.execute_workflow(
            cancel_flows.Archive.run,
            "dump it",
            id=f"w-{uuid.uuid4().hex}",
            task_queue=queue,
            execution_timeout=timedelta(seconds=60),
        )
    assert "too large" in answer and "3000" in answer.replace(",", "") and "limit" in answer, answer
    assert cancel_flows.DUMPS == [3_000_000]
