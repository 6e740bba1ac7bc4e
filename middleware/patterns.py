"""The one set of patterns for secrets and personal data, shared by `redact`, `log` and onion itself.

Each matches the secret itself, so `PATTERN.sub("[REDACTED]", text)` hides it; `scrub(text)` applies them all
(`BUILTIN`). The patterns live in onion (`onion.scrub`: traces, cassettes and the CLI scrub with them too); this
module is their public home for layer authors.
"""

from __future__ import annotations

from onion.scrub import (  # noqa: F401 (the private helpers too, for code that reached them here)
    _CLUES,
    _KEY_START,
    _OPEN,
    _PEM_END,
    _REPLACERS,
    _SECRET_WORD_CLUE,
    _SECRET_WORDS,
    _SEPARATOR,
    _SPANNING,
    _VALUE_END,
    API_KEY,
    BEARER,
    BUILTIN,
    CARD_NUMBER,
    EMAIL,
    IBAN,
    PERSONAL,
    PHONE,
    PRIVATE_KEY,
    REDACTED,
    SECRET_ASSIGNMENT,
    SECRET_NAME,
    SECRETS,
    _if_luhn_valid,
    _keep_name,
    _scrub_keys,
    iban_valid,
    luhn_valid,
    open_match_start,
    phone_valid,
    rewrite_strings,
    scrub,
    scrub_value,
)

__all__ = [
    "API_KEY",
    "BEARER",
    "BUILTIN",
    "CARD_NUMBER",
    "EMAIL",
    "IBAN",
    "PERSONAL",
    "PHONE",
    "PRIVATE_KEY",
    "REDACTED",
    "SECRETS",
    "SECRET_ASSIGNMENT",
    "SECRET_NAME",
    "iban_valid",
    "luhn_valid",
    "open_match_start",
    "phone_valid",
    "scrub",
    "scrub_value",
]
