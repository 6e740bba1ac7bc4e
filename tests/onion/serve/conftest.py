"""The serve tests' fixture: uvicorn servers of `served_agent.py`, one per module and settings."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # live_server.py and served_agent.py import by name

from live_server import Served, servers


@pytest.fixture(scope="module")
def serving(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., Served]]:
    """`serving(store=True, token=TOKEN)`: a running server of `served_agent:app`; stopped after the module."""
    yield from servers(tmp_path_factory)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test of a real uvicorn process (the `serving` fixture) is `slow`: `pytest -m 'not slow'` keeps the
    in-process ones."""
    for item in items:
        if "serving" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slow)
