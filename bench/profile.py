"""`python -m bench.profile [LAYERS]`: where an agent run's time goes, by cProfile.

Profiles many runs of the workload (default 10 layers) and prints the
functions by own time, then the tool-batch share that docs/performance.md
discusses. cProfile inflates cheap calls; read shares, not absolute times.
"""

from __future__ import annotations

import asyncio
import cProfile
import pstats
import sys

from .workload import QUESTION, onion_agent

RUNS = 3_000


async def runs(layers: int, count: int) -> None:
    agent = onion_agent(layers)
    for _ in range(count):
        await agent.run(QUESTION)


def main() -> None:
    layers = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    asyncio.run(runs(layers, 200))
    profiler = cProfile.Profile()
    profiler.enable()
    asyncio.run(runs(layers, RUNS))
    profiler.disable()
    stats = pstats.Stats(profiler)
    stats.sort_stats("tottime").print_stats(25)
    stats.sort_stats("cumulative").print_stats("_agent.py|taskgroups|_tools.py", 15)


if __name__ == "__main__":
    main()
