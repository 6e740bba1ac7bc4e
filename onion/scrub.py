"""Secrets and personal data: the one set of patterns that `redact`, `log`, traces, cassettes and the CLI hide.

`middleware.patterns` re-exports every name here.

Each matches the secret itself, so `PATTERN.sub("[REDACTED]", text)` hides
it; `scrub(text)` applies them all (`BUILTIN`), keeping the name of a
`SECRET_ASSIGNMENT` and leaving digit runs that fail the Luhn check alone.
`SECRETS` are credentials (`PRIVATE_KEY`, `SECRET_ASSIGNMENT`, `API_KEY`,
`BEARER`); `PERSONAL` is personal data (`EMAIL`, `CARD_NUMBER`).

Every pattern runs in time linear in the text: each can only start where a
run of the characters it consumes starts (or at a fixed prefix), and no two
quantifiers compete for the same characters, so megabytes of adversarial
text (runs of `a`, `@`, `.`, `=`, digits) take milliseconds. Keys are found
after escapes too (`\\nsk-...` in JSON or `repr` text).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from functools import partial
from typing import Any

from ._messages import Message, ToolRequest

_KEY_START = r"(?:(?<![A-Za-z0-9].)|(?<=\\[nrtbf].))"
"""Checked after a key's first character: the key does not start inside a word, or starts right after an
escape such as `\\n` (`_` joins words, so it may precede). After, not before, so the regex engine can
skip ahead to the characters a key can start with.
"""

EMAIL = re.compile(r"(?<![\w.%+-])[\w.%+-]+@[\w-]+(?:\.[\w-]+)*\.[^\W\d_]{2,}(?![\w-])")
"""An e-mail address, non-ASCII ones included (`josé@correo.es`, `用户@例子.广告`)."""

API_KEY = re.compile(
    r"s" + _KEY_START + r"k(?:-ant-[A-Za-z0-9_-]{8,}"  # Anthropic
    r"|-(?:proj-|svcacct-|admin-|live-|test-)?[A-Za-z0-9_-]{16,}"  # OpenAI, Stripe-style secret keys
    r"|_(?:live|test)_[A-Za-z0-9]{16,})"  # Stripe secret keys
    r"|p" + _KEY_START + r"k_(?:live|test)_[A-Za-z0-9]{16,}"  # Stripe publishable keys
    r"|r" + _KEY_START + r"k_(?:live|test)_[A-Za-z0-9]{16,}"  # Stripe restricted keys
    r"|A" + _KEY_START + r"(?:KIA[0-9A-Z]{16}|Iza[0-9A-Za-z_-]{35})"  # AWS access key id, Google API key
    r"|g" + _KEY_START + r"(?:h[opusr]_[A-Za-z0-9]{30,}|ithub_pat_[A-Za-z0-9_]{30,})"  # GitHub tokens
    r"|x" + _KEY_START + r"ox[abposr]-[A-Za-z0-9-]{10,}"  # Slack tokens
)
"""An API key or token in one of the well-known vendor formats."""

BEARER = re.compile(
    r"(?:[Aa]" + _KEY_START + r"(?i:uthorization)\s*+[:=]\s*+[\"']?\s*+(?i:bearer|basic)"
    r"|[Bb]" + _KEY_START + r"(?i:earer|asic))\s++(?:[A-Za-z0-9_~+/-]|\.(?=[A-Za-z0-9_~+/-])){8,}+=*"
)
"""A bearer (or basic) credential, with its `Authorization:` header name when present (not a full stop after it)."""

_SECRET_WORDS = r"api[_-]?key|secret|password|passwd|access[_-]?token|auth[_-]?token|authorization|private[_-]?key"

SECRET_NAME = re.compile(r"(?i)" + _SECRET_WORDS)
"""Found in the name of a setting, field or header whose value is a secret (`api_key`, `X-Auth-Token`)."""

_VALUE_END = r"[^\s,;}&.:!?*)\]>\"'\u201d\u2019\u00bb]"
"""The last character of an unquoted secret value: not a closing bracket or quote, nor sentence punctuation."""

SECRET_ASSIGNMENT = re.compile(
    r"((?<![\w-])(?=[\w-]++(?:\\?[\"'])?\s*+[:=])(?=[\w-]*?(?i:"
    + _SECRET_WORDS
    + r"))[\w-]++(?:\\?[\"'])?\s*+[:=]\s*+)"
    r"((?:(?i:bearer|basic|token)\s++)?(?:\"[^\"]*+\"|'[^']*+'|[^\s,;}&]*" + _VALUE_END + r"|[^\s,;}&]++))"
)
"""`api_key=...`, `"password": "..."`, `Authorization: ...`: group 1 is the name, group 2 the value.

