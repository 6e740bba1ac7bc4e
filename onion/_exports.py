"""A public package's names shown under the package (`onion.testing.CassetteMismatch`), as httpx shows its own.

Reprs, tracebacks, pytest's reports and pickles print a class's or function's `__module__`: the private module
it is written in (`onion.testing._cassette_match`) is no path a user imports from.
"""

from __future__ import annotations

import inspect
from typing import Any, TypeVar

T = TypeVar("T")


def shown_in(package: str, value: T) -> T:
    """`value` labelled as `package`'s when it is a class or function of a private module of onion
    (`onion._hook.Block`, re-exported by `onion.hooks`); returns `value`.

    Left as it is: a name another public module labelled first, and a class with annotations of its own or
    from an onion base (a dataclass): `typing.get_type_hints` and pydantic read those in the namespace of
    `__module__`, where the names they use are imported.
    """
    module = getattr(value, "__module__", None)
    if not (isinstance(value, type) or inspect.isfunction(value)) or not isinstance(module, str):
        return value
    parts = module.split(".")
    if parts[0] == "onion" and any(part.startswith("_") for part in parts) and not _annotated(value):
        value.__module__ = package
    return value


def _annotated(value: object) -> bool:
    """Whether `value` is a class that it or a base of onion's annotates (with `from __future__ import
    annotations`, as text to be read in its module)."""
    if not isinstance(value, type):
        return False
    return any(inspect.get_annotations(base) and base.__module__.split(".")[0] == "onion" for base in value.__mro__)


def export(namespace: dict[str, Any]) -> None:
    """`shown_in` for every name of a package's `__all__` it has loaded (call it last in the `__init__`)."""
    package = namespace["__name__"]
    for name in namespace["__all__"]:
        if name in namespace:
            shown_in(package, namespace[name])
