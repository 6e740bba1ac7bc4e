"""`python -m onion runs verify` and `runs export`: runs' journals checked against their chain, or written out.

Neither changes the store. `verify` checks each journal as `onion.audit.verify` does and exits 1 when one is not as
its workers wrote it, a line per such run naming its first bad entry; `export` writes one run's entries as JSON lines
(its decisions among them: who decided, when, what).
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from ._runs_cli import CheckFailed, Refused, label, printable
from .audit import verify
from .errors import RunNotFound
from .stores import Store


async def verify_runs(store: Store, run_id: str | None, keys: Sequence[bytes]) -> str:
    """One line when the journal of `run_id` (None: of every run) is intact; `CheckFailed` with a line per run that is
    not, naming its first bad entry, otherwise. `keys`: the agents' `state_key`s, to check each entry's HMAC."""
    if run_id is not None:
        if await store.run_record(run_id) is None:
            raise Refused(f"no run {run_id!r} in {label(store)}: `python -m onion runs` lists them")
        ids = [run_id]
    else:
        ids = [record.run_id for record in await store.runs(limit=2**31 - 1)]
    bad, checked, entries = [], 0, 0
    for each in ids:
        try:
            report = await verify(store, each, key=keys or None)
        except RunNotFound:  # deleted since it was listed
            continue
        checked += 1
        entries += report.entries
        if not report.ok:
            bad.append(printable(f"run {each}: {report.reason}"))
        elif run_id is not None:
            return printable(f"run {each} intact: {report.reason}")
    if bad:
        raise CheckFailed("\n".join(bad if run_id is not None else [*bad, f"{len(bad)} of {checked} runs not intact"]))
    if not checked:
        return printable(f"no runs in {label(store)}: nothing to verify")
    signed = "chained and signed" if keys else "chained (HMACs not checked: give --key-env NAME)"
    return printable(f"{checked} runs intact in {label(store)}: {entries} entries, {signed}")


async def export_run(store: Store, run_id: str) -> str:
    """The run's journal, one entry a line as JSON (the same values as stored; a character that is not printable is
    written as a JSON escape, so none reaches the terminal)."""
    if await store.run_record(run_id) is None:
        raise Refused(f"no run {run_id!r} in {label(store)}: `python -m onion runs` lists them")
    return "\n".join(map(json_line, await store.journal(run_id)))


def json_line(text: str) -> str:
    """`text`, JSON, with every character that is not printable written as its `\\u` escape: the same JSON value."""
    if text.isprintable():
        return text
    return "".join(char if char.isprintable() else _escape(ord(char)) for char in text)


def _escape(code: int) -> str:
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def keys_named(names: Sequence[str]) -> list[bytes]:
    """The keys in the environment variables `names` (`--key-env NAME`, once per key)."""
    keys = []
    for name in names:
        value = os.environ.get(name)
        if not value:
            raise Refused(
                f"--key-env {name}: the environment variable {name} is not set: set it to the agents' state_key"
            )
        keys.append(value.encode())
    return keys