A name is a whole word (letters, digits, `_`, `-`) holding one of the secret words. An unquoted value
leaves the quotes, brackets and full stop around it (`(password=hunter2).`) unless it is nothing else.
"""

PRIVATE_KEY = re.compile(
    r"-----BEGIN [A-Z0-9 ]*?PRIVATE KEY-----"
    r"(?:(?:[^-]|-(?!----))*+-----END [A-Z0-9 ]*?PRIVATE KEY-----|[A-Za-z0-9+/=\s\\]*+)"
)
"""A PEM private key block (the key body alone when its `END` line is missing)."""

CARD_NUMBER = re.compile(r"[0-9](?<![0-9-][0-9])(?:[ \-.\u00a0\u2007\u202f]?[0-9]){12,18}(?![0-9-])")
"""A candidate payment-card number: 13 to 19 digits, single spaces (no-break ones too), dashes or dots between.

`scrub` replaces only those passing `luhn_valid`.
"""

PHONE = re.compile(
    r"(?<![\w+])\+[1-9][0-9]{0,2}(?:[ .\-]?(?:\([0-9]{1,4}\)|[0-9]{1,4})){2,5}(?![\w-])"
    r"|(?<!\w)(?:\([0-9]{3}\) ?|[0-9]{3}[.\-])[0-9]{3}[.\-][0-9]{4}(?![\w-])"
)
"""A phone number: international (`+44 20 7946 0958`) or North American (`(555) 123-4567`, `555-123-4567`).

`phone_valid` keeps those with 7 to 15 digits; dates and plain numbers do not match. A parenthesis is part
of a number only with its partner (`+44 (0)20 ...`), so `(call +44 20 7946 0958)` keeps its `)`.
"""

IBAN = re.compile(r"(?<![A-Za-z0-9])[A-Z]{2}[0-9]{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?(?![A-Za-z0-9])")
"""An IBAN, grouped by fours or not (`DE89 3704 0044 0532 0130 00`); `iban_valid` checks its checksum."""

SECRETS: tuple[re.Pattern[str], ...] = (PRIVATE_KEY, SECRET_ASSIGNMENT, API_KEY, BEARER)
"""Every credential pattern, in the order `scrub` applies them."""

PERSONAL: tuple[re.Pattern[str], ...] = (EMAIL, CARD_NUMBER)
"""Personal data: e-mail addresses and card numbers."""

BUILTIN: tuple[re.Pattern[str], ...] = SECRETS + PERSONAL
"""The one built-in set `redact` and `log` both apply."""

REDACTED = "[REDACTED]"


_SECRET_WORD_CLUE = re.compile(r"api|secret|passw|token|auth|private").search

_CLUES: dict[int, Callable[[str], object]] = {
    id(PRIVATE_KEY): lambda lowered: "private key-----" in lowered,
    id(SECRET_ASSIGNMENT): lambda lowered: ("=" in lowered or ":" in lowered) and _SECRET_WORD_CLUE(lowered),
    id(API_KEY): re.compile(r"sk-|sk_|pk_|rk_|akia|aiza|ghp_|gho_|ghu_|ghs_|ghr_|github_pat_|xox").search,
    id(BEARER): re.compile(r"bearer|basic").search,
    id(EMAIL): lambda lowered: "@" in lowered,
}
"""What text must contain, once lowercased, for each pattern (by `id`: hashing a pattern hashes its source) to match.

