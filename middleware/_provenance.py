"""Which of a tool call's argument values were carried from untrusted content.

`contain` asks this of a call once untrusted content is in the run's history. The history is split in two:
trusted (system and user messages, results of trusted tools) and untrusted (messages marked
`Message.untrusted`). The model's own messages are in neither: what it wrote may repeat what it read.

Two pieces of a string argument are checked (numbers and booleans are not):

- its *marks*: tokens that name or address something (an e-mail address, a URL or domain, an account number,
  an id, a file name, a date: a token holding a digit or one of `@ / _ :`, or a dot between letters). A mark
  found in untrusted text and in no trusted text was *carried* from untrusted content. So was a mark of
  `SHORT` characters or fewer found in text written outside (not in a served answer), unless trusted text
  holds it next to the same word as the argument does (so short an id is found in trusted text by chance:
  `13` in "June 13" accounts for "June 13", not for a file id `13`), and a date that untrusted text names in
  words ("from the 1st to the 5th of May") and trusted text does not. A mark found in no text (a date or an
  amount the model worked out) is not, unless its domain is (`eve@evil.example` made up from "write to eve at
  evil.example": the domain `evil.example` was carried).
- its runs of `RUN_WORDS` words: a run found in untrusted text and in no trusted text was copied from it
  (injected text written into a message body, whatever its wording).

One carried mark is the user's, asked `finding(..., delegated=True)` (`contain` asks so for a call its plan
names): a *delegated* value. The user named the source: the untrusted answer holding the mark is the result of
a call whose arguments hold an address the user's own message wrote (a mark, exactly), no mark the user did not
write, and nothing the user's words do not hold (`get_webpage("www.dora-website.com")` after "find her e-mail on
her website: www.dora-website.com"; a search for "Dora" names no source). And the value belongs to what the user
named there: the mark holds a name that the user's message wrote, capitalised, not first in a sentence and not
a day or a month, and that the call's arguments hold too (`dora@gmail.com` after "Invite Dora"). Such a finding
comes back with `delegated` set, and only when nothing else in the arguments is carried.

Text is compared case-folded; marks as whole tokens (`13` is not found in `2013` or `13th`), runs as words
(punctuation and spacing between them ignored).

Each message is read once, when `Provenance.update` first sees it (case-folded, as its words, the days it names
in words): a call's check is then a few substring searches per argument (`str.find`, in C).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from onion import Message

RUN_WORDS = 5
"""Words in a run that counts as copied text."""
SHORT = 3
"""Marks this short count as carried whenever untrusted text holds them (see the module docstring)."""

_CANDIDATE = re.compile(r"(?<![^\s,;()\[\]{}<>\"'`|])[^\s,;()\[\]{}<>\"'`|]*[\d@/_:.][^\s,;()\[\]{}<>\"'`|]*")
"""Tokens (runs of characters other than spaces and `,;()[]{}<>"'`|`) holding a digit, one of `@ / _ :` or a dot:
the only ones a mark can be."""
_WORD = re.compile(r"\w+")
_NAME = re.compile(r"(?<!\w)[^\W\d_][^\W\d_]{2,}(?!\w)")
"""A word of three letters or more (a name when it is capitalised)."""
_NOT_WORD = re.compile(r"\W+")
_ASCII_WORDS = {code: " " for code in range(128) if not (chr(code).isalnum() or chr(code) == "_")}
"""`str.translate` table: what `\\W` matches in ASCII, as spaces (an ASCII text's words without a regex)."""
_MARK_SIGNS = re.compile(r"[\d@/_:]|[^\W\d_]\.[^\W\d_]")
_EDGE = ".:!?-"
_DOMAIN_PART = re.compile(
    r"(?<=[@/])[^@/:?#\s]*[^\W_]\.[^\W\d_][^@/:?#\s]*|^[^@/:?#\s]*[^\W_]\.[^\W\d_][^@/:?#\s]*(?=[/:])"
)
"""The domain of an address or a URL (after `@` or `//`, or a host before its path)."""
_ISO_DATE = re.compile(r"(?P<year>\d{4})-(?P<month>\d{2})-(?P<day>\d{2})")
_ORDINAL = re.compile(r"(\d{1,2})(?:st|nd|rd|th)?")
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
_MONTH = {name: number for number, month in enumerate(_MONTHS, 1) for name in (month, month[:3])}
_CALENDAR = {*_MONTHS, "monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"}
"""Capitalised words that are no one's name."""

Day = tuple[int, int]
"""(day, month): a day a text names in words."""


@dataclass(frozen=True, slots=True)
class Finding:
    """A piece of an argument carried from untrusted content: the mark or run (`piece`), the path of the argument
    holding it, and the index of the first untrusted message holding it (`source`)."""

    piece: str
    argument: str
    source: int | None
    delegated: bool = False
    """The mark is a value the user sent the agent to fetch (see the module docstring): the user's, not the source's."""


class Provenance:
    """One history's texts, trusted and untrusted, kept up to date with `update` as messages arrive: each message
    is read once (case-folded, as its words, the days it names in words); a call's check then searches them."""

    __slots__ = (
        "_asked",
        "_days_read",
        "_first",
        "_joined",
        "_last",
        "_names",
        "_parts",
        "_seen",
        "_user_marks",
        "_user_read",
        "_user_texts",
        "_user_words",
        "_vouched",
        "first_untrusted",
        "trusted_days",
        "untrusted_days",
    )

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self._seen = 0
        self._first: Message | None = None
        self._last: Message | None = None
        self._vouched = 0
        self.first_untrusted: int | None = None
        """The index of the first untrusted message; None while there is none."""
        self.trusted_days: set[Day] = set()
        self.untrusted_days: dict[Day, int] = {}
        self._days_read = (0, 0)
        self._parts: tuple[list[tuple[str, str]], list[tuple[int, str, str, bool, list[str]]]] = ([], [])
        """Each trusted text (case-folded, as words); each untrusted one, with its message's index, whether it was
        served (a trusted tool's answer to a call untrusted content drove) rather than written outside, and the
        arguments of the call that read it, as text (`_scalars`)."""
        self._asked: dict[str, dict[str, Any]] = {}
        """Each tool call's arguments, by call id."""
        self._user_texts: list[str] = []
        """The texts of the user's messages; read into the three below only when a mark may be delegated
        (`_fetched`)."""
        self._user_read = 0
        self._user_words = " "
        """The words of those texts, case-folded, each between single spaces (and a NUL between two texts)."""
        self._user_marks: set[str] = set()
        """The marks those texts hold, case-folded."""
        self._names: set[str] = set()
        """The names those texts write (capitalised words, not first in a sentence), case-folded."""
        self._joined: tuple[str, str, str, str, str] | None = None

    def update(self, messages: Sequence[Message], vouched: Sequence[str] = (), served: Collection[str] = ()) -> None:
        """Read what is new in `messages` (all of it again when the history was replaced) and in `vouched` (pieces a
        person approved: trusted); `served` names the tool calls whose untrusted answers were served, not written
        outside. Until the history holds untrusted content nothing is read but the flags."""
        seen = self._seen
        if seen > len(messages) or (seen and (messages[seen - 1] is not self._last or messages[0] is not self._first)):
            self._reset()
            seen = 0
        if self.first_untrusted is None:
            first = next((i for i in range(seen, len(messages)) if messages[i].untrusted), None)
            self._seen, self._last = len(messages), messages[-1] if messages else None
            self._first = messages[0] if messages else None
            if first is None:
                return
            self.first_untrusted = first
            seen = 0
        for index in range(seen, len(messages)):
            message = messages[index]
            if message.role == "assistant":
                ids = [request.id for request in message.tool_calls]
                for request in message.tool_calls:  # an id used twice in one turn reads as no source
                    self._asked[request.id] = request.args if ids.count(request.id) == 1 else {}
            elif message.text:
                if message.role == "user" and not message.untrusted:
                    self._user_texts.append(message.text)
                was_served = message.untrusted and message.tool_call_id in served
                asked = self._asked.get(message.tool_call_id) if isinstance(message.tool_call_id, str) else None
                reading = _scalars(asked) if message.untrusted and asked else []
                self._add(message.text.casefold(), index if message.untrusted else None, was_served, reading)
        self._seen, self._last = len(messages), messages[-1] if messages else None
        for piece in vouched[self._vouched :]:
            self._add(piece.casefold(), None)
        self._vouched = len(vouched)

    def _add(self, text: str, index: int | None, served: bool = False, reading: Sequence[str] = ()) -> None:
        """Read one text: trusted (`index` None) or the untrusted message at `index` (`served`, or written outside;
        `reading`: the arguments of the call that read it, as text)."""
        words = _ascii_words(text) if text.isascii() else _words(text)
        self._joined = None
        if index is None:
            self._parts[0].append((text, words))
        else:
            self._parts[1].append((index, text, words, served, list(reading)))

    def _read_user(self) -> None:
        """Read the user's texts not read yet: their words, their marks and the names they write."""
        for text in self._user_texts[self._user_read :]:
            folded = text.casefold()
            self._user_words += _words(folded) + "\0"  # no run of words across two messages
            self._user_marks.update(marks(folded))
            prose = _CANDIDATE.sub(lambda found: " " if marks(found[0].casefold()) else found[0], text)
            for found in _NAME.finditer(prose):
                before = prose[: found.start()].rstrip()
                name = found[0].casefold()
                if found[0][0].isupper() and before and before[-1] not in ".!?" and name not in _CALENDAR:
                    self._names.add(name)
        self._user_read = len(self._user_texts)

    def _named(self, reading: list[str]) -> set[str]:
        """The names the user gave the source a call with arguments `reading` read: none unless one of them is an
        address (a mark) the user wrote, each mark in them is one the user wrote, and the user's words hold each of
        them; else the user's names among their words."""
        found = [mark for value in reading for mark in marks(value.casefold())]
        if not found or any(mark not in self._user_marks for mark in found):
            return set()
        if any(_words(value.casefold()) not in self._user_words for value in reading):
            return set()
        return {word for value in reading for word in _WORD.findall(value.casefold()) if word in self._names}

    def _days(self) -> tuple[set[Day], dict[Day, int]]:
        """The days the trusted texts name in words, and those the untrusted ones do (with the first message naming
        each): read from the texts the first time an argument holds a date, then from each new text."""
        trusted, untrusted = self._parts
        read_trusted, read_untrusted = self._days_read
        for text, _ in trusted[read_trusted:]:
            self.trusted_days.update(days(_WORD.findall(text)))
        for index, text, _, _, _ in untrusted[read_untrusted:]:
            for day in days(_WORD.findall(text)):
                self.untrusted_days.setdefault(day, index)
        self._days_read = len(trusted), len(untrusted)
        return self.trusted_days, self.untrusted_days

    def finding(self, args: dict[str, Any], *, delegated: bool = False) -> Finding | None:
        """The first piece of `args` carried from untrusted content (see the module docstring), else None; with
        `delegated`, a mark the user sent the agent to fetch comes back (`Finding.delegated`) only when no other piece
        is carried."""
        trusted, trusted_words, untrusted, untrusted_words, written = self._joined or self._join()
        fetched: Finding | None = None
        for argument, value in leaves(args, ""):
            value = value.casefold()
            for mark in marks(value):
                if _has_mark(untrusted, mark):
                    if not _has_mark(trusted, mark) or (
                        len(mark) <= SHORT and _has_mark(written, mark) and not _said_with(mark, value, trusted_words)
                    ):
                        source = self._source(mark, in_words=False)
                        if not (delegated and self._fetched(mark)):
                            return Finding(mark, argument, source)
                        fetched = fetched or Finding(mark, argument, source, delegated=True)
                    continue
                if not _has_mark(trusted, mark):  # made up: its domain may still be the untrusted text's
                    for part in _DOMAIN_PART.findall(mark):
                        if _has_mark(untrusted, part) and not _has_mark(trusted, part):
                            return Finding(part, argument, self._source(part, in_words=False))
                day = _spoken_day(mark)
                if day is not None:
                    trusted_days, untrusted_days = self._days()
                    if day in untrusted_days and day not in trusted_days:
                        return Finding(mark, argument, untrusted_days[day])
            words = _WORD.findall(value)
            for start in range(len(words) - RUN_WORDS + 1):
                run = f" {' '.join(words[start : start + RUN_WORDS])} "
                if run in untrusted_words and run not in trusted_words:
                    return Finding(run.strip(), argument, self._source(run, in_words=True))
        return fetched

    def _fetched(self, mark: str) -> bool:
        """Whether `mark` is a value the user sent the agent to fetch: an untrusted answer from a source the user
        named holds it, and it holds one of the names the user gave that source."""
        self._read_user()
        words = set(_WORD.findall(mark))
        return any(_has_mark(text, mark) and self._named(reading) & words for _, text, _, _, reading in self._parts[1])

    def _join(self) -> tuple[str, str, str, str, str]:
        """The trusted texts, their words, the untrusted texts, their words, the untrusted texts written outside: each
        as one string (made again only after a new message)."""
        trusted, untrusted = self._parts
        self._joined = (
            "\n".join(text for text, _ in trusted),
            "".join(words for _, words in trusted),
            "\n".join(text for _, text, _, _, _ in untrusted),
            "".join(words for _, _, words, _, _ in untrusted),
            "\n".join(text for _, text, _, served, _ in untrusted if not served),
        )
        return self._joined

    def _source(self, piece: str, *, in_words: bool) -> int | None:
        """The index of the first untrusted message holding `piece`: a mark in its text, or a run in its words."""
        for index, text, words, _, _ in self._parts[1]:
            if (piece in words) if in_words else _has_mark(text, piece):
                return index
        return None


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


def _scalars(value: Any) -> list[str]:
    """The strings, numbers and booleans in `value` (nested dicts and lists too), as text."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, bool | int | float):
        return [str(value).casefold()]
    if isinstance(value, dict):
        return [text for item in value.values() for text in _scalars(item)]
    if isinstance(value, list | tuple):
        return [text for item in value for text in _scalars(item)]
    return []


def marks(text: str) -> list[str]:
    """The tokens of `text` that name or address something (see the module docstring)."""
    found = []
    for token in _CANDIDATE.findall(text):
        token = token.strip(_EDGE)
        if len(token) >= 2 and _MARK_SIGNS.search(token):
            found.append(token)
    return found


def _said_with(mark: str, value: str, trusted_words: str) -> bool:
    """Whether trusted text holds the short `mark` next to the same word as `value` does (the user's "january 1st"
    accounts for an argument's "January 1st", not for a bare `1st` or `13`)."""
    words = _WORD.findall(value)
    for at, word in enumerate(words):
        if word != mark:
            continue
        if at and f" {words[at - 1]} {word} " in trusted_words:
            return True
        if at + 1 < len(words) and f" {word} {words[at + 1]} " in trusted_words:
            return True
    return False


def _ascii_words(text: str) -> str:
    """`_words` for an ASCII text, without a regular expression (`str.translate`, then spaces run together)."""
    spaced = text.translate(_ASCII_WORDS)
    while "  " in spaced:
        spaced = spaced.replace("  ", " ")
    return f" {spaced.strip()} "


def _words(text: str) -> str:
    """`text` as its words, each between single spaces."""
    return f" {_NOT_WORD.sub(' ', text).strip()} "


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


def days(words: list[str]) -> Iterator[Day]:
    """The days `words` name: `1st of may`, `may 1`, `1 may 2024` (a day up to five words before its month, or
    just after it)."""
    for at, word in enumerate(words):
        month = _MONTH.get(word)
        if month is None:
            continue
        for near in (*words[max(0, at - 5) : at], *words[at + 1 : at + 2]):
            found = _ORDINAL.fullmatch(near)
            if found is not None and 1 <= int(found[1]) <= 31:
                yield int(found[1]), month


def _spoken_day(mark: str) -> Day | None:
    """For an ISO date (`2024-05-01`, maybe with a time after it), the day it names; None for any other mark."""
    found = _ISO_DATE.match(mark)
    if found is None or not 1 <= int(found["month"]) <= 12:
        return None
    return int(found["day"]), int(found["month"])
