"""examples/evals.py: six support cases recorded into cassettes, replayed offline to the same report."""

from __future__ import annotations

import runpy
from pathlib import Path

from forker import Forker

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "evals.py"


async def test_evals_example_replays_its_cassettes_to_the_recorded_report_naming_the_failing_check(
    tmp_path: Path,
) -> None:
    """Five cases pass, the one built to fail names its check and why; the replay (no model reachable) agrees."""
    lines = await runpy.run_path(str(EXAMPLE), run_name="example_evals")["main"](tmp_path, tmp_path / "report.html")
    assert lines[0] == "eval support: 5 of 6 cases passed"
    failing = [line for line in lines if "FAIL" in line]
    assert len(failing) == 1 and failing[0].startswith("is-the-first-of-orders-8-and-9-late")
    assert "called('lookup_order', order=9): lookup_order was called" in failing[0]
    assert lines[-1] == "replayed report is the recorded one: True"
    assert len(list((tmp_path / "cassettes").glob("*.json"))) == 6
    page = (tmp_path / "report.html").read_text()
    assert "polite" in page and "the answer is polite" in page


def test_evals_example_runs_as_a_script(tmp_path: Path, forker: Forker) -> None:
    """`python examples/evals.py report.html` prints the table and writes the page."""
    done = forker.run(str(EXAMPLE), str(tmp_path / "report.html"), timeout=120)
    assert done.returncode == 0, done.stderr
    assert "eval support: 5 of 6 cases passed" in done.stdout and (tmp_path / "report.html").exists()
