"""Concurrency: many runs at once on one event loop, 50 ms of model latency per call.

Each measurement runs in a fresh process (`python -m bench.concurrency
SYSTEM RUNS`), so peak RSS belongs to that burst alone. Two model calls per
run make the ideal wall time 0.1 s, whatever the number of runs.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import resource
import statistics
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from pathlib import Path

from .hand_loop import HandLoop
from .table import Row
from .timing import Scale
from .workload import FINAL, QUESTION, onion_agent

SECTION = "concurrency"
LATENCY = 0.05
IDEAL = 2 * LATENCY
LAYERS = 10
TRACED_RUNS = 2_000
"""tracemalloc slows a run several times over; fewer runs measure its peak per run as well."""
ROOT = Path(__file__).resolve().parent.parent


def runner(system: str) -> Callable[[], Awaitable[str]]:
    if system == "onion":
        agent = onion_agent(LAYERS, LATENCY)

        async def run_onion() -> str:
            return (await agent.run(QUESTION)).output

        return run_onion
    loop = HandLoop(LAYERS, LATENCY)

    async def run_hand() -> str:
        return (await loop.run(QUESTION))[0]

    return run_hand


def peak_rss_kb() -> float:
    """Peak resident set size of this process so far, in KB (Linux reports KB)."""
    return float(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)


class CollectorClock:
    """Seconds spent in the garbage collector while installed (`gc.callbacks`)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.seconds += time.perf_counter() - self._started


async def burst(system: str, runs: int, traced: bool) -> dict[str, float]:
    """Start `runs` runs at once; wall time, time in the GC and memory per run of the burst."""
    run = runner(system)
    await asyncio.gather(*(run() for _ in range(10)))
    gc.collect()
    clock = CollectorClock()
    gc.callbacks.append(clock)
    if traced:
        tracemalloc.start()
    before = peak_rss_kb()
    start = time.perf_counter()
    answers = await asyncio.gather(*(run() for _ in range(runs)))
    wall = time.perf_counter() - start
    gc.callbacks.remove(clock)
    figures = {"wall_s": wall, "gc_s": clock.seconds, "rss_kb_per_run": (peak_rss_kb() - before) / runs}
    if traced:
        figures["traced_kb_per_run"] = tracemalloc.get_traced_memory()[1] / 1024 / runs
        tracemalloc.stop()
    if set(answers) != {FINAL}:
        raise AssertionError(f"{system}: wrong answers {set(answers)}")
    return figures


def measure(system: str, runs: int, traced: bool = False) -> dict[str, float]:
    """`burst` in a fresh interpreter."""
    command = [sys.executable, "-m", "bench.concurrency", system, str(runs)] + (["--traced"] if traced else [])
    out = subprocess.run(command, check=True, capture_output=True, text=True, cwd=ROOT).stdout
    return json.loads(out)  # type: ignore[no-any-return]


def rows(scale: Scale) -> list[Row]:
    runs = scale.concurrent_runs
    samples: dict[str, list[dict[str, float]]] = {"onion": [], "hand": []}
    for _ in range(scale.repeats):
        for system in samples:
            samples[system].append(measure(system, runs))
    traced = {system: measure(system, min(runs, TRACED_RUNS), traced=True) for system in samples}

    def median(system: str, key: str) -> float:
        return statistics.median(sample[key] for sample in samples[system])

    what = f"{runs:,} concurrent runs, {LAYERS} layers"
    return [
        Row(SECTION, f"{what}, wall, onion", median("onion", "wall_s"), "s", IDEAL, "ideal"),
        Row(SECTION, f"{what}, wall, hand loop", median("hand", "wall_s"), "s", IDEAL, "ideal"),
        Row(
            SECTION,
            f"{what}, of which in the GC, onion",
            median("onion", "gc_s"),
            "s",
            median("onion", "wall_s"),
            "wall",
        ),
        Row(
            SECTION,
            f"{what}, of which in the GC, hand loop",
            median("hand", "gc_s"),
            "s",
            median("hand", "wall_s"),
            "wall",
        ),
        Row(
            SECTION,
            f"{what}, peak RSS per run",
            median("onion", "rss_kb_per_run"),
            "KB",
            median("hand", "rss_kb_per_run"),
            "hand",
        ),
        Row(
            SECTION,
            f"{min(runs, TRACED_RUNS):,} concurrent runs, tracemalloc peak per run",
            traced["onion"]["traced_kb_per_run"],
            "KB",
            traced["hand"]["traced_kb_per_run"],
            "hand",
            aim=1.2,
        ),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description="One burst of concurrent runs; prints its figures as JSON.")
    parser.add_argument("system", choices=("onion", "hand"))
    parser.add_argument("runs", type=int)
    parser.add_argument("--traced", action="store_true", help="measure the peak with tracemalloc")
    args = parser.parse_args()
    print(json.dumps(asyncio.run(burst(args.system, args.runs, args.traced))))


if __name__ == "__main__":
    main()
