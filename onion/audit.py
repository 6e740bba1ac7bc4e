"""`onion.audit`: check that a run's journal is as its workers wrote it, nothing altered, removed or inserted.

With a store, each journal entry carries the SHA-256 of the entry before it (the first, of the run's id),
its index, and, when the agent has a `state_key`, an HMAC with that key (`docs/security.md`, "Audit").
`verify` reads the journal back from the store and checks every link; it needs nothing else.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ._durable.chain import check
from .errors import RunNotFound

if TYPE_CHECKING:
    from .stores import RunStore

__all__ = ["AuditReport", "verify"]


@dataclass(frozen=True, slots=True)
class AuditReport:
    """What `verify` found in one run's journal."""

    ok: bool
    """Every entry is as it was written, in its place, none removed or inserted."""
    entries: int
    """How many entries the journal holds."""
    first_bad: int | None
    """The index of the first entry altered, removed (the index it had) or inserted, or the first the check can no
    longer vouch for; `entries` when the entries after the last were removed; None when `ok`."""
    reason: str
    """What is wrong, naming the entry (when `ok`: what was checked)."""


async def verify(
    store: RunStore, run_id: str, *, key: bytes | str | Sequence[bytes | str] | None = None
) -> AuditReport:
    """Check run `run_id`'s journal in `store`: the chain of its entries, and with `key` (the agent's `state_key`;
    a list while keys are rolled, each believed) each entry's HMAC.

    Without a key, an entry rewritten together with every digest after it cannot be told (anyone can compute a
    SHA-256), nor the last entry of a run still running altered; with one, only who holds the key can.
    Raises `RunNotFound` for a run the store does not hold. A journal written before entries were chained is
    reported not ok (its `reason` says so).
    """
    record = await store.run_record(run_id)
    if record is None:
        raise RunNotFound(f"no run {run_id!r} in the store (never journaled here, or deleted)")
    entries = await store.journal(run_id)
    first_bad, reason = check(run_id, entries, _keys(key), record.status)
    return AuditReport(first_bad is None, len(entries), first_bad, reason)


def _keys(key: bytes | str | Sequence[bytes | str] | None) -> tuple[bytes, ...]:
    if key is None:
        return ()
    given = [key] if isinstance(key, str | bytes) else list(key)
    keys = tuple(item.encode() if isinstance(item, str) else item for item in given)
    if not keys or not all(isinstance(item, bytes) and item for item in keys):
        raise ValueError("key: give the state_key the runs were written with (str or bytes, not empty), or a list")
    return keys
