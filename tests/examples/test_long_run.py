"""examples/long_run.py runs offline: few tools per request, under budget, no address sent to a model."""

from __future__ import annotations

import os
import runpy
from pathlib import Path

from forker import Forker

EXAMPLE = Path(__file__).parents[2] / "examples" / "long_run.py"


async def test_pseudonymize_compact_and_select_tools_together_keep_each_request_small_and_private() -> None:
    report = await runpy.run_path(str(EXAMPLE), run_name="example_long_run")["main"]()
    assert report["output"] == "I read the whole customer file of ana.silva@example.com."
    assert report["requests"] == 60
    assert report["summaries"] >= 1
    assert report["most_tools_offered"] == 5  # four, and on top the file tool the model just called
    assert report["most_tokens_sent"] <= 1_500
    assert report["address_sent"] is False
    assert report["tool_got"] == ["ana.silva@example.com"]


def test_the_example_runs_as_a_script(forker: Forker) -> None:
    root = str(EXAMPLE.parents[1])
    env = {**os.environ, "PYTHONPATH": root}
    done = forker.run(str(EXAMPLE), timeout=60, env=env)
    assert done.returncode == 0 and "most_tools_offered   5" in done.stdout, done.stderr
