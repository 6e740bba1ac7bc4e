"""examples/compose.py: rate_limit, cache and log composed bare, offline."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest
from forker import Forker

EXAMPLE = Path(__file__).parents[2] / "examples" / "compose.py"


async def test_second_run_is_served_from_the_cache_with_zero_usage(capsys: pytest.CaptureFixture[str]) -> None:
    first, second = await runpy.run_path(str(EXAMPLE), run_name="example_compose")["main"]()
    assert first.output == second.output == "2 + 3 = 5"
    assert first.state["cache"] == {"hits": 0, "misses": 2} and second.state["cache"] == {"hits": 2, "misses": 0}
    assert first.usage.total_tokens == 120 and second.usage.total_tokens == 0
    assert "the model was called 2 times for 2 runs" in capsys.readouterr().out


def test_compose_runs_as_a_script(forker: Forker) -> None:
    done = forker.run(str(EXAMPLE), timeout=60)
    assert done.returncode == 0, done.stderr
    assert "model:  rate_limit -> cache -> log" in done.stdout
    assert "log: model scripted ok" in done.stdout and "tokens: 0" in done.stdout
