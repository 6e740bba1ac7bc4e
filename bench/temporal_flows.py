"""The standard workload as a Temporal workflow (imported by name in the workflow sandbox)."""

from __future__ import annotations

import time
from typing import Any

from temporalio import workflow

from onion import Agent, ModelCall, tool
from onion.testing import FunctionModel
from onion.testing import call as request

from .workload import StepModel, add

agent = Agent(StepModel(), name="bench", tools=[tool(add)], checked=False)
"""The workload's agent, no layers (its activities: `bench.model`, `bench.tool.add`)."""


@workflow.defn
class Workload:
    """One run of the standard workload: 2 model calls, 3 parallel tool calls."""

    @workflow.run
    async def run(self, question: str) -> str:
        return (await agent.run(question)).output


LONG_STEPS = 1_000
DOCUMENT = "the quick brown fox jumps over the lazy dog " * 9_100
"""About 400 KB: the conversation a long run carries from its first model call on."""


@tool
def tick(n: int) -> str:
    """Step `n` of a long run."""
    return f"tick {n}"


def _ticker(call: ModelCall) -> Any:
    """Calls `tick` once a model call until the run made `steps` of them (the first message says how many)."""
    done = sum(1 for message in call.messages if message.role == "tool")
    steps = int(call.messages[0].text.split(maxsplit=1)[0])
    return [request("tick", n=done + 1)] if done < steps else f"ticked {done} times"


long_agent = Agent(
    FunctionModel(_ticker, name="ticker"), name="bench-long", tools=[tick], checked=False, max_steps=10_000
)
"""A run of many model calls over a 400 KB conversation (its activities: `bench-long.model`, `bench-long.tool.tick`)."""


@workflow.defn
class LongWorkload:
    """One long run: `steps` model calls, each asking for one tool call, over a 400 KB first message."""

    @workflow.run
    async def run(self, steps: int) -> str:
        return (await long_agent.run(f"{steps} ticks over this document: {DOCUMENT}")).output


@tool
def stamp(n: int) -> str:
    """The time this tool call ended (seconds since the epoch), for a follower to measure how late it hears."""
    return repr(time.time())


def _stamper(call: ModelCall) -> Any:
    """Calls `stamp` 10 times, one model call each, then answers."""
    done = sum(1 for message in call.messages if message.role == "tool")
    return [request("stamp", n=done + 1)] if done < 10 else "stamped"


stamping_agent = Agent(FunctionModel(_stamper, name="stamper"), name="bench-stamp", tools=[stamp], checked=False)
"""A run of 10 tool calls, each answering when it ended."""


@workflow.defn
class Stamping:
    """One run of the stamping agent."""

    @workflow.run
    async def run(self, question: str) -> str:
        return (await stamping_agent.run(question)).output
