"""What `contain` costs a tool call: on the workload (nothing untrusted read, the common case), and after a
2 KB untrusted page, where every call's string arguments are looked for in the history.

The workload's run is timed as it is and with `contain()`. Then a run that reads a page (`@tool(untrusted=True)`)
and makes three calls of a sensitive tool whose arguments the user's own message holds (so all three run), as it
is and with `contain()`. `contain()` wraps no model call: the model calls cost nothing more; `contain(plan=True)`
wraps them with a flag check until untrusted content arrives (the workload's run, against `contain()`).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from onion import Agent, Message, ModelCall, ModelResponse, ToolRequest, Usage, tool

from .table import Row
from .timing import Batch, Scale, interleaved
from .workload import QUESTION, StepModel, add, check

SECTION = "library"
BAR_MS = 0.03
"""What `contain` may add to one tool call (issue 37)."""
CALLS = 3
MODEL_CALLS = 2
"""Model calls of the workload's run: the one that asks for the three tool calls, the one that answers."""
PAGE = ("The shop on Main Street opens at nine and closes at five; closed on Sundays. " * 27)[:2048]
ASKED = "Read shop.example, then send bob@corp.example three notes: 'the shop opens at nine and closes at five'"
BODY = "FYI: the shop opens at nine and closes at five"


@tool(untrusted=True, read_only=True)
async def fetch(url: str) -> str:
    """Read a web page."""
    return PAGE


@tool
async def send(to: str, body: str) -> str:
    """Send a note."""
    return "sent"


class PageModel:
    """Reads the page, then sends three notes, then answers (by step, so one instance serves every run)."""

    name = "page"

    async def request(self, call: ModelCall) -> ModelResponse:
        last = call.messages[-1]
        if last.role == "user":
            requests = [ToolRequest("c0", "fetch", {"url": "shop.example"})]
        elif last.tool_call_id == "c0":
            requests = [ToolRequest(f"c{n}", "send", {"to": "bob@corp.example", "body": BODY}) for n in (1, 2, 3)]
        else:
            return ModelResponse(Message.assistant("sent"), Usage(requests=1))
        return ModelResponse(Message.assistant("", requests), Usage(requests=1))


def batch_of(agent: Agent[Any], question: str) -> Batch:
    async def batch(n: int) -> float:
        start = time.perf_counter()
        for _ in range(n):
            await agent.run(question)
        return time.perf_counter() - start

    return batch


async def measure(scale: Scale) -> dict[str, float]:
    from middleware import contain

    plain = Agent(StepModel(), tools=[tool(add)], checked=False)
    contained = Agent(StepModel(), tools=[tool(add)], middleware=[contain()], checked=False)
    planned = Agent(StepModel(), tools=[tool(add)], middleware=[contain(plan=True)], checked=False)
    result = await contained.run(QUESTION)
    check(result.output, [m.text for m in result.messages if m.role == "tool"])
    page = Agent(PageModel(), tools=[fetch, send], checked=False)
    page_contained = Agent(PageModel(), tools=[fetch, send], middleware=[contain()], checked=False)
    done = await page_contained.run(ASKED)
    if done.output != "sent" or [m.text for m in done.messages if m.role == "tool"][1:] != ["sent"] * CALLS:
        raise AssertionError(f"contain stopped the user's own calls: {done.messages}")
    cases = {
        "plain": batch_of(plain, QUESTION),
        "contain": batch_of(contained, QUESTION),
        "contain plan": batch_of(planned, QUESTION),
        "page": batch_of(page, ASKED),
        "page contain": batch_of(page_contained, ASKED),
    }
    return await interleaved(cases, rounds=scale.rounds, target_s=scale.target_s * 5)


def rows(scale: Scale) -> list[Row]:
    t = asyncio.run(measure(scale))
    common_ms = (t["contain"] - t["plain"]) / CALLS * 1e3
    checked_ms = (t["page contain"] - t["page"]) / (CALLS + 1) * 1e3
    planned_ms = (t["contain plan"] - t["contain"]) / MODEL_CALLS * 1e3
    return [
        Row(SECTION, f"run with contain(), {CALLS} tool calls", t["contain"] * 1e6, "µs", t["plain"] * 1e6, "without"),
        Row(SECTION, "contain(), added per tool call", common_ms * 1e3, "µs", BAR_MS * 1e3, "bar", 1.0),
        Row(
            SECTION,
            "contain(plan=True), added per model call (its flag check: nothing untrusted read)",
            planned_ms * 1e3,
            "µs",
            BAR_MS * 1e3,
            "bar",
            1.0,
        ),
        Row(
            SECTION,
            f"contain(), added per tool call after a 2 KB untrusted page ({CALLS} sensitive calls run)",
            checked_ms * 1e3,
            "µs",
            BAR_MS * 1e3,
            "bar",
            1.0,
        ),
    ]
