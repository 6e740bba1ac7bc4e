"""The SQLite store's table of streamed events (`EventStore`): event n of a run is row 2n, its stream's end mark
2n + 1 (no text); a run's events go `keep` seconds after the last were added."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from ._events import Events, up_to_end

TABLES = """
CREATE TABLE IF NOT EXISTS onion_events (
    run_id TEXT NOT NULL, seq INTEGER NOT NULL, text TEXT, PRIMARY KEY (run_id, seq)
);
CREATE TABLE IF NOT EXISTS onion_event_runs (run_id TEXT PRIMARY KEY, expires REAL NOT NULL);
CREATE INDEX IF NOT EXISTS onion_event_runs_by_expiry ON onion_event_runs (expires);
"""


def add(
    db: sqlite3.Cursor, run_id: str, events: Sequence[tuple[int, str]], ended: bool, now: float, keep: float
) -> bool:
    """`EventStore.add_events` in the write transaction `db` (expired runs' events go too, at each end)."""
    top = db.execute("SELECT MAX(seq) FROM onion_events WHERE run_id = ?", (run_id,)).fetchone()[0] or 0
    if (events and 2 * events[0][0] <= top) or (ended and not events and top % 2):
        return False
    db.executemany("INSERT INTO onion_events VALUES (?, ?, ?)", [(run_id, 2 * n, text) for n, text in events])
    if ended and (events or top):
        last = events[-1][0] if events else top // 2
        db.execute("INSERT INTO onion_events VALUES (?, ?, NULL)", (run_id, 2 * last + 1))
        gone = "SELECT run_id FROM onion_event_runs WHERE expires < ?"
        db.execute(f"DELETE FROM onion_events WHERE run_id IN ({gone})", (now,))
        db.execute("DELETE FROM onion_event_runs WHERE expires < ?", (now,))
    db.execute("INSERT OR REPLACE INTO onion_event_runs VALUES (?, ?)", (run_id, now + keep))
    return True


def read(db: sqlite3.Connection, run_id: str, after: int, limit: int, now: float) -> tuple[Events, bool | None]:
    """`EventStore.read_events` on the connection `db`."""
    kept = db.execute("SELECT expires FROM onion_event_runs WHERE run_id = ?", (run_id,)).fetchone()
    if kept is None or kept[0] < now:
        return [], None
    rows = db.execute(
        "SELECT seq, text FROM onion_events WHERE run_id = ? AND seq > ? ORDER BY seq LIMIT ?",
        (run_id, 2 * after, limit + 1),
    ).fetchall()
    return up_to_end(((seq // 2, text) for seq, text in rows), limit)


def last(db: sqlite3.Connection, run_id: str, now: float) -> tuple[int, bool]:
    """`EventStore.last_event` on the connection `db`."""
    kept = db.execute("SELECT expires FROM onion_event_runs WHERE run_id = ?", (run_id,)).fetchone()
    top = db.execute("SELECT MAX(seq) FROM onion_events WHERE run_id = ?", (run_id,)).fetchone()[0]
    if kept is None or kept[0] < now or top is None:
        return 0, True
    return top // 2, bool(top % 2)
