"""onion's OpenTelemetry spans from workflow code are exported once, when they happened: not again each time a worker
replays the workflow (a worker restart, a worker that keeps no workflow cached), and a span that a replay ends has the
ids and start its first pass had, so its children point at it."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

import onion_flows
import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle
from temporalio.contrib.opentelemetry import create_tracer_provider
from temporalio.worker import Worker

from onion import tracing
from onion.temporal import decide, pending


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    """Where the test's provider exports; tracing is turned off after the test."""
    yield InMemorySpanExporter()
    tracing.uninstrument()


async def _paused_restarted_decided(client: Client) -> str:
    """A run of the cash agent paused for a person on a worker that replays every activation, that worker stopped,
    a new one started (replaying the workflow from its start), the payment approved: the run's output."""
    onion_flows.PAID.clear()
    queue = f"q-{uuid.uuid4().hex}"
    async with Worker(client, task_queue=queue, workflows=[onion_flows.Pay], max_cached_workflows=0):
        handle = await client.start_workflow(
            onion_flows.Pay.run, "pay order 7", id=f"w-{uuid.uuid4().hex}", task_queue=queue
        )
        while not await _paused(handle):  # read from its history: a query now could run a task again (below)
            await asyncio.sleep(0.05)
        waiting = await pending(handle)
    async with Worker(client, task_queue=queue, workflows=[onion_flows.Pay], max_cached_workflows=0):
        await decide(handle, approve=[call.id for call in waiting])
        output: str = await handle.result()
    return output


async def _paused(handle: WorkflowHandle[Any, Any]) -> bool:
    """Whether the workflow's model call answered and the workflow task after it completed: the run waits."""
    kinds = [event.event_type for event in (await handle.fetch_history()).events]
    return (
        EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED in kinds
        and kinds[-1] == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED
    )


EXPECTED = [
    "request cashier",
    "chat cashier",
    "execute_tool pay",  # paused by approve: no activity
    "tool_batch",
    "invoke_agent cash",  # the run that paused
    "execute_tool pay",  # approved: the activity
    "tool_batch",
    "request cashier",
    "chat cashier",
    "invoke_agent cash",  # the run resumed, to its end
]


def _names(spans: list[ReadableSpan]) -> list[str]:
    return [span.name for span in sorted(spans, key=lambda s: s.end_time or 0)]


async def test_each_span_of_a_paused_restarted_and_decided_run_is_exported_once(
    client: Client, exporter: InMemorySpanExporter
) -> None:
    """On a plain SDK provider: every span once (before, each replay exported the spans it replayed again: 39 spans
    for 10), and each model call's duration recorded once."""
    reader = InMemoryMetricReader()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.instrument(provider, meter_provider=MeterProvider(metric_readers=[reader]))
    assert await _paused_restarted_decided(client) == "Answer: paid 30 for order 7"
    spans = list(exporter.get_finished_spans())
    assert _names(spans) == EXPECTED
    assert len(onion_flows.PAID) == 1
    metrics = reader.get_metrics_data()
    assert metrics is not None
    [durations] = [
        metric
        for resource in metrics.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
        if metric.name == "gen_ai.client.operation.duration"
    ]
    points: Any = durations.data.data_points
    assert sum(point.count for point in points) == 2


async def test_on_temporals_replay_safe_provider_a_span_ended_by_a_replay_keeps_its_ids_and_its_children(
    client: Client, exporter: InMemorySpanExporter
) -> None:
    """With `temporalio.contrib.opentelemetry.create_tracer_provider()` (ids from the workflow's random), each span once
    and one tree per run: every span's parent is a span exported."""
    provider = create_tracer_provider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.instrument(provider)
    assert await _paused_restarted_decided(client) == "Answer: paid 30 for order 7"
    spans = list(exporter.get_finished_spans())
    assert _names(spans) == EXPECTED
    ids = {span.context.span_id for span in spans}
    assert len(ids) == len(spans)
    assert all(span.parent is None or span.parent.span_id in ids for span in spans)
    roots = [span for span in spans if span.parent is None]
    assert [root.name for root in roots] == ["invoke_agent cash", "invoke_agent cash"]
