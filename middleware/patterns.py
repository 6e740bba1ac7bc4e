"""Compiled patterns for secrets and personal data, shared by `redact` and `log`.

Each matches the secret itself, so `PATTERN.sub("[REDACTED]", text)` hides it.
`API_KEY`, `BEARER` and `SECRET_ASSIGNMENT` match secrets (grouped in
`SECRETS`; `scrub(text)` replaces them all); `EMAIL` and `CARD_NUMBER` match
personal data. `CARD_NUMBER` matches any run of 13 to 19 digits (spaces or
dashes allowed); confirm a match with `luhn_valid` before treating it as a
card number.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

EMAIL = re.compile(r"\b[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b")
"""An e-mail address."""

API_KEY = re.compile(
    r"\b(?:"
    r"sk-ant-[A-Za-z0-9_-]{8,}"  # Anthropic
    r"|sk-(?:proj-|svcacct-|admin-|live-|test-)?[A-Za-z0-9_-]{16,}"  # OpenAI, Stripe-style secret keys
    r"|(?:sk|pk|rk)_(?:live|test)_[A-Za-z0-9]{16,}"  # Stripe keys
    r"|AKIA[0-9A-Z]{16}"  # AWS access key id
    r"|AIza[0-9A-Za-z_-]{35}"  # Google API key
    r"|(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,}"  # GitHub tokens
    r"|xox[abposr]-[A-Za-z0-9-]{10,}"  # Slack tokens
    r")"
)
"""An API key or token in one of the well-known vendor formats."""

BEARER = re.compile(r"(?i)\b(?:authorization\s*[:=]\s*[\"']?\s*)?(?:bearer|basic)\s+[A-Za-z0-9._~+/-]{8,}=*")
"""A bearer (or basic) credential, with its `Authorization:` header name when present."""

SECRET_ASSIGNMENT = re.compile(
    r"(?i)([\"']?\b[\w-]*(?:api[_-]?key|secret|password|passwd|access[_-]?token|auth[_-]?token|"
    r"authorization|x-api-key|private[_-]?key)[\"']?\s*[:=]\s*)"
    r"((?:(?:bearer|basic|token)\s+)?(?:\"[^\"]*\"|'[^']*'|[^\s,;}&]+))"
)
"""`api_key=...`, `"password": "..."`, `Authorization: ...`: group 1 is the name, group 2 the value."""

CARD_NUMBER = re.compile(r"(?<![\d-])\d(?:[ -]?\d){12,18}(?![\d-])")
"""A candidate payment-card number: 13 to 19 digits; check it with `luhn_valid`."""

SECRETS: tuple[re.Pattern[str], ...] = (SECRET_ASSIGNMENT, API_KEY, BEARER)
"""Every secret pattern, in the order `scrub` applies them."""

REDACTED = "[REDACTED]"


_CLUES: dict[re.Pattern[str], re.Pattern[str]] = {
    SECRET_ASSIGNMENT: re.compile(r"(?:api|secret|passw|token|auth|private)[^:=]*[:=]"),
    API_KEY: re.compile(r"sk-|sk_|pk_|rk_|akia|aiza|ghp_|gho_|ghu_|ghs_|ghr_|github_pat_|xox"),
    BEARER: re.compile(r"bearer|basic"),
}
"""What text must contain, once lowercased, for each secret pattern to match in it.

A far cheaper scan than the pattern's own; only sound on ASCII text (with
`(?i)`, U+017F (long s) matches `s` and U+212A (Kelvin sign) `k`).
"""


def scrub(text: str, patterns: Iterable[re.Pattern[str]] = SECRETS, replacement: str = REDACTED) -> str:
    """`text` with every match of `patterns` replaced; a `SECRET_ASSIGNMENT` keeps its name.

    The shared secret patterns are skipped on ASCII text that lacks what
    any match of them must contain; other patterns always run.
    """
    lowered = text.lower() if text.isascii() else None
    for pattern in patterns:
        if lowered is not None and not _may_match(pattern, lowered):
            continue
        if pattern is SECRET_ASSIGNMENT:
            scrubbed = pattern.sub(lambda match: match.group(1) + replacement, text)
        else:
            scrubbed = pattern.sub(replacement, text)
        if scrubbed is not text:
            text = scrubbed
            lowered = text.lower() if text.isascii() else None
    return text


def _may_match(pattern: re.Pattern[str], lowered: str) -> bool:
    clue = _CLUES.get(pattern)
    return clue is None or clue.search(lowered) is not None


def luhn_valid(candidate: str) -> bool:
    """True when the digits of `candidate` pass the Luhn checksum of card numbers."""
    digits = [int(c) for c in candidate if c.isdigit()]
    if not 13 <= len(digits) <= 19:
        return False
    total = 0
    for position, digit in enumerate(reversed(digits)):
        if position % 2:
            digit *= 2
            if digit > 9:
                digit -= 9
        total += digit
    return total % 10 == 0


__all__ = [
    "API_KEY",
    "BEARER",
    "CARD_NUMBER",
    "EMAIL",
    "REDACTED",
    "SECRETS",
    "SECRET_ASSIGNMENT",
    "luhn_valid",
    "scrub",
]
