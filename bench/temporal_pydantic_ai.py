"""The standard workload on pydantic-ai's Temporal integration, in the peers' interpreter.

`python -c "from bench.temporal_pydantic_ai import cli; cli()" <address> <runs>` runs `runs` workflows
(after 3 warm-up runs) of a `TemporalAgent` on the dev server at `address`, one
after another, and prints `{"version", "seconds", "activities"}` as JSON.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import json
import sys
import time
import uuid

from pydantic_ai import Agent
from pydantic_ai.durable_exec.temporal import AgentPlugin, PydanticAIPlugin, TemporalAgent
from pydantic_ai.models.function import FunctionModel
from temporalio import workflow
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.worker import Worker

with workflow.unsafe.imports_passed_through():
    from .peers.pydantic_ai import answer
    from .workload import FINAL, QUESTION, add

agent = TemporalAgent(Agent(FunctionModel(answer), name="bench", tools=[add]))


@workflow.defn
class PydanticAIWorkload:
    """One run of the standard workload on pydantic-ai."""

    @workflow.run
    async def run(self, question: str) -> str:
        return str((await agent.run(question)).output)


async def main(address: str, runs: int) -> None:
    client = await Client.connect(address, plugins=[PydanticAIPlugin()])
    queue = f"bench-pai-{uuid.uuid4().hex}"
    seconds, activities = [], []
    async with Worker(client, task_queue=queue, workflows=[PydanticAIWorkload], plugins=[AgentPlugin(agent)]):
        for index in range(runs + 3):
            start = time.perf_counter()
            handle = await client.start_workflow(
                PydanticAIWorkload.run, QUESTION, id=f"{queue}-{index}", task_queue=queue
            )
            output = await handle.result()
            elapsed = time.perf_counter() - start
            if output != FINAL:
                raise AssertionError(f"wrong workload answer on pydantic-ai's Temporal: {output!r}")
            if index < 3:
                continue
            seconds.append(elapsed)
            history = await handle.fetch_history()
            scheduled = EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
            activities.append(sum(1 for event in history.events if event.event_type == scheduled))
    version = importlib.metadata.version("pydantic-ai-slim")
    print(json.dumps({"version": version, "seconds": seconds, "activities": activities}))


def cli() -> None:
    """The entry point (the workflow's module must not be `__main__`: the sandbox imports it by name)."""
    asyncio.run(main(sys.argv[1], int(sys.argv[2])))
