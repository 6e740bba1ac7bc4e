"""The docs suite's count: how many of the docs' programs ran, how many fragments compiled, how many failed."""

from __future__ import annotations

from collections import Counter

import pytest

COUNTED = {
    "test_every_program_in_the_docs_runs_offline_and_prints_what_the_page_shows": "program",
    "test_every_fragment_in_the_docs_compiles": "fragment",
}
_seen: Counter[str] = Counter()


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Count each program and fragment test of tests/docs/test_blocks.py once: its call's outcome, or a failed
    setup (the program's fixture raised)."""
    name = report.nodeid.partition("::")[2].partition("[")[0]
    kind = COUNTED.get(name)
    if kind is None or not report.nodeid.startswith("tests/docs/test_blocks.py"):
        return
    if report.when == "call" or (report.when == "setup" and report.failed):
        _seen[f"{kind} {'ok' if report.passed else 'failed'}"] += 1


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """`docs blocks: 47 whole programs run, 39 fragments compiled, 0 failures` when the blocks' tests ran."""
    if not _seen:
        return
    programs = _seen["program ok"] + _seen["program failed"]
    fragments = _seen["fragment ok"] + _seen["fragment failed"]
    failures = _seen["program failed"] + _seen["fragment failed"]
    terminalreporter.write_line(
        f"docs blocks: {programs} whole programs run, {fragments} fragments compiled, {failures} failures"
    )
