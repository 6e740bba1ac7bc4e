"""One peer in its own process: `python -m bench.peers.worker NAME ROUNDS TARGET_S`.

Measures the peer and onion on the workload, 0 and 10 layers, interleaved in
this one interpreter, and prints the medians as JSON (or why it skipped).
"""

from __future__ import annotations

import asyncio
import importlib
import json
import sys
import time
from collections.abc import Awaitable, Callable
from importlib import metadata

from ..timing import Batch, interleaved

LAYERS = (0, 10)
Run = Callable[[], Awaitable[tuple[str, list[str]]]]


def onion_run(layers: int) -> Run:
    from ..workload import QUESTION, onion_agent

    agent = onion_agent(layers)

    async def run() -> tuple[str, list[str]]:
        result = await agent.run(QUESTION)
        return result.output, [message.text for message in result.messages if message.role == "tool"]

    return run


def batch_of(run: Run) -> Batch:
    async def batch(n: int) -> float:
        start = time.perf_counter()
        for _ in range(n):
            await run()
        return time.perf_counter() - start

    return batch


async def measure(name: str, rounds: int, target_s: float) -> dict[str, object]:
    from ..workload import check

    peer = importlib.import_module(f"bench.peers.{name}")
    runs: dict[str, Run] = {}
    for layers in LAYERS:
        runs[f"peer {layers}"] = peer.build(layers)
        runs[f"onion {layers}"] = onion_run(layers)
    for run in runs.values():
        check(*await run())
    seconds = await interleaved({key: batch_of(run) for key, run in runs.items()}, rounds=rounds, target_s=target_s)
    return {"version": metadata.version(peer.DISTRIBUTION), "seconds": seconds}


def main() -> None:
    name, rounds, target_s = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    try:
        importlib.import_module(f"bench.peers.{name}")
    except ImportError as error:
        print(json.dumps({"skipped": f"not installed in {sys.executable} ({error.name or error})"}))
        return
    print(json.dumps(asyncio.run(measure(name, rounds, target_s))))


if __name__ == "__main__":
    main()
