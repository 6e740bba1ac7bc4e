"""Which of a tool call's argument values were carried from untrusted content.

`contain` asks this of a call once untrusted content is in the run's history. The history is split in two
texts: trusted (system and user messages, results of trusted tools) and untrusted (messages marked
`Message.untrusted`). The model's own messages are in neither: what it wrote may repeat what it read.

Two pieces of a string argument are checked (numbers and booleans are not):

- its *marks*: tokens that name or address something (an e-mail address, a URL or domain, an account number,
  an id, a file name, a date: a token holding a digit or one of `@ / _ :`, or a dot between letters). A mark
  found in untrusted text and in no trusted text was *carried* from untrusted content. So was a mark of
  `SHORT` characters or fewer found in untrusted text at all (so short an id is found in trusted text by
  chance: `13` in "June 13"), and a date that untrusted text names in words ("from the 1st to the 5th of
  May") and trusted text does not. A mark found in no text (a date or an amount the model worked out) is
  not: nothing says where it came from.
- its runs of `RUN_WORDS` words: a run found in untrusted text and in no trusted text was copied from it
  (injected text written into a message body, whatever its wording).

Text is compared case-folded; marks as whole tokens (`13` is not found in `2013` or `13th`), runs as words
(punctuation and spacing between them ignored).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from onion import Message

RUN_WORDS = 5
"""Words in a run that counts as copied text."""

_TOKEN = re.compile(r"[^\s,;()\[\]{}<>\"'`|]+")
_WORD = re.compile(r"\w+")
_MARK_SIGNS = re.compile(r"[\d@/_:]|[^\W\d_]\.[^\W\d_]")
_EDGE = ".:!?-"
SHORT = 3
"""Marks this short count as carried whenever untrusted text holds them (see the module docstring)."""
_ISO_DATE = re.compile(r"(?P<year>\d{4})-(?P<month>\d{2})-(?P<day>\d{2})")
_MONTHS = (
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
)


@dataclass(frozen=True, slots=True)
class Finding:
    """A piece of an argument carried from untrusted content: the mark or run (`piece`), the path of the argument
    holding it, and the index of the first untrusted message holding it (`source`)."""

    piece: str
    argument: str
    source: int | None


class Texts:
    """A history's trusted and untrusted texts, case-folded; their words made when first needed."""

    __slots__ = ("_trusted_words", "_untrusted_words", "trusted", "untrusted", "untrusted_parts")

    def __init__(self, messages: Sequence[Message], vouched: Sequence[str] = ()) -> None:
        trusted: list[str] = list(vouched)
        self.untrusted_parts: list[tuple[int, str]] = []
        for index, message in enumerate(messages):
            if message.role == "assistant" or not message.text:
                continue
            if message.untrusted:
                self.untrusted_parts.append((index, message.text.casefold()))
            else:
                trusted.append(message.text.casefold())
        self.trusted = "\n".join(trusted)
        self.untrusted = "\n".join(text for _, text in self.untrusted_parts)
        self._trusted_words: str | None = None
        self._untrusted_words: str | None = None

    def finding(self, args: dict[str, Any]) -> Finding | None:
        """The first piece of `args` carried from untrusted content (see the module docstring), else None."""
        for argument, value in leaves(args, ""):
            value = value.casefold()
            for mark in marks(value):
                if _has_mark(self.untrusted, mark):
                    if len(mark) <= SHORT or not _has_mark(self.trusted, mark):
                        return Finding(mark, argument, self._source(mark, _has_mark))
                    continue
                spoken = _spoken_date(mark)
                if spoken is not None and spoken.search(self.untrusted) and not spoken.search(self.trusted):
                    return Finding(mark, argument, self._source(spoken, _has_pattern))
            words = _WORD.findall(value)
            for start in range(len(words) - RUN_WORDS + 1):
                run = f" {' '.join(words[start : start + RUN_WORDS])} "
                if run in self.untrusted_words and run not in self.trusted_words:
                    return Finding(run.strip(), argument, self._source(run, _has_run))
        return None

    @property
    def trusted_words(self) -> str:
        """The trusted text as its words, each between single spaces (made once)."""
        if self._trusted_words is None:
            self._trusted_words = _words(self.trusted)
        return self._trusted_words

    @property
    def untrusted_words(self) -> str:
        """The untrusted text as its words, each between single spaces (made once)."""
        if self._untrusted_words is None:
            self._untrusted_words = _words(self.untrusted)
        return self._untrusted_words

    def _source(self, piece: Any, found: Callable[[str, Any], bool]) -> int | None:
        """The index of the first untrusted message in which `found(text, piece)` finds `piece`."""
        return next((index for index, text in self.untrusted_parts if found(text, piece)), None)


def leaves(value: Any, path: str) -> Iterator[tuple[str, str]]:
    """The strings in `value` (nested dicts and lists too), each with its path: `to`, `items[0].name`."""
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from leaves(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list | tuple):
        for number, item in enumerate(value):
            yield from leaves(item, f"{path}[{number}]")


def marks(text: str) -> list[str]:
    """The tokens of `text` that name or address something (see the module docstring)."""
    found = []
    for token in _TOKEN.findall(text):
        token = token.strip(_EDGE)
        if len(token) >= 2 and _MARK_SIGNS.search(token):
            found.append(token)
    return found


def _has_mark(text: str, mark: str) -> bool:
    """Whether `mark` stands in `text` as a whole token (not inside a longer word or number)."""
    start = text.find(mark)
    while start >= 0:
        end = start + len(mark)
        before = text[start - 1] if start else " "
        after = text[end] if end < len(text) else " "
        if not (before.isalnum() or before in "_@") and not (after.isalnum() or after in "_@"):
            return True
        start = text.find(mark, start + 1)
    return False


def _spoken_date(mark: str) -> re.Pattern[str] | None:
    """For an ISO date (`2024-05-01`, maybe with a time after it), the ways text says that day in words: `1st of
    May`, `May 1`, `1 may 2024`; None for any other mark."""
    found = _ISO_DATE.match(mark)
    if found is None or not 1 <= int(found["month"]) <= 12:
        return None
    day = str(int(found["day"]))
    month = _MONTHS[int(found["month"]) - 1]
    name = f"(?:{month}|{month[:3]}\\.?)"
    ordinal = f"(?<!\\d){day}(?:st|nd|rd|th)?(?!\\d)"
    return re.compile(f"{ordinal}(?:\\W+\\w+){{0,4}}?\\W+{name}\\b|\\b{name}\\W+{ordinal}")


def _has_pattern(text: str, pattern: re.Pattern[str]) -> bool:
    return pattern.search(text) is not None


def _has_run(text: str, run: str) -> bool:
    return run in _words(text)


def _words(text: str) -> str:
    """`text` as its words, each between single spaces."""
    return f" {' '.join(_WORD.findall(text))} "
