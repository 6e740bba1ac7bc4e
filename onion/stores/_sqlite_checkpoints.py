"""`Checkpoints`: a thread that copies a store's WAL into its database file, so that no commit waits for it."""

from __future__ import annotations

import logging
import sqlite3
import threading

logger = logging.getLogger("onion.stores")

CHECKPOINT_EVERY = 100
"""Commits between two checkpoints."""
BACKSTOP_PAGES = 10_000
"""The WAL size (in pages) at which the committing connection checkpoints anyway, should this thread fall behind."""


class Checkpoints:
    """Checkpoints the WAL of the SQLite file at `path` every `every` commits, in a thread of its own.

    SQLite's own checkpoint runs inside the commit that crosses its
    threshold and syncs to disk (milliseconds); here it is a `PASSIVE`
    checkpoint on another connection, so no commit waits for it. The store
    calls `committed()` after each commit; `stop()` ends the thread.
    """

    def __init__(self, path: str, name: str, *, every: int = CHECKPOINT_EVERY) -> None:
        self.path = path
        self.name = name
        self.every = every
        self.runs = 0
        """Checkpoints run so far."""
        self._commits = 0
        self._due = threading.Event()
        self._stopping = False
        self._thread: threading.Thread | None = None

    def committed(self) -> None:
        """Count one commit; every `every` commits, a checkpoint is due. Called holding the store's connection."""
        self._commits += 1
        if self._commits % self.every:
            return
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=f"onion {self.name} checkpoints", daemon=True)
            self._thread.start()
        self._due.set()

    def stop(self) -> None:
        """End the thread, once the checkpoint it may be running is done. Called holding the store's connection."""
        if self._thread is None:
            return
        self._stopping = True
        self._due.set()
        self._thread.join()
        self._thread = None

    def _run(self) -> None:
        db = sqlite3.connect(self.path, isolation_level=None)
        try:
            while True:
                self._due.wait()
                self._due.clear()
                if self._stopping:
                    return
                try:
                    db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                except sqlite3.Error as error:
                    logger.debug("%s: a checkpoint could not run (%s); the next one will", self.name, error)
                self.runs += 1
        finally:
            db.close()
