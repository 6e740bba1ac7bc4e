"""The one lone-surrogate rule: text that cannot be encoded as UTF-8 never reaches a model, an SDK or a store.

`os.listdir` and `os.fsdecode` turn bytes that are not UTF-8 into lone
surrogates (`"\\udcff"`); JSON may carry them too (`"\\ud800"`). Each becomes
U+FFFD; a high and a low surrogate that stand together become the character
they encode.
"""

from __future__ import annotations

import re
from typing import Any

_SURROGATE = re.compile("[\ud800-\udfff]")


def valid_text(text: str) -> str:
    """`text` as UTF-8 can carry it: itself (the common case, no copy), or its surrogates replaced."""
    if text.isascii() or _SURROGATE.search(text) is None:
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def replace_lone_surrogates(value: Any) -> Any:
    """`value` with `valid_text` applied to each of its strings (dict keys too), through dicts, lists and tuples.

    Returns `value` itself when there is nothing to replace, allocating nothing.
    """
    return _replaced(value) if has_surrogate(value) else value


def has_surrogate(value: Any) -> bool:
    """True when a string in `value` (dicts, lists and tuples walked) holds a surrogate."""
    kind = type(value)
    if kind is str:
        return not value.isascii() and _SURROGATE.search(value) is not None
    if kind is dict:
        return any(map(has_surrogate, value)) or any(map(has_surrogate, value.values()))
    if kind is list or kind is tuple:
        return any(map(has_surrogate, value))
    if kind is int or kind is bool or kind is float or value is None:
        return False
    if isinstance(value, str):
        return has_surrogate(str(value))
    if isinstance(value, dict):
        return any(has_surrogate(key) or has_surrogate(item) for key, item in value.items())
    if isinstance(value, list | tuple):
        return any(has_surrogate(item) for item in value)
    return False


def _replaced(value: Any) -> Any:
    if isinstance(value, str):
        return valid_text(value)
    if isinstance(value, dict):
        return {_replaced(key): _replaced(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_replaced(item) for item in value]
    if isinstance(value, tuple):
        return tuple(_replaced(item) for item in value)
    return value
