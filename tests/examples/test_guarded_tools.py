"""examples/guarded_tools.py runs offline and shows each guard at work."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "guarded_tools.py"


def test_guarded_tools_example_blocks_redacts_and_limits(capsys: pytest.CaptureFixture[str]) -> None:
    runpy.run_path(str(EXAMPLE), run_name="__main__")
    out = capsys.readouterr().out
    assert "delete_file(path='/var/log/audit.log') -> BLOCKED" in out and "denied by policy" in out
    assert "tools offered to the model: ['search', 'read_file']" in out
    assert "tools offered after search was used up: ['read_file']" in out
    assert "search(query='refund policy again') -> BLOCKED" in out and "at most 2 times" in out
    assert "first message the model saw: Customer [REDACTED] asks for a refund." in out
    assert "card [REDACTED], order 1234 5678 9012 3456" in out
    assert "jane.doe@example.com" not in out and "4111" not in out
    assert "output: Refund approved for the customer on file." in out
    assert "model calls: 3, usage requests: 3" in out
    assert "output: I stopped here: this run reached its limit of model calls (3)." in out
