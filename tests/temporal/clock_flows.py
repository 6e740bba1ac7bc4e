"""Agents whose workflow code draws ids, reads the clock and draws random numbers (tests/temporal/test_replay.py).

Imported by name in the sandbox; `AGENTS` are on the conftest client's plugin.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import time
from typing import Any

from onion_flows import clerk, get_weather, wall_clock
from temporalio import workflow

from middleware import approve, log, retry, timeout
from onion import Agent, ModelCall, ModelNext, ModelResponse, Run, RunNext, RunResult, ToolCall, ToolNext, ToolResult
from onion.errors import ServerError
from onion.testing import FunctionModel


class ask_first:
    """Pauses the run's first model call until a person approves it."""

    async def wrap_model(self, call: ModelCall, call_next: ModelNext) -> ModelResponse:
        if call.run.steps == 1 and not call.approved:
            return call.pause("the first model call waits for a person")
        return await call_next(call)


class ask_before:
    """Pauses the whole run, before its first model call, until a person approves it."""

    async def wrap_run(self, run: Run, call_next: RunNext) -> RunResult:
        if not run.approved:
            return run.pause("the run waits for a person")
        return await call_next(run)


def _weather(name: str, *layers: Any) -> Agent[str]:
    return Agent(FunctionModel(clerk, name=name), name=name, tools=[get_weather]).use(*layers)


GATED = {"model": _weather("gated-model", ask_first()), "run": _weather("gated-run", ask_before())}
"""One agent per kind of pause that draws an id in workflow code: a paused model call, a paused run."""

_failures = itertools.count()


def overloaded(model_call: ModelCall) -> Any:
    """Always fails with a retryable ServerError."""
    raise ServerError(f"overloaded ({next(_failures)})", status_code=503)


patient = Agent(FunctionModel(overloaded, name="overloaded"), name="patient").use(
    log, retry(attempts=10, max_delay=2.0, initial=0.5, jitter=0.1)
)
"""Retries for at most 2 s of the run's clock, with jitter: the clock and the draws decide when it gives up."""


class stamped:
    """Stamps each model call with the wall clock, `time.time()`: it cannot replay."""

    async def wrap_model(self, call: ModelCall, call_next: ModelNext) -> ModelResponse:
        call.run.state["stamp"] = time.time()
        return await call_next(call)


async def dice(call: ToolCall, call_next: ToolNext) -> ToolResult:
    """Rolls a die for each tool call, `random.random()`: it cannot replay."""
    call.run.state["roll"] = random.random()
    return await call_next(call)


class hidden_clock:
    """Reads the wall clock through a function of another module (`onion_flows.wall_clock`)."""

    async def wrap_run(self, run: Run, call_next: RunNext) -> RunResult:
        run.state["started"] = wall_clock()
        return await call_next(run)


UNREPLAYABLE = {
    "stamped": _weather("unreplayable-stamped", stamped()),
    "dice": _weather("unreplayable-dice", dice),
    "hidden_clock": _weather("unreplayable-hidden", hidden_clock()),
}
"""Agents with a layer of the user's that reads the clock or draws random numbers itself, by the layer's name."""

logged = _weather("logged", log(logger="onion.tests.logged"))
"""The weather agent under `log`, on a logger of its own."""

AGENTS = [*GATED.values(), patient, *UNREPLAYABLE.values(), logged]


@workflow.defn
class Gated:
    """Runs the gated agent of one kind of pause; inside a workflow the run waits for the decision."""

    @workflow.run
    async def run(self, kind: str, question: str) -> str:
        return (await GATED[kind].run(question)).output


@workflow.defn
class Unreplayable:
    """Runs the agent of one unreplayable layer."""

    @workflow.run
    async def run(self, layer: str, question: str) -> str:
        return (await UNREPLAYABLE[layer].run(question)).output


@workflow.defn
class Logged:
    """Runs the logged agent on one question."""

    @workflow.run
    async def run(self, question: str) -> str:
        return (await logged.run(question)).output


@workflow.defn
class Patient:
    """Runs the patient agent; it fails once retry gives up."""

    @workflow.run
    async def run(self, question: str) -> str:
        return (await patient.run(question)).output


_slow_once: list[int] = []


async def slow_once(model_call: ModelCall) -> Any:
    """`clerk`, but its first request (in this process) takes 3 s: longer than the timeout."""
    if not _slow_once:
        _slow_once.append(1)
        await asyncio.sleep(3)
    return clerk(model_call)


hurried = Agent(FunctionModel(slow_once, name="slow_once"), name="hurried", tools=[get_weather]).use(
    retry(attempts=3, initial=0.2, jitter=0), timeout(0.5)
)
"""Each model call bounded to 0.5 s (timeout inside retry): the first times out and retry tries again."""

AGENTS.append(hurried)


@workflow.defn
class Hurried:
    """Runs the hurried agent: its answer and how many times retry tried again."""

    @workflow.run
    async def run(self, question: str) -> dict[str, Any]:
        result = await hurried.run(question)
        return {"output": result.output, "retries": result.state.get("retries", 0)}


versioned = _weather("versioned", approve("get_weather"))
versioned_v2 = _weather("versioned-v2", timeout(5), approve("get_weather"))
"""One agent before and after a deploy that adds `timeout` (a durable timer around each model call)."""

AGENTS.extend([versioned, versioned_v2])


@workflow.defn(name="Versioned")
class VersionedBefore:
    """The workflow as the first deploy had it."""

    @workflow.run
    async def run(self, question: str) -> str:
        return (await versioned.run(question)).output


@workflow.defn(name="Versioned")
class VersionedBroken:
    """The next deploy, the stack changed in place: a workflow in flight no longer replays."""

    @workflow.run
    async def run(self, question: str) -> str:
        return (await versioned_v2.run(question)).output


@workflow.defn(name="Versioned")
class VersionedAfter:
    """The next deploy, the new stack behind `workflow.patched`: workflows in flight go on with the old agent."""

    @workflow.run
    async def run(self, question: str) -> str:
        agent = versioned_v2 if workflow.patched("versioned-timeout") else versioned
        return (await agent.run(question)).output