A far cheaper scan than the pattern's own; only sound on ASCII text (with
`(?i)`, U+017F (long s) matches `s` and U+212A (Kelvin sign) `k`).
"""


def _keep_name(replacement: str) -> Callable[[re.Match[str]], str]:
    return lambda match: match.group(1) + replacement


def _if_luhn_valid(replacement: str) -> Callable[[re.Match[str]], str]:
    return lambda match: replacement if luhn_valid(match.group()) else match.group()


_REPLACERS: dict[int, Callable[[str], Callable[[re.Match[str]], str]]] = {
    id(SECRET_ASSIGNMENT): _keep_name,
    id(CARD_NUMBER): _if_luhn_valid,
}


def scrub(text: str, patterns: Iterable[re.Pattern[str]] = BUILTIN, replacement: str = REDACTED) -> str:
    """`text` with every match of `patterns` replaced by `replacement`.

    A `SECRET_ASSIGNMENT` keeps its name (`api_key=[REDACTED]`); a
    `CARD_NUMBER` match is replaced only when it passes `luhn_valid`. The
    built-in patterns are skipped on ASCII text that lacks what any match of
    them must contain; other patterns always run.
    """
    lowered = text.lower() if text.isascii() else None
    for pattern in patterns:
        key = id(pattern)
        if lowered is not None:
            clue = _CLUES.get(key)
            if clue is not None and not clue(lowered):
                continue
        replacer = _REPLACERS.get(key)
        scrubbed = pattern.sub(replacement if replacer is None else replacer(replacement), text)
        if scrubbed is not text:
            text = scrubbed
            lowered = text.lower() if text.isascii() else None
    return text


def scrub_value(value: Any, patterns: Sequence[re.Pattern[str]] = BUILTIN, replacement: str = REDACTED) -> Any:
    """`value` (JSON-like data: dicts, lists, tuples, strings) with every string scrubbed.

    A value under a key matching `SECRET_NAME` (`{"password": ...}`) is
    replaced whole, and string keys are scrubbed too (a secret used as a key;
    two keys scrubbed alike stay apart, numbered). Containers are rebuilt
    (dicts and lists; tuples become lists); other values are returned as
    they are. For display (logs, traces): the shape of the data may change.
    """
    text = partial(scrub, patterns=patterns, replacement=replacement)
    return rewrite_strings(_scrub_keys(value, text), text, replacement)


def _scrub_keys(value: Any, text: Callable[[str], str]) -> Any:
    """`value` with every string key of its dicts (at any depth) rewritten by `text`."""
    if isinstance(value, dict):
        scrubbed: dict[Any, Any] = {}
        for key, item in value.items():
            name = text(key) if isinstance(key, str) else key
            n = 1
            while name in scrubbed:
                n += 1
                name = f"{text(key)} #{n}"
            scrubbed[name] = _scrub_keys(item, text)
        return scrubbed
    if isinstance(value, list | tuple):
        return [_scrub_keys(item, text) for item in value]
    return value


def rewrite_strings(value: Any, text: Callable[[str], str], secret: str | None = None) -> Any:
    """`value` (JSON-like data: dicts, lists, tuples, strings) with `text` applied to every string.

    With `secret`, a non-empty value under a key matching `SECRET_NAME`
    (`{"password": ...}`) becomes `secret` whole. Containers are rebuilt
    (dicts and lists; tuples become lists); other values are returned as
    they are.
    """
    if isinstance(value, str):
        return text(value)
    if isinstance(value, dict):
        return {
            key: secret
            if secret is not None and isinstance(key, str) and item and SECRET_NAME.search(key)
            else rewrite_strings(item, text, secret)
            for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return [rewrite_strings(item, text, secret) for item in value]
    return value


def rewrite_message(
    message: Message, text: Callable[[str], str], args: Callable[[dict[str, Any]], Any] | None = None
) -> Message:
    """`message` with `text` applied to its text, its text parts and each tool call's raw arguments, and `args`
    (default: `text` on every string in them) to each tool call's arguments.

    Returns `message` itself when nothing changed, otherwise a new `Message`
    (images and documents kept as they are). `redact` and `pseudonymize` rewrite
    messages with it.
    """
    new_text = text(message.text) if message.text else message.text
    rewrite_args = args if args is not None else partial(rewrite_strings, text=text)
    calls = []
    for call in message.tool_calls:
        new_args = rewrite_args(call.args)
        raw_args = None if call.raw_args is None else text(call.raw_args)
        same = new_args == call.args and raw_args == call.raw_args
        calls.append(call if same else ToolRequest(id=call.id, name=call.name, args=new_args, raw_args=raw_args))
    content = message.content
    if content is not None:
        parts = [text(part) if isinstance(part, str) else part for part in content]
        if parts != content:
            joined = "\n".join(part for part in parts if isinstance(part, str))
            return replace(message, text=joined, tool_calls=calls, content=parts)
    if new_text == message.text and all(new is old for new, old in zip(calls, message.tool_calls, strict=True)):
        return message
    return replace(message, text=new_text, tool_calls=calls)


_SEPARATOR = r"[ \-.\u00a0\u2007\u202f]"

_OPEN = re.compile(
    r"(?<![0-9])(?<![0-9]" + _SEPARATOR + r")[0-9](?:" + _SEPARATOR + r"?[0-9])*+" + _SEPARATOR + r"?\Z"
    r"|(?<![\w-])[\w-]*?(?i:" + _SECRET_WORDS + r")[\w-]*+(?:\\?[\"'])?\s*+"
    r"(?:[:=]\s*+(?:(?i:bearer|basic|token)(?:\s++|\Z))?(?:\"[^\"]*+|'[^']*+|[^\s,;}&]*+))?\Z"
    r"|(?i:bearer|basic)\s*+[A-Za-z0-9._~+/-]*+=*\Z"
)
"""A card number's digits, a secret's name (with its value so far), or a bearer token, reaching the end of the text."""

_PEM_END = re.compile(r"-----END [A-Z0-9 ]*-----")

_SPANNING = (PRIVATE_KEY, SECRET_ASSIGNMENT, BEARER, CARD_NUMBER)
"""The built-in patterns whose matches may hold spaces or line breaks."""


def open_match_start(text: str) -> int:
    """Where a built-in match may still be going on at the end of `text` (`len(text)`: nowhere).

    More text could extend or complete a match that starts there: the last
    word, a card number's digits, a secret's name and its value so far, a PEM
    block without its `END` line. The place is always the start of a word,
    and never inside a whole match, so `scrub(text[:i])` for this `i` hides
    what scrubbing the whole text, once it has all arrived, would hide there.
    """
    start = len(text)
    found = _OPEN.search(text)
    if found is not None:
        start = found.start()
    begin = text.rfind("-----BEGIN")
    if begin >= 0 and _PEM_END.search(text, begin) is None:
        start = min(start, begin)
    moved = True
    while moved:  # nor inside a word, nor inside a whole match that spans words (a quoted value, a PEM block)
        start = max(text.rfind(" ", 0, start), text.rfind("\n", 0, start), text.rfind("\t", 0, start)) + 1
        moved = False
        for pattern in _SPANNING:
            for match in pattern.finditer(text):
                if match.start() < start < match.end():
                    start, moved = match.start(), True
    return start


def phone_valid(candidate: str) -> bool:
    """True when `candidate` holds 7 to 15 digits, as phone numbers do (ITU E.164)."""
    return 7 <= sum(c.isdigit() for c in candidate) <= 15


def iban_valid(candidate: str) -> bool:
    """True when `candidate` (spaces allowed) passes the IBAN mod-97 checksum."""
    compact = candidate.replace(" ", "")
    if not 15 <= len(compact) <= 34:
        return False
    digits = "".join(str(int(c, 36)) for c in compact[4:] + compact[:4])
    return int(digits) % 97 == 1


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
