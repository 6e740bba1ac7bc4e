"""examples/approval.py pauses in one process and finishes in another."""

from __future__ import annotations

import os
import runpy
from pathlib import Path

import pytest
from forker import Forker

EXAMPLES = Path(__file__).parents[2] / "examples"
EXPECTED = [
    "paused: call_2 delete_file(old-draft.txt): deleting needs a person",
    "paused: call_3 delete_file(taxes-2025.pdf): deleting needs a person",
    "  deleting old-draft.txt",
    "completed: Done. (contents of notes.txt) | deleted old-draft.txt | "
    "Tool call delete_file was rejected: keep tax records for 10 years",
]


def test_approval_example_approves_one_delete_and_rejects_the_other_in_a_second_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The state saved by the first process is resumed by a second: one delete runs, the model reads the rejection."""
    monkeypatch.setenv("PYTHONPATH", str(EXAMPLES.parent))
    main = runpy.run_path(str(EXAMPLES / "approval.py"), run_name="example_approval")["main"]
    assert main(tmp_path / "state.json") == EXPECTED
    assert '"version": 1' in (tmp_path / "state.json").read_text()


def test_approval_example_runs_as_a_script(forker: Forker) -> None:
    """`python examples/approval.py` prints the pause and the finished run."""
    done = forker.run(str(EXAMPLES / "approval.py"), timeout=60, env={**os.environ, "PYTHONPATH": str(EXAMPLES.parent)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == EXPECTED
