"""examples/typed_layers.py: every kind's `call_next` type checks under `mypy --strict` in user code."""

from __future__ import annotations

import runpy
import shutil
import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).parents[2] / "examples" / "typed_layers.py"


async def test_one_layer_per_kind_runs_and_sees_its_result() -> None:
    seen = await runpy.run_path(str(EXAMPLE), run_name="example_typed_layers")["main"]()
    assert seen == ["model: 0 tokens out", "model: 0 tokens out", "run: 2 + 3 = 5"]


def test_typed_layers_pass_mypy_strict_from_another_directory(tmp_path: Path) -> None:
    """A user's module, outside the repository, type-checks against the installed onion (editable install)."""
    shutil.copy(EXAMPLE, tmp_path / "user_layers.py")
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(tmp_path / ".mypy"), "user_layers.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
