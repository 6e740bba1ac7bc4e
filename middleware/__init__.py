"""The built-in middleware library: `from middleware import cache, retry, log`.

Every piece is an ordinary middleware written against onion's public API.
"""

from __future__ import annotations

from .approve import approve
from .authorize import Allow, Ask, Deny, authorize
from .budget import budget
from .cache import cache
from .compact import compact
from .concurrency import concurrency
from .contain import contain
from .fallback import fallback
from .guard import guard
from .limit import limit
from .log import log
from .prompt_cache import prompt_cache
from .pseudonymize import pseudonymize
from .rate_limit import rate_limit
from .redact import redact
from .reflect import reflect
from .retry import retry
from .select_tools import select_tools
from .timeout import timeout
from .tools_filter import allow_tools, deny_tools
from .tripwire import tripwire

__all__ = [
    "Allow",
    "Ask",
    "Deny",
    "allow_tools",
    "approve",
    "authorize",
    "budget",
    "cache",
    "compact",
    "contain",
    "concurrency",
    "deny_tools",
    "fallback",
    "guard",
    "limit",
    "log",
    "pseudonymize",
    "prompt_cache",
    "rate_limit",
    "redact",
    "reflect",
    "retry",
    "select_tools",
    "timeout",
    "tripwire",
]
