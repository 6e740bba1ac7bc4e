"""How a cassette matches a live request to a recorded one, and `CassetteMismatch` when none matches.

Requests are compared field by field (`messages[1].text`, `settings.temperature`),
leaving out the ids providers generate (tool call ids, reasoning item ids:
each request numbers them in order of appearance) and the fields a cassette
was told to ignore.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from ..errors import OnionError

_IDS = frozenset(("id", "call_id", "tool_call_id", "tool_use_id"))
"""Keys whose string values are ids a provider (or `onion.testing.call`) made up; compared by order of appearance."""

_ORDER = ("provider", "model", "output_type", "messages", "tools", "settings")
"""The fields of a request in the order a mismatch looks for the first difference."""

_WHOLE = frozenset(("provider", "model", "output_type"))
"""Fields compared whole: what the cassette was recorded with."""

_STEP = re.compile(r"\.?([^.\[\]]+)|\[(\d+)\]")

Component = str | int
Fields = dict[str, Any]


class CassetteMismatch(OnionError):
    """A model call that a cassette cannot replay: no recorded request matches it, or the file is missing.

    `field` is the first field (`"messages[1].text"`) that differs from the
    closest recorded request, `recorded` and `actual` its two values
    (scrubbed of secrets), `path` the cassette file; `field` is None when
    there is nothing to compare with (no file, no recording).
    """

    def __init__(
        self, message: str, *, path: Path, field: str | None = None, recorded: Any = None, actual: Any = None
    ) -> None:
        super().__init__(message)
        self.path, self.field, self.recorded, self.actual = path, field, recorded, actual


def ignored(patterns: Iterable[str]) -> re.Pattern[str] | None:
    """One regex for the `ignore=` field names: `settings.temperature`, `messages[*].meta`, `tools` (and below)."""
    parts = [re.escape(pattern).replace(r"\*", r"[^.\[\]]+") for pattern in patterns]
    return re.compile(rf"(?:{'|'.join(parts)})(?=$|[.\[])") if parts else None


def fields(request: dict[str, Any], ignore: re.Pattern[str] | None) -> Fields:
    """The request's leaves by field name, in comparison order, ids renumbered, ignored fields left out."""
    flat: Fields = {}
    ids: dict[str, str] = {}

    def walk(name: str, value: Any) -> None:
        if ignore is not None and ignore.match(name):
            return
        if isinstance(value, dict) and value:
            for key in sorted(value):
                item = value[key]
                if key in _IDS and isinstance(item, str):
                    item = ids.setdefault(item, f"<id {len(ids) + 1}>")
                walk(f"{name}.{key}", item)
        elif isinstance(value, list) and value:
            for index, item in enumerate(value):
                walk(f"{name}[{index}]", item)
        else:
            flat[name] = value

    for key in _ORDER:
        if key in request and not (ignore is not None and ignore.match(key)):
            if key in _WHOLE:
                flat[key] = request[key]
            else:
                walk(key, request[key])
    return flat


