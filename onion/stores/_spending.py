"""Spending counters for `middleware.budget`: the protocol, the arithmetic every store shares, the in-process store.

A key's spending is a cost (USD) and a token count. With a rolling window
the additions are kept in `BUCKETS` buckets of a hundredth of the window
each, so a total forgets what left the window (a bucket leaves once all of
it is older than the window: what was spent counts up to a hundredth of the
window longer, never shorter).
"""

from __future__ import annotations

import json
import math
import threading
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    import sqlite3

BUCKETS = 100
"""How many buckets a rolling window is counted in."""


@runtime_checkable
class SpendStore(Protocol):
    """The spending of `middleware.budget(per=..., store=...)`, shared by every worker using the store.

    `spend` adds `cost` and `tokens` to `key`'s spending and returns its totals after the addition (zero and
    zero only reads them): one round trip, atomic, so workers adding at once never lose an addition. `now` is
    the caller's time (seconds since the epoch). `window`: only what was added within the last `window` seconds
    counts (`BUCKETS`). `ttl`: the key may be forgotten `ttl` seconds after its last addition (a day's key,
    named by its date, once the day is over). One store may serve several threads and event loops at once.

    A store that counts in this process may also have `spend_now(key, cost, tokens, now, window, ttl)`, the same
    answered at once: `budget` calls it instead, with no coroutine per call (`MemorySpendStore` has it).
    """

    async def spend(
        self, key: str, cost: float, tokens: int, *, now: float, window: float | None = None, ttl: float | None = None
    ) -> tuple[float, int]: ...


@dataclass(slots=True)
class Spent:
    """One key's spending: its totals, and for a rolling window what each bucket added (`[start, cost, tokens]`,
    oldest first)."""

    cost: float = 0.0
    tokens: float = 0.0
    buckets: deque[list[float]] = field(default_factory=deque)
    expires: float = math.inf

    def add(self, cost: float, tokens: float, now: float, window: float | None, ttl: float | None) -> bool:
        """Add to the totals, forgetting the buckets that left `window`; whether anything changed."""
        changed = bool(cost or tokens)
        if window is not None:
            step = window / BUCKETS
            buckets = self.buckets
            while buckets and buckets[0][0] + step <= now - window:
                _, gone_cost, gone_tokens = buckets.popleft()
                self.cost -= gone_cost
                self.tokens -= gone_tokens
                changed = True
            if not buckets:  # no drift from subtracting floats: an empty window spent nothing
                self.cost = self.tokens = 0.0
            if cost or tokens:
                start = math.floor(now / step) * step
                if buckets and buckets[-1][0] >= start:  # this bucket's (or a clock that stepped back)
                    buckets[-1][1] += cost
                    buckets[-1][2] += tokens
                else:
                    buckets.append([start, cost, tokens])
            ttl = window + step
        self.cost += cost
        self.tokens += tokens
        if changed and ttl is not None:
            self.expires = now + ttl
        return changed

    def totals(self) -> tuple[float, int]:
        cost, tokens = self.cost, self.tokens
        return (cost if cost > 0.0 else 0.0), (int(tokens) if tokens > 0 else 0)


class MemorySpendStore:
    """Spending counters in this process (`SpendStore`), one per key, under one lock (any thread, any loop).

    Keys whose `ttl` ran out are dropped now and then, so a key per tenant and day does not pile up.
    """

    def __init__(self) -> None:
        self._spent: dict[str, Spent] = {}
        self._spent_lock = threading.Lock()
        self._spent_sweep_at = 1024  # keys held; each sweep doubles what is left

    async def spend(
        self, key: str, cost: float, tokens: int, *, now: float, window: float | None = None, ttl: float | None = None
    ) -> tuple[float, int]:
        return self.spend_now(key, cost, tokens, now, window, ttl)

    def spend_now(
        self, key: str, cost: float, tokens: int, now: float, window: float | None = None, ttl: float | None = None
    ) -> tuple[float, int]:
        """`spend` without awaiting: a store in this process answers at once (`budget` calls it so)."""
        lock = self._spent_lock
        lock.acquire()  # not `with`: half the cost, on every model call of a shared budget
        try:
            spent = self._spent.get(key)
            if spent is None or spent.expires <= now:
                if len(self._spent) >= self._spent_sweep_at:
                    self._spent = {k: s for k, s in self._spent.items() if s.expires > now}
                    self._spent_sweep_at = max(1024, 2 * len(self._spent))
                spent = self._spent[key] = Spent()
            if window is None:  # what `add` does without a window, without a call
                if cost or tokens:
                    spent.cost += cost
                    spent.tokens += tokens
                    if ttl is not None:
                        spent.expires = now + ttl
                return spent.cost, int(spent.tokens)
            spent.add(cost, tokens, now, window, ttl)
            return spent.totals()
        finally:
            lock.release()


SQLITE_TABLE = """
CREATE TABLE IF NOT EXISTS onion_spending (
    key TEXT PRIMARY KEY, cost REAL NOT NULL, tokens REAL NOT NULL, buckets TEXT NOT NULL, expires REAL
);
CREATE INDEX IF NOT EXISTS onion_spending_by_expiry ON onion_spending (expires);
"""


def sqlite_spend(
    db: sqlite3.Cursor, key: str, cost: float, tokens: int, now: float, window: float | None, ttl: float | None
) -> tuple[float, int]:
    """`SpendStore.spend` in the write transaction `db` is in (`SQLiteStore.spend`); a key seen for the first
    time also deletes the keys whose ttl ran out."""
    row = db.execute("SELECT cost, tokens, buckets, expires FROM onion_spending WHERE key = ?", (key,)).fetchone()
    if row is None or (row[3] is not None and row[3] <= now):
        db.execute("DELETE FROM onion_spending WHERE expires <= ?", (now,))
        spent = Spent()
    else:
        spent = Spent(row[0], row[1], deque(json.loads(row[2])), math.inf if row[3] is None else row[3])
    if spent.add(cost, tokens, now, window, ttl):
        expires = None if spent.expires == math.inf else spent.expires
        buckets = json.dumps(list(spent.buckets))
        db.execute(
            "INSERT OR REPLACE INTO onion_spending VALUES (?, ?, ?, ?, ?)",
            (key, spent.cost, spent.tokens, buckets, expires),
        )
    return spent.totals()
