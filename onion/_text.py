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
    pending = [value]
    pop, push = pending.pop, pending.extend
    while pending:
        item = pop()
        kind = type(item)
        if kind is str:
            if not item.isascii() and _SURROGATE.search(item) is not None:
                return True
        elif kind is dict:
            push(item)
            push(item.values())
        elif kind is list or kind is tuple:
            push(item)
        elif kind is int or kind is bool or kind is float or item is None:
            continue
        elif isinstance(item, str):
            if _SURROGATE.search(item) is not None:
                return True
        elif isinstance(item, dict):
            push(item)
            push(item.values())
        elif isinstance(item, list | tuple):
            push(item)
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
