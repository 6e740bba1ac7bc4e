"""Lone surrogates out of request bodies: the rule is onion's one (`onion._text`)."""

from __future__ import annotations

from .._text import has_surrogate as _has_surrogate
from .._text import replace_lone_surrogates

__all__ = ["_has_surrogate", "replace_lone_surrogates"]
