"""The journal's chain: each entry names the one before it, so an entry altered, removed or inserted shows.

As the journal hands entries to its store, each gets fields in front of its own:

- `"p"`: the SHA-256 (hex) of the previous entry's whole text as stored; the first entry's, of
  `onion journal` and the run's id (`origin`), so a journal (or an entry) of another run does not fit;
- `"n"`: the entry's index in the journal (the start entry's is 0);
- `"m"`: with a key (the agent's `state_key`), on the last entry of each write, the HMAC-SHA256 (hex) of
  its text without `"m"`. Through `"p"` it vouches for every entry before it too, so one per write (not one
  per entry) is enough: whoever rewrites an entry without the key, recomputing every `"p"` after it, is
  caught at the next `"m"`, naming that write.

The text is `{"p":"<64 hex>","n":<index>,"m":"<64 hex>",` and the entry's own fields. The fields are
written in that order and read back by position (`check`); no entry is decoded or encoded again.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
import re
from collections.abc import Sequence
from typing import NamedTuple

_sha256 = hashlib.sha256


def origin(run_id: str) -> str:
    """What the first entry of run `run_id` names as the entry before it."""
    return _sha256(b"onion journal\n" + _utf8(run_id)).hexdigest()


def digest(text: str) -> str:
    """The SHA-256 (hex) of an entry's text, as the entry after it names it."""
    return _sha256(_utf8(text)).hexdigest()


class Chain:
    """Where a run's journal stands: the entry its next entry follows (`last`, its text: hashed when an entry
    follows it, so a run's end costs no digest) and the next entry's index (`count`).

    `known` is False once a write failed (it may or may not have landed): `follow` what the store holds before
    sealing more.
    """

    __slots__ = ("_pads", "count", "known", "last", "run_id")

    def __init__(self, run_id: str, key: bytes | None) -> None:
        self.run_id = run_id
        self.last: str | None = None
        """None: no entry yet (the first follows the run's `origin`)."""
        self.count = 0
        self.known = True
        self._pads = None if key is None else _pads(key)

    def follow(self, entries: Sequence[str]) -> None:
        """Go on after `entries`, the run's journal as its store holds it (a run resumed or recovered)."""
        self.last = entries[-1] if entries else None
        self.count = len(entries)
        self.known = True

    def seal(self, entries: Sequence[str]) -> list[str]:
        """`entries` (JSON objects' text), one write's, with their chain fields, as they go to the store in this
        order; with a key, the last one signed."""
        assert self.known, "the chain does not know the store's last entry: follow the store's entries first"
        count, pads, text = self.count, self._pads, self.last
        signs = count + len(entries) - 1
        sealed = []
        for own in entries:
            if text is None:
                head = origin(self.run_id)
            else:  # what digest(text) is, inline: one SHA-256 per entry is the chain's whole cost
                try:
                    head = _sha256(text.encode()).hexdigest()
                except UnicodeEncodeError:
                    head = digest(text)
            fields = f'{{"p":"{head}","n":{count},'
            text = fields + own[1:]
            if pads is not None and count == signs:  # HMAC (RFC 2104) of the text so far, from the key's pads
                inner, outer = pads[0].copy(), pads[1].copy()
                inner.update(_utf8(text))
                outer.update(inner.digest())
                text = f'{fields}"m":"{outer.hexdigest()}",{own[1:]}'
            sealed.append(text)
            count += 1
        self.last, self.count = text, count
        return sealed


def _utf8(text: str) -> bytes:
    """`text` as UTF-8, a lone surrogate (which JSON text may hold) kept as its bytes."""
    try:
        return text.encode()
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass")


_IPAD = bytes(byte ^ 0x36 for byte in range(256))
_OPAD = bytes(byte ^ 0x5C for byte in range(256))


@functools.lru_cache(maxsize=16)
def _pads(key: bytes) -> tuple[hashlib._Hash, hashlib._Hash]:
    """SHA-256 begun on the key's inner and outer pads: an HMAC with `key` is their copies, updated."""
    block = (_sha256(key).digest() if len(key) > 64 else key).ljust(64, b"\0")
    return _sha256(block.translate(_IPAD)), _sha256(block.translate(_OPAD))


class _Link(NamedTuple):
    before: str
    """`"p"`: the digest of the entry before it."""
    place: int
    """`"n"`: the index it was written at."""
    mac: str | None
    """`"m"`, if the entry has one."""
    signed: str
    """The text the HMAC is of (the entry without `"m"`)."""


_FIELDS = re.compile(r'\{"p":"([0-9a-f]{64})","n":(0|[1-9][0-9]*),(?:"m":"([0-9a-f]{64})",)?')


def _link(text: str) -> _Link | None:
    found = _FIELDS.match(text)
    if found is None:
        return None
    signed = text if found[3] is None else text[: found.end(2) + 1] + text[found.end() :]
    return _Link(found[1], int(found[2]), found[3], signed)


def _entries(count: int) -> str:
    return "1 entry" if count == 1 else f"{count} entries"