class Matcher:
    """The recorded requests of one cassette; `take(request)` finds the first unused one equal to it."""

    __slots__ = ("_fields", "_ignore", "_path", "_requests", "_used")

    def __init__(self, requests: Sequence[dict[str, Any]], ignore: re.Pattern[str] | None, path: Path) -> None:
        self._requests = list(requests)
        self._ignore = ignore
        self._fields = [fields(request, ignore) for request in self._requests]
        self._used = [False] * len(self._requests)
        self._path = path

    def take(self, request: dict[str, Any]) -> int:
        """The index of the recorded request that answers `request` (used once); else raises `CassetteMismatch`."""
        live = fields(request, self._ignore)
        for index, recorded in enumerate(self._fields):
            if not self._used[index] and recorded == live:
                self._used[index] = True
                return index
        raise self._mismatch(request, live)

    def _mismatch(self, request: dict[str, Any], live: Fields) -> CassetteMismatch:
        path, total = self._path, len(self._fields)
        fix = 'record it again with mode="record" (pytest --onion-record)'
        if not total:
            return CassetteMismatch(f"cassette {path} holds no model call, and this run made one: {fix}", path=path)
        if live in self._fields:
            times = self._fields.count(live)
            return CassetteMismatch(
                f"cassette {path}: this model call was recorded {times} time(s), and each was already replayed in "
                f"this block (a recorded call answers once); the agent now asks it more often: {fix}",
                path=path,
            )
        same = [self._fields[i] for i in range(total) if all(self._fields[i].get(k) == live.get(k) for k in _WHOLE)]
        if not same:
            recorded = self._requests[0]
            return CassetteMismatch(
                f"cassette {path} was recorded with {_with(recorded)}, and this model call goes to {_with(request)}: "
                f"{fix}",
                path=path,
                field=next(k for k in _ORDER if k in _WHOLE and self._fields[0].get(k) != live.get(k)),
                recorded=_with(recorded),
                actual=_with(request),
            )
        unused = [i for i in range(total) if not self._used[i]] or list(range(total))
        closest = min(unused, key=lambda i: (_distance(self._fields[i], live), i))
        differing = sorted(_differing(self._fields[closest], live), key=_sort_key)
        name = _where(differing[0], self._requests[closest], request)
        recorded, actual = _at(self._requests[closest], name), _at(request, name)
        more = f" ({len(differing) - 1} more field(s) differ)" if len(differing) > 1 else ""
        return CassetteMismatch(
            f"cassette {path}: no recorded model call matches this one. First difference from the closest "
            f"recorded call (number {closest + 1} of {total}), at {name}{more}:\n"
            f"  recorded: {_shown(recorded)}\n  now:      {_shown(actual)}\n"
            f"If the change is intended, {fix}; to leave the field out of matching, "
            f"pass cassette(..., ignore=[{name!r}])",
            path=path,
            field=name,
            recorded=recorded,
            actual=actual,
        )


_ABSENT: Any = type("Absent", (), {"__repr__": lambda self: "(absent)"})()


def _with(request: dict[str, Any]) -> str:
    output = request.get("output_type")
    kind = output if isinstance(output, str) else (output or {}).get("name", "?")
    return f"{request.get('provider')}:{request.get('model')} (output type {kind})"


def _differing(a: Fields, b: Fields) -> list[str]:
    return [name for name in a.keys() | b.keys() if a.get(name, _ABSENT) != b.get(name, _ABSENT)]


def _distance(a: Fields, b: Fields) -> int:
    return len(_differing(a, b))


def _components(name: str) -> list[Component]:
    return [int(index) if index else key for key, index in _STEP.findall(name)]


def _sort_key(name: str) -> tuple[Any, ...]:
    steps = _components(name)
    return (_ORDER.index(str(steps[0])), *((0, step) if isinstance(step, int) else (1, step) for step in steps[1:]))


def _where(name: str, recorded: dict[str, Any], live: dict[str, Any]) -> str:
    """`name`, or its shortest start that one of the two requests lacks (`messages[3]`, not `messages[3].role`)."""
    steps = _components(name)
    for end in range(1, len(steps) + 1):
        prefix = _name(steps[:end])
        if _at(recorded, prefix) is _ABSENT or _at(live, prefix) is _ABSENT:
            return prefix
    return name


def _name(steps: Sequence[Component]) -> str:
    return "".join(f"[{s}]" if isinstance(s, int) else (f".{s}" if i else s) for i, s in enumerate(steps))


def _at(request: Any, name: str) -> Any:
    value = request
    for step in _components(name):
        found = (
            step < len(value)
            if isinstance(value, list) and isinstance(step, int)
            else isinstance(value, dict) and step in value
        )
        if found:
            value = value[step]
        else:
            return _ABSENT
    return value


def _shown(value: Any) -> str:
    if value is _ABSENT:
        return "(absent)"
    text = json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    return text if len(text) <= 400 else text[:400] + f"... ({len(text)} characters)"
