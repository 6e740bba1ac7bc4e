"""Agent-loop overhead: µs per run of the workload, against the hand-written loop."""

from __future__ import annotations

import asyncio
import time

from .hand_loop import HandLoop
from .table import Row
from .timing import Batch, Scale, interleaved
from .workload import FINAL, QUESTION, onion_agent

LAYERS = (0, 10)
BAR = 2.0
AIM = 1.1
"""Issue 23's aim for a run against the hand-written loop; a no-op layer aims at <= 1.0x a hand-nested await."""
SECTION = "loop"


def onion_batch(layers: int) -> Batch:
    agent = onion_agent(layers)

    async def batch(n: int) -> float:
        start = time.perf_counter()
        for _ in range(n):
            await agent.run(QUESTION)
        return time.perf_counter() - start

    return batch


def hand_batch(layers: int) -> Batch:
    loop = HandLoop(layers)

    async def batch(n: int) -> float:
        start = time.perf_counter()
        for _ in range(n):
            await loop.run(QUESTION)
        return time.perf_counter() - start

    return batch


async def verify() -> None:
    """Both systems do the whole workload (checked once, outside the timing)."""
    result = await onion_agent(10).run(QUESTION)
    texts = [message.text for message in result.messages if message.role == "tool"]
    answer, messages = await HandLoop(10).run(QUESTION)
    hand_texts = [message["content"] for message in messages if message["role"] == "tool"]
    if (result.output, texts) != (FINAL, ["3", "7", "11"]) or (answer, hand_texts) != (FINAL, texts):
        raise AssertionError(f"workload mismatch: onion {result.output!r} {texts}, hand {answer!r} {hand_texts}")


async def measure(scale: Scale) -> dict[str, float]:
    await verify()
    cases = {
        f"{system} {layers}": make(layers)
        for layers in LAYERS
        for system, make in (("onion", onion_batch), ("hand", hand_batch))
    }
    return await interleaved(cases, rounds=scale.rounds, target_s=scale.target_s * 5)


def rows(scale: Scale) -> list[Row]:
    t = asyncio.run(measure(scale))
    found = [
        Row(
            SECTION,
            f"agent run, {layers} layers",
            t[f"onion {layers}"] * 1e6,
            "µs",
            t[f"hand {layers}"] * 1e6,
            "hand loop",
            BAR,
            aim=AIM,
        )
        for layers in LAYERS
    ]
    added = t["onion 10"] - t["onion 0"]
    hand = t["hand 10"] - t["hand 0"]
    found.append(
        Row(SECTION, "cost of 10 layers (5 calls x 10), per run", added * 1e6, "µs", hand * 1e6, "hand loop", aim=1.0)
    )
    return found