def check(run_id: str, entries: Sequence[str], keys: Sequence[bytes], status: str | None) -> tuple[int | None, str]:
    """`(first_bad, reason)` for run `run_id`'s journal `entries`, its record saying `status`: the index of the
    first entry altered, removed or inserted (`len(entries)` when entries after the last were removed), or None
    when every entry is in place; `reason` says what is wrong (or what was checked).

    With `keys`, each HMAC must be of one of them (keys being rolled: the new one and the old), and the last
    entry must carry one."""
    if not entries:
        return 0, "the journal has no entries: entry 0 onwards were removed"
    links = [_link(text) for text in entries]
    if links[0] is None and entries[0].startswith('{"k":"start"'):
        return 0, (
            'entry 0 carries no chain fields ("p", "n"): the journal predates the chain (it was written before '
            "onion chained journals), so it cannot be verified"
        )
    mac = [hmac.new(key, digestmod=_sha256) for key in keys] or None
    if mac is not None:
        found = _macs(links, mac)
        if found is not None:
            return found
    head = origin(run_id)
    vouched = 0  # the entries before it are as signed (an HMAC matched)
    for index, link in enumerate(links):
        if link is None:
            return index, f"entry {index} carries no chain fields: it was inserted, or rewritten without them"
        if link.before != head or link.place != index:
            return _misplaced(entries, links, index, head, signed=mac is not None and vouched == index)
        if mac is not None and link.mac is not None:
            if not _signed(mac, link):
                return vouched, _forged(vouched, index)
            vouched = index + 1
        head = digest(entries[index])
    removed = _removed_end(entries, status)
    if removed is not None:
        return removed
    if mac is not None and vouched < len(entries):
        last = len(entries) - 1
        which = f"entry {last}" if vouched == last else f"entries {vouched} to {last}"
        return vouched, (
            f"entry {last}, the journal's last, carries no HMAC (the last entry of each write does): {which} "
            "were inserted, or altered"
        )
    return None, _intact(len(entries), status, signed=mac is not None)


def _forged(first: int, signed: int) -> str:
    """Why the HMAC of entry `signed` does not match, the entries it vouches for since the last that did starting
    at `first`."""
    if first == signed:
        return f"entry {signed}'s HMAC does not match its text: it was altered, or signed with a key not given"
    return (
        f"entry {signed}'s HMAC does not match: one of entries {first} to {signed} (written together) was altered, "
        "or they were signed with a key not given"
    )


def _macs(links: list[_Link | None], mac: list[hmac.HMAC]) -> tuple[int, str] | None:
    """What is wrong with the journal's HMACs as a whole: none (a run written without a key), or none that this key
    matches (another key); None when some match."""
    if all(link is not None and link.mac is None for link in links):
        return 0, (
            "entry 0 carries no HMAC, nor does any other: the run was written by an agent without a state_key "
            "(verify it without a key), or every HMAC was removed"
        )
    if not any(link is not None and _signed(mac, link) for link in links):
        return 0, (
            "entry 0's HMAC does not match the key, nor does any other's: it is not the state_key the run was "
            "written with"
        )
    return None


def _signed(mac: list[hmac.HMAC], link: _Link) -> bool:
    """The entry's HMAC is of one of the keys."""
    if link.mac is None:
        return False
    text = _utf8(link.signed)
    for base in mac:
        signer = base.copy()
        signer.update(text)
        if hmac.compare_digest(signer.hexdigest(), link.mac):
            return True
    return False


def _misplaced(
    entries: Sequence[str],
    links: list[_Link | None],
    index: int,
    head: str,
    *,
    signed: bool,
) -> tuple[int, str]:
    """Entry `index` does not follow the entries before it (`head`): which entry is out of place, and how, told from
    the entry after it (that one names the entry before it too)."""
    link = links[index]
    assert link is not None
    after = links[index + 1] if index + 1 < len(links) else None
    previous = "the run's start" if index == 0 else f"entry {index - 1}"
    if after is not None and after.before == head and after.place == index:
        return index, f"entry {index} was inserted: entry {index + 1} follows {previous}"
    if link.place > index:
        gone = link.place - index
        were = "was" if gone == 1 else "were"
        return index, f"{_entries(gone)} before entry {index} {were} removed (it was written as entry {link.place})"
    if link.place < index:
        return index, f"entry {index} was written as entry {link.place}: it was inserted (a copy), or moved"
    if index == 0:
        return 0, "entry 0 is not this run's first entry: it is another run's (journals or entries swapped)"
    prior = index - 1
    if signed:  # the entry before it is as signed (its HMAC matched): this one is out of place
        return index, f"entry {index} does not follow entry {prior}: it was replaced (another run's entry, say)"
    if after is not None and after.before == digest(entries[index]):  # it is in its place: the one before is not
        return prior, f"entry {prior} was altered: entry {index} names another text for it"
    if after is None:  # nothing vouches for either: the first that may be altered is named
        return prior, f"entry {index} does not follow entry {prior}: one of them was altered or replaced"
    return prior, (
        f"entry {index} fits neither entry {prior} nor entry {index + 1}: it was replaced (another run's entry, "
        f"say), or entries {prior} and {index} were both altered"
    )


def _removed_end(entries: Sequence[str], status: str | None) -> tuple[int, str] | None:
    """A run that ended (paused, completed, failed) ends its journal with its end entry: else its last entries were
    removed. (A running run's end is yet to be written.)"""
    if status is None or status == "running":
        return None
    try:
        last = json.loads(entries[-1])
    except ValueError:
        last = None
    if not isinstance(last, dict):
        last = {}
    if last.get("k") == "end" and last.get("status") == status:
        return None
    count = len(entries)
    ends = f"where it was {last['status']}" if last.get("k") == "end" else "without its end"
    return (
        count,
        f"the run is {status} but its journal ends {ends} (entry {count - 1}): entry {count} onwards were removed",
    )


def _intact(count: int, status: str | None, *, signed: bool) -> str:
    """What was checked of an intact journal of `count` entries."""
    checked = "chained and signed" if signed else "chained (HMACs not checked: no key)"
    if status is None or status == "running":
        unchecked = "entries removed from its end" if signed else "its last entry altered, or entries removed after it,"
        return f"{_entries(count)}, {checked}; the run is running, so {unchecked} cannot be told yet"
    return f"{_entries(count)}, {checked}"
