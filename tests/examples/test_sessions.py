"""examples/sessions.py keeps one conversation per session id."""

from __future__ import annotations

import os
import runpy
from pathlib import Path

from forker import Forker

EXAMPLES = Path(__file__).parents[2] / "examples"


async def test_sessions_example_remembers_per_user(tmp_path: Path) -> None:
    """A second run on user-42 knows the name; user-7's session does not."""
    main = runpy.run_path(str(EXAMPLES / "sessions.py"), run_name="example_sessions")["main"]
    assert await main(tmp_path / "s.db") == [
        "Nice to meet you, Ada.",
        "You are Ada.",
        "I don't know yet.",
        "user-42 has 4 messages",
    ]


def test_sessions_example_runs_as_a_script_and_remembers_across_processes(tmp_path: Path, forker: Forker) -> None:
    """Run twice on one file, the second process still knows Ada from the first."""
    path = tmp_path / "s.db"
    for _ in range(2):
        done = forker.run(
            str(EXAMPLES / "sessions.py"), str(path), timeout=60, env={**os.environ, "PYTHONPATH": str(EXAMPLES.parent)}
        )
        assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "user-42 has 8 messages"
