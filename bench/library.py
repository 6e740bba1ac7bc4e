"""Hot paths of the middleware library: a cache hit, a rate-limit decision, a log line.

Each is timed on one model call (the workload's second: five messages, one
tool) through that single layer, against the same call made to the fake
model with no layer at all ("bare call").
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from onion import Handler, Message, ModelCall, Run, Stack, Tool, tool

from .table import Row
from .timing import Batch, Scale, interleaved
from .workload import QUESTION, StepModel, add

SECTION = "library"


class Discard(logging.Handler):
    """Formats every record (the work a real handler does first), then drops it."""

    def emit(self, record: logging.LogRecord) -> None:
        self.format(record)


async def second_call() -> ModelCall:
    """The workload's second model call: question, three tool calls, three results."""
    model = StepModel()
    add_tool: Tool = tool(add)
    run = Run(None, QUESTION, [Message.user(QUESTION)])  # type: ignore[arg-type]
    first = await model.request(ModelCall(run, list(run.messages), [add_tool], model, {}))
    run.messages.append(first.message)
    for request in first.tool_calls:
        run.messages.append(Message.tool(request.id, str(await add(**request.args))))
    return ModelCall(run, list(run.messages), [add_tool], model, {})


def layers() -> dict[str, Callable[[], Any]]:
    """The layers to time, by row name; raises ImportError while the library lacks one."""
    from middleware.cache import cache
    from middleware.log import log
    from middleware.rate_limit import rate_limit

    logger = logging.getLogger("bench.library")
    logger.propagate = False
    logger.setLevel(logging.INFO)
    logger.addHandler(Discard())
    return {
        "cache hit": cache,
        "rate_limit decision (rpm and tpm)": lambda: rate_limit(rpm=1e12, tpm=1e15),
        "log line (INFO, formatted, payloads)": lambda: log(logger),
        "log, level disabled": lambda: log(logger, logging.DEBUG, error_level=logging.DEBUG),
    }


def batch_of(chain: Handler, call: ModelCall) -> Batch:
    async def batch(n: int) -> float:
        start = time.perf_counter()
        for _ in range(n):
            await chain(call)
        return time.perf_counter() - start

    return batch


async def measure(scale: Scale, found: dict[str, Callable[[], Any]]) -> dict[str, float]:
    call = await second_call()
    terminal: Handler = call.model.request
    cases = {"bare": batch_of(terminal, call)}
    for name, make in found.items():
        chain = Stack(make()).compose("model", terminal, checked=False)
        await chain(call)  # fills the cache
        cases[name] = batch_of(chain, call)
    return await interleaved(cases, rounds=scale.rounds, target_s=scale.target_s)


def rows(scale: Scale) -> list[Row]:
    try:
        found = layers()
    except ImportError as error:
        return [Row(SECTION, "cache hit, rate_limit, log", skipped=f"middleware not importable yet ({error})")]
    t = asyncio.run(measure(scale, found))
    return [
        Row(SECTION, f"{name}, per model call", t[name] * 1e6, "µs", t["bare"] * 1e6, "bare call") for name in found
    ]
