"""The SQLite store's file: its tables, and the statements its transactions run on them (`SQLiteStore` holds them)."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from ._protocols import RunRecord
from ._refusals import run_deleted, run_lost
from ._sqlite_checkpoints import BACKSTOP_PAGES
from ._sqlite_events import TABLES

_SCHEMA = """
CREATE TABLE IF NOT EXISTS onion_runs (
    run_id TEXT PRIMARY KEY, agent TEXT NOT NULL, status TEXT NOT NULL, created REAL NOT NULL,
    updated REAL NOT NULL, owner TEXT, lease_expires REAL, state TEXT, session TEXT, pending INTEGER NOT NULL,
    tenant TEXT
);
CREATE TABLE IF NOT EXISTS onion_journal (
    run_id TEXT NOT NULL, seq INTEGER NOT NULL, entry TEXT NOT NULL, PRIMARY KEY (run_id, seq)
);
CREATE TABLE IF NOT EXISTS onion_sessions (
    session_id TEXT NOT NULL, seq INTEGER NOT NULL, message TEXT NOT NULL, PRIMARY KEY (session_id, seq)
);
CREATE TABLE IF NOT EXISTS onion_session_locks (
    session_id TEXT PRIMARY KEY, owner TEXT NOT NULL, expires REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS onion_session_tenants (session_id TEXT PRIMARY KEY, tenant TEXT);
CREATE TABLE IF NOT EXISTS onion_cache (key TEXT PRIMARY KEY, value TEXT NOT NULL, expires REAL);
CREATE TABLE IF NOT EXISTS onion_rates (
    key TEXT PRIMARY KEY, requests REAL, tokens REAL, updated REAL NOT NULL, paused_until REAL NOT NULL
);
"""

_RUN_COLUMNS = "run_id, agent, status, created, updated, owner, lease_expires, state, session, pending, tenant"
_TENANT_INDEX = "CREATE INDEX IF NOT EXISTS onion_runs_by_tenant ON onion_runs (tenant, updated)"
"""Made after `_SCHEMA`, once a file of an older onion has its `tenant` column (`_add_tenants`)."""


def _connect(path: str, busy_timeout: float) -> sqlite3.Connection:
    """A connection to the store's file, its tables created; closed again when the file cannot be used."""
    db = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=busy_timeout)
    try:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.execute(f"PRAGMA busy_timeout={int(busy_timeout * 1000)}")
        db.execute(f"PRAGMA wal_autocheckpoint={BACKSTOP_PAGES}")
        db.executescript(_SCHEMA + TABLES)
        _add_tenants(db)
    except BaseException:
        db.close()
        raise
    return db


def _add_tenants(db: sqlite3.Connection) -> None:
    """Give a file of an older onion (runs without a `tenant` column) the column, and the index on it.

    Its runs are of no tenant. Two processes opening the file at once both try: the second finds the column.
    """
    if "tenant" not in {row[1] for row in db.execute("PRAGMA table_info(onion_runs)")}:
        try:
            db.execute("ALTER TABLE onion_runs ADD COLUMN tenant TEXT")
        except sqlite3.OperationalError as error:
            if "duplicate column" not in str(error):
                raise
    db.execute(_TENANT_INDEX)


def _record(db: sqlite3.Cursor, run_id: str) -> RunRecord | None:
    row = db.execute(f"SELECT {_RUN_COLUMNS} FROM onion_runs WHERE run_id = ?", (run_id,)).fetchone()
    return None if row is None else RunRecord(*row)


def _hold(db: sqlite3.Cursor, run_id: str, owner: str, assignments: str, values: tuple[Any, ...]) -> None:
    """Apply `assignments` to the run if `owner` holds it; else `LeaseLost` (or `RunNotFound`)."""
    changed = db.execute(
        f"UPDATE onion_runs SET {assignments} WHERE run_id = ? AND owner = ?", (*values, run_id, owner)
    ).rowcount
    if changed == 0:
        record = _record(db, run_id)
        if record is None:
            raise run_deleted(run_id)
        raise run_lost(run_id, record.status)


def _append_to_session(db: sqlite3.Cursor, session_id: str, messages: Sequence[str], lock: str | None) -> bool:
    """Append `messages` to the session, only while `lock` (if given) holds its lock; False when it does not."""
    if lock is not None:
        row = db.execute("SELECT owner FROM onion_session_locks WHERE session_id = ?", (session_id,)).fetchone()
        if row is None or row[0] != lock:
            return False
    (last,) = db.execute(
        "SELECT coalesce(max(seq), 0) FROM onion_sessions WHERE session_id = ?", (session_id,)
    ).fetchone()
    db.executemany(
        "INSERT INTO onion_sessions VALUES (?, ?, ?)",
        [(session_id, last + i, message) for i, message in enumerate(messages, 1)],
    )
    return True


def _append(db: sqlite3.Cursor, run_id: str, entries: Sequence[str]) -> None:
    if not entries:
        return
    (last,) = db.execute("SELECT coalesce(max(seq), 0) FROM onion_journal WHERE run_id = ?", (run_id,)).fetchone()
    db.executemany(
        "INSERT INTO onion_journal VALUES (?, ?, ?)", [(run_id, last + i, entry) for i, entry in enumerate(entries, 1)]
    )


def _running(db: sqlite3.Cursor, run_id: str) -> bool:
    """`run_id` (a session lock's holder) is a run the store has running: its lock is not handed on."""
    return (
        db.execute("SELECT 1 FROM onion_runs WHERE run_id = ? AND status = 'running'", (run_id,)).fetchone() is not None
    )
