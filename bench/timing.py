"""Interleaved timing: every case runs in turn, round after round; the median wins.

Interleaving spreads a noisy neighbour's bursts over all cases alike, so the
ratio of two medians stays meaningful on a shared machine.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

Batch = Callable[[int], Awaitable[float]]
"""Runs a case `n` times and returns the seconds that took."""


@dataclass(frozen=True, slots=True)
class Scale:
    """How long each section measures: `full`, `quick` or `smoke` (seconds, not statistics)."""

    rounds: int
    """Interleaved rounds per in-process benchmark."""
    target_s: float
    """Wall time one batch of one case aims for."""
    concurrent_runs: int
    repeats: int
    """Fresh processes per subprocess benchmark (concurrency, imports)."""
    import_repeats: int
    peer_rounds: int
    peer_target_s: float


FULL = Scale(
    rounds=15, target_s=0.04, concurrent_runs=10_000, repeats=3, import_repeats=9, peer_rounds=7, peer_target_s=0.3
)
QUICK = Scale(
    rounds=7, target_s=0.015, concurrent_runs=2_000, repeats=1, import_repeats=5, peer_rounds=3, peer_target_s=0.1
)
SMOKE = Scale(
    rounds=2, target_s=0.001, concurrent_runs=100, repeats=1, import_repeats=1, peer_rounds=1, peer_target_s=0.01
)


async def calibrate(batch: Batch, target_s: float) -> int:
    """How many iterations make a batch of about `target_s` (running it doubles as warm-up)."""
    n = 1
    while True:
        elapsed = await batch(n)
        if elapsed >= target_s / 4 or n >= 1 << 24:
            return max(1, round(n * target_s / max(elapsed, 1e-9)))
        n *= 4


async def interleaved(cases: Mapping[str, Batch], *, rounds: int, target_s: float) -> dict[str, float]:
    """Median seconds per iteration of each case, over `rounds` interleaved batches."""
    sizes = {name: await calibrate(batch, target_s) for name, batch in cases.items()}
    samples: dict[str, list[float]] = {name: [] for name in cases}
    names = list(cases)
    for turn in range(rounds):
        shift = turn % len(names)
        for name in names[shift:] + names[:shift]:
            samples[name].append(await cases[name](sizes[name]) / sizes[name])
    return {name: statistics.median(values) for name, values in samples.items()}


def interleaved_commands(commands: Mapping[str, Sequence[str]], *, repeats: int, cwd: Path) -> dict[str, float]:
    """Median wall seconds of each command (run to completion), interleaved `repeats` times, after one run of each
    that writes the bytecode caches (with `PYTHONDONTWRITEBYTECODE` set, every import would compile its source)."""
    env = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}
    for command in commands.values():
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL, cwd=cwd, env=env)
    samples: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(repeats):
        for name, command in commands.items():
            start = time.perf_counter()
            subprocess.run(command, check=True, stdout=subprocess.DEVNULL, cwd=cwd, env=env)
            samples[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in samples.items()}
