"""examples/workers.py: 4 worker processes share one rate limit and one cache on Redis."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from forker import Forker

pytestmark = pytest.mark.slow  # several processes in real time

EXAMPLES = Path(__file__).parents[2] / "examples"


def test_workers_example_shares_one_cache_between_four_processes(redis_url: str, forker: Forker) -> None:
    """Every question reaches the provider at least once and at most once per worker; the rest are cache hits."""
    done = forker.run(
        str(EXAMPLES / "workers.py"), redis_url, timeout=120, env={**os.environ, "PYTHONPATH": str(EXAMPLES.parent)}
    )
    assert done.returncode == 0, done.stderr
    words = done.stdout.split()
    requests, hits = int(words[-4].rstrip(",")), int(words[-1])
    assert requests + hits == 40 and 10 <= requests < 40
