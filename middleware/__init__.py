"""The built-in middleware library: `from middleware import cache, retry, log`.

Every piece is an ordinary middleware written against onion's public API.
"""

from __future__ import annotations

import importlib
from typing import Any

_MODULES = {
    "log": "log",
    "retry": "retry",
    "timeout": "timeout",
    "rate_limit": "rate_limit",
    "cache": "cache",
    "fallback": "fallback",
    "budget": "budget",
    "limit": "limit",
    "allow_tools": "tools_filter",
    "deny_tools": "tools_filter",
    "redact": "redact",
    "concurrency": "concurrency",
    "guard": "guard",
    "reflect": "reflect",
}


def __getattr__(name: str) -> Any:
    if name in _MODULES:
        return getattr(importlib.import_module(f"middleware.{_MODULES[name]}"), name)
    raise AttributeError(f"module 'middleware' has no attribute {name!r}")
