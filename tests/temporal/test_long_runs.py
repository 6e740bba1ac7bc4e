"""A long run's history grows with its conversation, not with steps x conversation: each model activity carries
the messages added since the last one, and a worker that does not have the rest is sent it whole."""

from __future__ import annotations

import uuid

import cancel_flows
import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.worker import Worker

ANSWER = f"read 40 pages, {sum(len(f'page {n}: {cancel_flows.PAGE}') for n in range(1, 41))} characters"


@pytest.mark.parametrize("forget", [None, 20], ids=["kept", "forgotten"])
async def test_a_long_run_records_its_conversation_about_once(client: Client, forget: int | None) -> None:
    """41 model calls over a conversation growing by 20 KB a step to about 800 KB: the model read all of it at
    every step, and the history is under 3 MB (it was about 17 MB, each model call recording the whole
    conversation). With the worker's kept conversations forgotten midway, the next call is sent whole."""
    cancel_flows.FORGET_AT[:] = [] if forget is None else [forget]
    queue = f"q-{uuid.uuid4().hex}"
    async with Worker(client, task_queue=queue, workflows=[cancel_flows.LongRead]):
        handle = await client.start_workflow(
            cancel_flows.LongRead.run, "read it all", id=f"w-{uuid.uuid4().hex}", task_queue=queue
        )
        assert await handle.result() == ANSWER
    history = await handle.fetch_history()
    size = sum(len(event.SerializeToString()) for event in history.events)
    assert size < 3_000_000, f"{size:,} bytes of history"
    missing = [
        e.activity_task_failed_event_attributes.failure.application_failure_info.type
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED
    ]
    assert missing == ([] if forget is None else ["ConversationMissing"])
    print(f"{size:,} bytes of history")
