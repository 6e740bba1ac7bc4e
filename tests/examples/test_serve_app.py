"""examples/serve_app.py serves an agent on a real uvicorn server: a run pauses, is listed, approved, completes."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).parents[2] / "examples"

pytestmark = pytest.mark.slow  # a real uvicorn server


async def test_serve_app_example_pauses_lists_and_approves_a_run_over_http() -> None:
    """The example's three answers, from its own uvicorn server."""
    main = runpy.run_path(str(EXAMPLES / "serve_app.py"), run_name="example_serve_app")["main"]
    assert await main() == [
        "paused: delete_file(old-draft.txt): deleting needs a person",
        "waiting: 1 run(s)",
        "completed: Deleted old-draft.txt.",
    ]
