"""Public names print the path users import them from (`onion.testing.CassetteMismatch`), as httpx's do."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import traceback
from pathlib import Path
from typing import Any

import pydantic
import pytest

from onion._exports import shown_in


def public_modules() -> list[str]:
    """onion and middleware, and each of their modules and packages with no private part in its name."""
    found = []
    for package in ("onion", "middleware"):
        found.append(package)
        root = importlib.import_module(package)
        for info in pkgutil.walk_packages(root.__path__, f"{package}."):
            if not any(part.startswith("_") for part in info.name.split(".")):
                found.append(info.name)
    return found


def public_names() -> list[tuple[str, Any]]:
    """`(module.name, value)` for each class and function a public module lists in `__all__`."""
    found = []
    for name in public_modules():
        module = importlib.import_module(name)
        for attr in getattr(module, "__all__", ()):
            value = getattr(module, attr)  # a lazy name (onion.stores.SQLiteStore) loads here
            if isinstance(value, type) or inspect.isfunction(value):
                found.append((f"{name}.{attr}", value))
    return found


def annotated(value: Any) -> bool:
    return isinstance(value, type) and any(
        inspect.get_annotations(base) and base.__module__.split(".")[0] in ("onion", "middleware")
        for base in value.__mro__
    )


def printed_path_is_public(value: Any) -> bool:
    """The path `__module__` and `__qualname__` print has no private part, and leads back to `value`."""
    module = value.__module__
    if any(part.startswith("_") for part in module.split(".")):
        return False
    found: Any = importlib.import_module(module)
    for part in value.__qualname__.split("."):
        found = getattr(found, part, None)
    return found is value


PUBLIC = public_names()


def test_every_public_error_prints_its_public_path() -> None:
    """Each exception a public module exports (`CassetteMismatch`, `NotDeterministic`, `RunBusy`, `LimitReached`)
    names a public module that has it: what pytest and tracebacks print."""
    errors = [(name, value) for name, value in PUBLIC if isinstance(value, type) and issubclass(value, BaseException)]
    assert len(errors) > 30
    assert [f"{name}: {value.__module__}" for name, value in errors if not printed_path_is_public(value)] == []


def test_every_public_onion_name_without_annotations_prints_its_public_path() -> None:
    """Functions and classes of onion's public modules (`onion.Agent`, `onion.tool`, `onion.testing.cassette`)
    print a public path, not the private module they are written in (`onion._agent`)."""
    plain = [(name, value) for name, value in PUBLIC if name.startswith("onion") and not annotated(value)]
    assert len(plain) > 60
    assert [f"{name}: {value.__module__}" for name, value in plain if not printed_path_is_public(value)] == []


@pytest.mark.parametrize("name", ["Usage", "Principal", "DecisionRecord", "ToolRequest", "PendingCall", "Message"])
def test_a_public_dataclass_keeps_the_module_its_annotations_are_read_in(name: str) -> None:
    """A class with annotations (a dataclass) keeps its `__module__`: pydantic reads its annotations there, so a
    model of yours with a field `principal: onion.Principal` still builds (relabelled `onion`, it fails)."""
    import onion

    value = getattr(onion, name)
    assert annotated(value)
    assert pydantic.TypeAdapter(value).json_schema()["type"] == "object"


def test_a_cassette_mismatch_prints_as_onion_testing_cassette_mismatch() -> None:
    """The issue's case: pytest showed `onion.testing._cassette_match.CassetteMismatch`."""
    from onion.testing import CassetteMismatch

    line = traceback.format_exception_only(CassetteMismatch("no recorded request", path=Path("x.json")))[-1]
    assert line == "onion.testing.CassetteMismatch: no recorded request\n"


def test_shown_in_leaves_public_classes_and_dataclasses_alone() -> None:
    """A class of a public module, and a dataclass of a private one, keep their `__module__`."""
    from onion import Usage
    from onion.errors import RunBusy

    assert shown_in("onion", RunBusy).__module__ == "onion.errors"
    assert shown_in("onion", Usage).__module__ == "onion._messages"


@pytest.mark.parametrize("name", ["onion.testing.cassette", "onion.Agent", "onion.stores.SQLiteStore"])
def test_repr_of_a_public_name_shows_where_to_import_it(name: str) -> None:
    """`repr(onion.Agent)` is `<class 'onion.Agent'>`; a lazy store, loaded on first use, too."""
    module, _, attr = name.rpartition(".")
    value = getattr(importlib.import_module(module), attr)
    assert f"{value.__module__}.{value.__qualname__}" == name
