"""The standard workload as a Temporal workflow (imported by name in the workflow sandbox)."""

from __future__ import annotations

from temporalio import workflow

from onion import Agent, tool

from .workload import StepModel, add

agent = Agent(StepModel(), name="bench", tools=[tool(add)], checked=False)
"""The workload's agent, no layers (its activities: `bench.model`, `bench.tool.add`)."""


@workflow.defn
class Workload:
    """One run of the standard workload: 2 model calls, 3 parallel tool calls."""

    @workflow.run
    async def run(self, question: str) -> str:
        return (await agent.run(question)).output
