"""Lone surrogates out of request bodies: text that cannot be encoded as UTF-8 never reaches an SDK.

`os.listdir` and `os.fsdecode` turn bytes that are not UTF-8 into lone
surrogates (`"\\udcff"`); JSON may carry them too (`"\\ud800"`). The SDKs
then fail to encode the request with a bare `UnicodeEncodeError`.
"""

from __future__ import annotations

import re
from typing import Any

_SURROGATE = re.compile("[\ud800-\udfff]")


def replace_lone_surrogates(value: Any) -> Any:
    """`value` with each lone surrogate in its strings (dict keys too) replaced by U+FFFD.

    A high and low surrogate that stand together become the character they
    encode. Walks dicts, lists and tuples; returns `value` itself when there
    is nothing to replace (the common case, which allocates nothing).
    """
    return _replaced(value) if _has_surrogate(value) else value


def _text(text: str) -> str:
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def _has_surrogate(value: Any) -> bool:
    if isinstance(value, str):
        return not value.isascii() and _SURROGATE.search(value) is not None
    if isinstance(value, dict):
        return any(_has_surrogate(key) or _has_surrogate(item) for key, item in value.items())
    if isinstance(value, list | tuple):
        return any(_has_surrogate(item) for item in value)
    return False


def _replaced(value: Any) -> Any:
    if isinstance(value, str):
        return _text(value) if _has_surrogate(value) else value
    if isinstance(value, dict):
        return {_replaced(key): _replaced(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_replaced(item) for item in value]
    if isinstance(value, tuple):
        return tuple(_replaced(item) for item in value)
    return value
