"""Hot paths of the middleware library: a cache hit, a rate-limit decision, a log line, a budget's charge.

Each is timed on one model call (the workload's second: five messages, one
tool) through that single layer, against the same call made to the fake
model with no layer at all ("bare call"). Then `log` and `redact` on a
model call whose last message is 1 MB (tool-result-like JSON with e-mails,
keys and card numbers, and long runs of `a`, `@`, `.`, `=` and digits),
against `json.dumps` of that message: what touching a megabyte once costs.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from typing import Any

from onion import Handler, Message, ModelCall, ModelResponse, Run, Stack, Tool, tool

from .table import Row
from .timing import SMOKE, Batch, Scale, interleaved
from .workload import QUESTION, StepModel, add

SECTION = "library"

BUDGET_BAR_US = 5.0
"""What a model call through a shared `budget` on `MemoryStore` may cost at most, in µs (issue 36)."""


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


async def measure_budget(scale: Scale) -> dict[str, float]:
    """`budget` on a model call that costs something (so it is charged), per run and shared per tenant and UTC day
    in a `MemoryStore`, against the same call with no layer; each iteration makes its own `ModelCall`, as a run
    does."""
    from middleware.budget import budget
    from onion import Principal, Usage
    from onion.stores import MemoryStore

    model = StepModel()
    run = Run(None, QUESTION, [Message.user(QUESTION)], None, str, Principal("u-1", tenant="acme"))  # type: ignore[arg-type]
    messages = list(run.messages)
    answer = ModelResponse(Message.assistant("done"), Usage(1000, 100, 1), model=model.name)

    async def respond(call: ModelCall) -> ModelResponse:
        return answer

    def batch(chain: Handler) -> Batch:
        async def calls(n: int) -> float:
            start = time.perf_counter()
            for _ in range(n):
                await chain(ModelCall(run, messages, [], model, {}))
            return time.perf_counter() - start

        return calls

    prices = {model.name: (1.0, 1.0)}
    shared = budget(max_cost=1e12, prices=prices, per="tenant", window="day", store=MemoryStore())
    cases = {
        "bare": batch(respond),
        "per run": batch(Stack(budget(max_cost=1e12, prices=prices)).compose("model", respond, checked=False)),
        "shared": batch(Stack(shared).compose("model", respond, checked=False)),
    }
    return await interleaved(cases, rounds=scale.rounds, target_s=scale.target_s)


def megabyte_text(size: int) -> str:
    """`size` characters of what a tool result may hold, with runs that once made the patterns quadratic."""
    record = (
        '{"user": "jane.doe@example.com", "note": "card 4111 1111 1111 1111\\nkey sk-ant-api03-abcdefghijklmnop", '
        '"password": "hunter2", "city": "Lisbon"} The forecast says light rain, then sun from the west. '
    )
    runs = "".join(unit * 4000 for unit in ("a", "@", ".", "=", "1", "a.", "a=", "1 "))
    block = record * 100 + runs
    return (block * (size // len(block) + 1))[:size]


async def measure_megabyte(scale: Scale, size: int) -> dict[str, float]:
    from middleware.log import log
    from middleware.redact import redact

    text = megabyte_text(size)
    run = Run(None, "hi", [Message.user(text)])  # type: ignore[arg-type]
    model = StepModel()
    call = ModelCall(run, list(run.messages), [], model, {})
    answer = ModelResponse(Message.assistant("done"))

    async def respond(call: ModelCall) -> ModelResponse:
        return answer

    async def encode(n: int) -> float:
        start = time.perf_counter()
        for _ in range(n):
            json.dumps(text)
        return time.perf_counter() - start

    logger = logging.getLogger("bench.library.megabyte")
    logger.propagate = False
    logger.setLevel(logging.INFO)
    logger.addHandler(Discard())
    cases = {
        "json.dumps": encode,
        "log": batch_of(Stack(log(logger)).compose("model", respond, checked=False), call),
        "redact": batch_of(Stack(redact()).compose("model", respond, checked=False), call),
    }
    return await interleaved(cases, rounds=min(scale.rounds, 5), target_s=scale.target_s)


def rows(scale: Scale) -> list[Row]:
    try:
        found = layers()
    except ImportError as error:
        return [Row(SECTION, "cache hit, rate_limit, log", skipped=f"middleware not importable yet ({error})")]
    t = asyncio.run(measure(scale, found))
    size = 50_000 if scale is SMOKE else 1_000_000
    big = asyncio.run(measure_megabyte(scale, size))
    spend = asyncio.run(measure_budget(scale))
    label = f"{size / 1e6:g} MB message"
    return [
        *(Row(SECTION, f"{name}, per model call", t[name] * 1e6, "µs", t["bare"] * 1e6, "bare call") for name in found),
        Row(
            SECTION,
            "budget per run, per charged model call",
            spend["per run"] * 1e6,
            "µs",
            spend["bare"] * 1e6,
            "bare call",
        ),
        Row(
            SECTION,
            "budget per tenant and day (MemoryStore), per charged model call",
            spend["shared"] * 1e6,
            "µs",
            spend["bare"] * 1e6,
            "bare call",
        ),
        Row(
            SECTION,
            "budget per tenant and day (MemoryStore), the whole charged model call",
            spend["shared"] * 1e6,
            "µs",
            BUDGET_BAR_US,
            "bar",
            1.0,
        ),
        *(
            Row(
                SECTION,
                f"{name}, model call with a {label}",
                big[name] * 1e3,
                "ms",
                big["json.dumps"] * 1e3,
                "json.dumps",
            )
            for name in ("log", "redact")
        ),
    ]
