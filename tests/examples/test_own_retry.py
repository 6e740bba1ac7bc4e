"""examples/own_retry.py: a user's own tenacity retry layer, offline."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest
from forker import Forker

EXAMPLE = Path(__file__).parents[2] / "examples" / "own_retry.py"


async def test_own_retry_layer_survives_two_retryable_errors(capsys: pytest.CaptureFixture[str]) -> None:
    output = await runpy.run_path(str(EXAMPLE), run_name="example_own_retry")["main"]()
    printed = capsys.readouterr().out
    assert output == "Hello after two retries."
    assert "attempt 2 failed (RateLimitedError('slow down')); retrying in 0.05s" in printed
    assert "model requests: 3" in printed


def test_own_retry_runs_as_a_script(forker: Forker) -> None:
    done = forker.run(str(EXAMPLE), timeout=60)
    assert done.returncode == 0, done.stderr
    assert "answer: Hello after two retries." in done.stdout
