"""An onion agent inside a Temporal workflow: the loop in workflow code, model and tool calls as activities."""

from __future__ import annotations

import uuid

import onion_flows
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.worker import Worker


def _activities(history) -> list[str]:
    return [
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    ]


async def test_an_agent_with_a_tool_completes_inside_a_workflow_as_it_does_outside(client: Client) -> None:
    """The workflow's answer and history equal a plain run's; each model call and tool call is one activity."""
    queue = f"q-{uuid.uuid4().hex}"
    async with Worker(client, task_queue=queue, workflows=[onion_flows.AskWeather]):
        handle = await client.start_workflow(
            onion_flows.AskWeather.run, "weather in Paris", id=f"w-{uuid.uuid4().hex}", task_queue=queue
        )
        done = await handle.result()
        history = await handle.fetch_history()
    outside = await onion_flows.weather.run("weather in Paris")
    assert done["output"] == outside.output == "Answer: 18°C and sunny in Paris"
    assert [m["role"] for m in done["messages"]] == [m.role for m in outside.messages]
    assert _activities(history) == ["weather.model", "weather.tool.get_weather", "weather.model"]
