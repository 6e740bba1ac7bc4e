"""What workflow code draws and reads comes from the workflow: pause ids, the clock and random numbers are the same
on every replay, so a person's decision and a retry's give-up replay as they happened.

The workers keep no workflow in their cache (`max_cached_workflows=0`): every activation, every query, replays
the history from its start on a worker that has not seen it, as a new worker does after a restart.
"""

from __future__ import annotations

import asyncio
import logging
import uuid

import clock_flows
import pytest
from conftest import AGENTS
from onion_flows import FAST
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowFailureError
from temporalio.worker import Replayer, Worker

from onion.temporal import OnionPlugin, decide, pending


def _replayer() -> Replayer:
    return Replayer(
        workflows=[clock_flows.Gated, clock_flows.Patient, clock_flows.Logged], plugins=[OnionPlugin(*AGENTS)]
    )


@pytest.mark.parametrize("kind", ["model", "run"])
async def test_a_paused_calls_id_is_the_same_on_every_replay_and_a_decision_for_it_is_taken(
    client: Client, kind: str
) -> None:
    """The id `pending` answers does not change when a worker replays the workflow; deciding it lets the run go
    on, and the decided history replays without non-determinism."""
    queue = f"q-{uuid.uuid4().hex}"
    async with Worker(client, task_queue=queue, workflows=[clock_flows.Gated], max_cached_workflows=0):
        handle = await client.start_workflow(
            clock_flows.Gated.run, args=[kind, "weather in Lima"], id=f"w-{uuid.uuid4().hex}", task_queue=queue
        )
        while not (first := await pending(handle)):
            await asyncio.sleep(0.05)
        again = await pending(handle)
        assert [call.id for call in again] == [call.id for call in first]
        assert first[0].kind == kind
        await decide(handle, approve=[first[0].id])
        assert await handle.result() == "Answer: 18°C and sunny in Lima"
    history = await handle.fetch_history()
    assert (await _replayer().replay_workflow(history, raise_on_replay_failure=False)).replay_failure is None


async def test_retry_gives_up_on_the_workflows_clock_and_its_history_replays(client: Client) -> None:
    """`retry(max_delay=2.0)` with jitter, on a worker that keeps the workflow: it gives up at max_delay, and
    after the same attempts when the history replays in no time (its clock is the workflow's, its jitter the
    workflow's draws), so the failed workflow replays cleanly."""
    queue = f"q-{uuid.uuid4().hex}"
    async with Worker(client, task_queue=queue, workflows=[clock_flows.Patient]):  # cached: the run as it happens
        handle = await client.start_workflow(
            clock_flows.Patient.run, "anyone there?", id=f"w-{uuid.uuid4().hex}", task_queue=queue
        )
        with pytest.raises(WorkflowFailureError) as failed:
            await handle.result()
    assert getattr(failed.value.cause, "type", None) == "ServerError"
    history = await handle.fetch_history()
    timers = [e for e in history.events if e.event_type == EventType.EVENT_TYPE_TIMER_STARTED]
    attempts = [e for e in history.events if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED]
    assert len(timers) >= 2  # it waited (a durable timer) before each attempt it made again
    assert len(attempts) < 10  # it gave up at max_delay, before its 10 attempts: the clock decided
    assert (await _replayer().replay_workflow(history, raise_on_replay_failure=False)).replay_failure is None


class Kept(logging.Handler):
    """Keeps the records it handles."""

    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


async def test_log_logs_each_call_once_however_often_the_workflow_replays(client: Client) -> None:
    """Every activation replays the run from its start (and the worker evicts the workflow after each, cancelling
    its tasks): each call is logged once, when it happened, and nothing as cancelled."""
    kept = Kept()
    logger = logging.getLogger("onion.tests.logged")
    logger.addHandler(kept)
    logger.setLevel(logging.INFO)
    queue = f"q-{uuid.uuid4().hex}"
    try:
        async with Worker(client, task_queue=queue, workflows=[clock_flows.Logged], max_cached_workflows=0):
            answer = await client.execute_workflow(
                clock_flows.Logged.run, "weather in Baku", id=f"w-{uuid.uuid4().hex}", task_queue=queue
            )
    finally:
        logger.removeHandler(kept)
    assert answer == "Answer: 18°C and sunny in Baku"
    logged = [(r.kind, r.what, r.outcome) for r in kept.records]  # type: ignore[attr-defined]
    assert logged == [
        ("model", "logged", "ok"),
        ("tool", "get_weather", "ok"),
        ("tools", "get_weather", "ok"),
        ("model", "logged", "ok"),
        ("run", "logged", "ok"),
    ]


async def test_a_model_call_that_times_out_is_retried_as_outside_and_replays(temporal_address: str) -> None:
    """`timeout(0.5)` inside `retry`: the first model call outlasts it (a durable timer), its activity is
    cancelled and the ModelCallTimeout retried, as outside; the same answer and retries; the history replays."""
    clock_flows._slow_once.clear()
    outside = await clock_flows.hurried.run("weather in Doha")
    assert (outside.output, outside.state["retries"]) == ("Answer: 18°C and sunny in Doha", 1)
    clock_flows._slow_once.clear()
    client = await Client.connect(temporal_address, plugins=[OnionPlugin(*AGENTS, options=FAST)])
    queue = f"q-{uuid.uuid4().hex}"
    async with Worker(client, task_queue=queue, workflows=[clock_flows.Hurried], max_cached_workflows=0):
        handle = await client.start_workflow(
            clock_flows.Hurried.run, "weather in Doha", id=f"w-{uuid.uuid4().hex}", task_queue=queue
        )
        assert await handle.result() == {"output": outside.output, "retries": 1}
    history = await handle.fetch_history()
    kinds = [e.event_type for e in history.events]
    assert EventType.EVENT_TYPE_ACTIVITY_TASK_CANCELED in kinds and EventType.EVENT_TYPE_TIMER_FIRED in kinds
    replayer = Replayer(workflows=[clock_flows.Hurried], plugins=[OnionPlugin(*AGENTS)])
    assert (await replayer.replay_workflow(history, raise_on_replay_failure=False)).replay_failure is None
