"""Built-in layers inside a workflow: the same result as outside, or a refusal naming the layer."""

from __future__ import annotations

import re
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import audit_flows
import clock_flows
import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowFailureError
from temporalio.worker import Worker

QUESTION = "key sk-proj-ABCDEFGHIJKLMNOPQRSTUV123456 mail ada@example.com weather in Oslo"


@pytest.fixture
async def audited(client: Client) -> AsyncIterator[Any]:
    """Runs `Audited` for a layer family on an in-process worker: its output, or the error it failed with."""
    queue = f"q-{uuid.uuid4().hex}"
    async with Worker(client, task_queue=queue, workflows=[audit_flows.Audited]):

        async def run(family: str) -> str:
            return await client.execute_workflow(
                audit_flows.Audited.run, args=[family, QUESTION], id=f"w-{uuid.uuid4().hex}", task_queue=queue
            )

        yield run


def _no_run_id(text: str) -> str:
    """`text` with run ids left out: each run has its own."""
    return re.sub(r"run-[0-9a-f]+(-\d+)?", "run-<id>", text)


async def _outside(family: str) -> str | BaseException:
    try:
        return (await audit_flows.SAME[family].run(QUESTION)).output
    except Exception as error:
        return error


@pytest.mark.parametrize("family", sorted(audit_flows.SAME))
async def test_a_built_in_layer_gives_the_same_result_inside_a_workflow_as_outside(audited: Any, family: str) -> None:
    """The same scripted model and question: the same answer, or the same onion error by type and message."""
    outside = await _outside(family)
    if isinstance(outside, BaseException):
        with pytest.raises(WorkflowFailureError) as failed:
            await audited(family)
        cause = failed.value.cause
        inside = (getattr(cause, "type", None), _no_run_id(getattr(cause, "message", "")))
        assert inside == (type(outside).__name__, _no_run_id(str(outside)))
    else:
        assert await audited(family) == outside


async def test_the_compared_layers_act_on_these_runs(audited: Any) -> None:
    """The comparison is not vacuous: redact hides the key from the model, limit and guard stop the run."""
    redacted = await audited("redact")
    assert "[REDACTED]" in redacted and "sk-proj" not in redacted
    assert type(await _outside("limit")).__name__ == "LimitReached"
    assert type(await _outside("guard")).__name__ == "GuardFailed"
    contained = await audited("contain")  # the plan made (by the run's own model activity), eve's address blocked
    assert "eve@evil.example', found only there" in contained and contained.endswith("| sent to ada@example.com")


@pytest.mark.parametrize("family", sorted(audit_flows.REFUSED))
async def test_a_layer_that_cannot_replay_refuses_naming_itself(audited: Any, family: str) -> None:
    """The workflow fails with NotDeterministic naming the layer; outside a workflow the agent runs as usual."""
    with pytest.raises(WorkflowFailureError) as failed:
        await audited(family)
    cause = failed.value.cause
    assert getattr(cause, "type", None) == "NotDeterministic"
    assert family in str(cause) and "cannot run inside a Temporal workflow" in str(cause)
    assert (await audit_flows.REFUSED[family].run(QUESTION)).output.startswith("Answer:")


@pytest.mark.parametrize("layer", sorted(clock_flows.UNREPLAYABLE))
async def test_a_layer_of_the_users_that_reads_the_clock_or_draws_at_random_is_refused_by_name(
    client: Client, layer: str
) -> None:
    """`time.time()` in a model layer, `random.random()` in a tool layer, the wall clock read through a function
    of another module in a run layer: the workflow fails with NotDeterministic naming the layer and what it read
    (it does not retry its task for ever)."""
    queue = f"q-{uuid.uuid4().hex}"
    async with Worker(client, task_queue=queue, workflows=[clock_flows.Unreplayable]):
        with pytest.raises(WorkflowFailureError) as failed:
            await client.execute_workflow(
                clock_flows.Unreplayable.run,
                args=[layer, "weather in Quito"],
                id=f"w-{uuid.uuid4().hex}",
                task_queue=queue,
                execution_timeout=timedelta(seconds=20),
            )
    cause = failed.value.cause
    assert getattr(cause, "type", None) == "NotDeterministic", cause
    assert f"layer {layer} cannot run inside a Temporal workflow" in str(cause)
    assert ("random.random" if layer == "dice" else "time.time") in str(cause)


@pytest.mark.parametrize("family", ["compact_model", "select_tools_model"])
async def test_a_layer_asking_a_model_of_its_own_making_is_refused_at_the_start_naming_itself(
    audited: Any, family: str
) -> None:
    """compact(summarize=model) and select_tools(by=model) make an agent of their own, which has no activities:
    the workflow fails with NotDeterministic naming the layer and saying what to do, before any activity."""
    with pytest.raises(WorkflowFailureError) as failed:
        await audited(family)
    cause = failed.value.cause
    assert getattr(cause, "type", None) == "NotDeterministic", cause
    layer = family.removesuffix("_model")
    assert f"layer {layer}" in str(cause) and "OnionPlugin" in str(cause)


async def test_contain_with_a_planner_of_its_own_making_is_refused_naming_the_plan_agent(audited: Any) -> None:
    """contain(plan=a model): its plan agent has no activities, so the run fails with NotDeterministic when the
    plan is asked (not a plan that fails closed without a word)."""
    with pytest.raises(WorkflowFailureError) as failed:
        await audited("contain_model")
    cause = failed.value.cause
    assert getattr(cause, "type", None) == "NotDeterministic", cause
    assert "'contain-plan'" in str(cause) and "OnionPlugin" in str(cause)


async def test_a_layers_own_agent_on_the_plugin_asks_its_model_in_an_activity(client: Client) -> None:
    """compact(summarize=an Agent of the user's, on the plugin): it summarizes inside the workflow, its model call
    an activity of its own (`summarizer.model`), and the run answers as outside."""
    queue = f"q-{uuid.uuid4().hex}"
    async with Worker(client, task_queue=queue, workflows=[audit_flows.Audited]):
        handle = await client.start_workflow(
            audit_flows.Audited.run, args=["compact_agent", "weather?"], id=f"w-{uuid.uuid4().hex}", task_queue=queue
        )
        answer = await handle.result()
    assert (
        answer == (await audit_flows.INNER["compact_agent"].run("weather?")).output == "Answer: 18°C and sunny in Pune"
    )
    assert "summarizer.model" in _activity_names(await handle.fetch_history())


async def test_an_agent_asked_as_a_tool_answers_from_its_tool_activity(audited: Any) -> None:
    """A sub-agent (`agent.as_tool()`) runs in the parent's tool activity, its own model calls made there."""
    assert await audited("sub_agent") == "Answer: Answer: weather in Oslo"


def _activity_names(history: Any) -> list[str]:
    return [
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    ]
