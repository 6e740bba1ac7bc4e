"""Who a run is for and what it may call: a principal on the run and `authorize` of 100 rules, per tool call.

The workload's run (two model calls, three `add` calls) is timed as it is and
with `principal=` and `authorize(...)` of 100 rules of which only the last
matches. The 99 others all name `add` (by name, glob or regex), so none is
skipped by name: each is read and fails on its condition (a role, a tenant,
an `args=` function). That is the worst case for a policy of that length;
rules naming other tools cost nothing per call (the rules that may match a
tool are found once per name).
"""

from __future__ import annotations

import asyncio
import re
import time
from typing import Any

from onion import Agent, Principal, tool

from .table import Row
from .timing import Batch, Scale, interleaved
from .workload import QUESTION, StepModel, add, check

SECTION = "library"
BAR_MS = 0.03
"""What a principal and a 100-rule policy may add to one tool call (issue 32)."""
RULES = 100
CALLS = 3
"""Tool calls per run of the workload."""
PRINCIPAL = Principal("u-42", tenant="acme", roles={"support"})


def never(args: dict[str, Any]) -> bool:
    return False


def policy() -> Any:
    from middleware import Allow, Ask, Deny, authorize

    rules: list[Any] = []
    for n in range(RULES - 1):
        if n % 3 == 0:
            rules.append(Deny("add", roles={f"role-{n}"}, reason="not for this role"))
        elif n % 3 == 1:
            rules.append(Ask("a?d", tenants={f"tenant-{n}"}))
        else:
            rules.append(Deny(re.compile(r"ad+"), args=never))
    return authorize(*rules, Allow("add", roles={"support"}, tenants={"acme"}))


def batch_of(agent: Agent, principal: Principal | None) -> Batch:
    async def batch(n: int) -> float:
        start = time.perf_counter()
        for _ in range(n):
            await agent.run(QUESTION, principal=principal)
        return time.perf_counter() - start

    return batch


async def measure(scale: Scale) -> dict[str, float]:
    plain = Agent(StepModel(), tools=[tool(add)], checked=False)
    guarded = Agent(StepModel(), tools=[tool(add)], middleware=[policy()], checked=False)
    result = await guarded.run(QUESTION, principal=PRINCIPAL)
    check(result.output, [m.text for m in result.messages if m.role == "tool"])  # the last rule let every call run
    cases = {"plain": batch_of(plain, None), "policy": batch_of(guarded, PRINCIPAL)}
    return await interleaved(cases, rounds=scale.rounds, target_s=scale.target_s * 5)


def rows(scale: Scale) -> list[Row]:
    try:
        policy()
    except ImportError as error:
        return [Row(SECTION, "authorize", skipped=f"middleware not importable yet ({error})")]
    t = asyncio.run(measure(scale))
    added_ms = (t["policy"] - t["plain"]) / CALLS * 1e3
    return [
        Row(
            SECTION,
            f"run with principal + authorize({RULES} rules, last matches), {CALLS} tool calls",
            t["policy"] * 1e6,
            "µs",
            t["plain"] * 1e6,
            "same run without",
        ),
        Row(
            SECTION,
            f"principal + authorize({RULES} rules), added per tool call",
            added_ms * 1e3,
            "µs",
            BAR_MS * 1e3,
            "bar",
            1.0,
        ),
    ]
