"""A caller follows a workflow's run as it happens: text, tool calls, results and pauses, each numbered, and picks up
after a disconnect from the last event it saw, nothing lost or repeated, even from a worker that replays."""

from __future__ import annotations

import uuid
from typing import Any

import onion_flows
from temporalio.client import Client
from temporalio.worker import Worker

from onion.temporal import decide, events, follow, pending


async def test_a_caller_follows_a_paused_and_decided_run_and_picks_up_where_it_left(client: Client) -> None:
    """One follower reads until the pause and disconnects; after the decision another picks up after the last
    event it saw: together they saw every event once, in order, as one follower from the start did."""
    onion_flows.PAID.clear()
    queue = f"q-{uuid.uuid4().hex}"
    async with Worker(client, task_queue=queue, workflows=[onion_flows.Pay], max_cached_workflows=0):
        handle = await client.start_workflow(
            onion_flows.Pay.run, "pay order 7", id=f"w-{uuid.uuid4().hex}", task_queue=queue
        )
        first: list[dict[str, Any]] = []
        async for event in follow(handle, every=0.05):
            first.append(event)
            if event["type"] == "run_paused":
                break  # the caller goes away
        [call] = await pending(handle)
        assert first[-1]["data"]["pending"][0]["id"] == call.id
        await decide(handle, approve=[call.id])
        rest = [event async for event in follow(handle, after=first[-1]["seq"], every=0.05)]
        whole = await events(handle)
    assert [e["seq"] for e in first + rest] == list(range(1, len(first) + len(rest) + 1))
    assert first + rest == whole
    kinds = [e["type"] for e in whole]
    assert kinds == [
        "tool_call_started",
        "model_call_finished",
        "run_paused",
        "tool_result",
        "text_delta",
        "model_call_finished",
        "run_finished",
    ]
    assert whole[3]["data"]["content"] == "paid 30 for order 7"
    assert whole[-1]["data"]["output"] == "Answer: paid 30 for order 7"
    assert len({e["run_id"] for e in whole}) == 1
