"""The core examples run offline and do what they say."""

from __future__ import annotations

import runpy
from pathlib import Path
from typing import Any

import pytest
from forker import Forker

EXAMPLES = Path(__file__).parents[2] / "examples"


def load(name: str) -> dict[str, Any]:
    return runpy.run_path(str(EXAMPLES / f"{name}.py"), run_name=f"example_{name}")


async def test_quickstart_answers_with_both_tools_and_times_every_kind(capsys: pytest.CaptureFixture[str]) -> None:
    output = await load("quickstart")["main"]()
    printed = capsys.readouterr().out
    assert output == "An apple and a loaf of bread cost 2.75 EUR together."
    assert "tool      0.5" in printed and "tool      2.25" in printed and "tool      2.75" in printed
    assert all(f"[{kind:5}]" in printed for kind in ("run", "model", "tools", "tool"))


async def test_hooks_example_blocks_the_delete_and_injects_a_reflection() -> None:
    lines = await load("hooks")["main"]()
    assert any("blocked: files may only be deleted under /tmp/" in line for line in lines)
    assert any(line.startswith("user      Reflect: 2 results, failures: ['delete_file']") for line in lines)


async def test_shared_stack_counts_calls_of_both_agents_in_one_layer() -> None:
    counts = await load("shared_stack")["main"]()
    assert counts == {"writer: model": 2, "writer: tool shout": 1, "critic: model": 1}


@pytest.mark.parametrize("name", ["quickstart", "hooks", "shared_stack"])
def test_example_runs_as_a_script(name: str, forker: Forker) -> None:
    done = forker.run(str(EXAMPLES / f"{name}.py"), timeout=60)
    assert done.returncode == 0 and done.stdout, done.stderr
