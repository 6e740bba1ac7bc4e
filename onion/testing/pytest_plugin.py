"""onion's pytest plugin: the `onion_cassette` fixture, `pytest --onion-record` and `--onion-replay`.

Installed with onion (the `pytest11` entry point `onion`): nothing to add to
a `conftest.py`. The fixture's cassette is active for the whole test and
is named after it: `<rootdir>/tests/cassettes/<module>/<test>.json` (the
folder is the ini option `onion_cassettes`). `@pytest.mark.onion_cassette(
path=None, *, ignore=(), tools=False)` sets one test's file (relative to
that folder), ignored fields or tool recording.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from ._cassette import Cassette, CassetteMode

_UNSAFE = re.compile(r"[^\w.\[\]-]+")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("onion", "onion cassettes")
    group.addoption(
        "--onion-record",
        action="store_true",
        help="call the models and record every onion_cassette afresh (mode='record')",
    )
    group.addoption(
        "--onion-replay",
        action="store_true",
        help="never call a model in an onion_cassette test: a missing cassette fails (mode='replay')",
    )
    parser.addini(
        "onion_cassettes", "folder of the onion_cassette files, relative to the rootdir", default="tests/cassettes"
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "onion_cassette(path=None, *, ignore=(), tools=False): the file and options of onion_cassette"
    )


def cassette_path(request: pytest.FixtureRequest, name: str | None = None) -> Path:
    """Where a test's cassette lives: the `onion_cassettes` folder, the test module's name, the test's name."""
    folder = Path(request.config.rootpath, str(request.config.getini("onion_cassettes")))
    if name is not None:
        return folder / name
    module = Path(request.node.path).stem
    test = ".".join(part for part in request.node.nodeid.split("::")[1:])
    return folder / module / f"{_UNSAFE.sub('_', test)}.json"


def _mode(config: pytest.Config) -> CassetteMode:
    record, replay = config.getoption("onion_record"), config.getoption("onion_replay")
    if record and replay:
        raise pytest.UsageError("--onion-record and --onion-replay contradict each other: pass one")
    return "record" if record else "replay" if replay else "once"


@pytest.fixture
def onion_cassette(request: pytest.FixtureRequest) -> Iterator[Cassette]:
    """A cassette named after the test, active for the whole test: records once, replays after.

    `pytest --onion-record` records again; `--onion-replay` never calls a model.
    """
    from ._cassette import cassette

    marker = request.node.get_closest_marker("onion_cassette")
    args, options = (marker.args, dict(marker.kwargs)) if marker is not None else ((), {})
    name = options.pop("path", args[0] if args else None)
    with cassette(cassette_path(request, name), mode=_mode(request.config), **options) as active:
        yield active
