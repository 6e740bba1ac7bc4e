"""Why a store refuses an operation on a run: the errors and messages every store raises with."""

from __future__ import annotations

from ..errors import LeaseLost, RunNotFound
from ._protocols import RunRecord


def run_not_found(run_id: str) -> RunNotFound:
    """`RunNotFound` for a run the store never had, or deleted."""
    return RunNotFound(f"no run {run_id!r} in the store (never journaled here, or deleted)")


def run_deleted(run_id: str) -> RunNotFound:
    """`RunNotFound` for a run that went while a worker held it."""
    return RunNotFound(f"no run {run_id!r} in the store (deleted while running?)")


def claim_refusal(record: RunRecord, now: float, paused_only: bool = False) -> str | None:
    """Why `record` cannot be claimed now, or None when it can."""
    if record.status == "paused" or (record.status == "failed" and not paused_only):
        return None
    if paused_only:
        return (
            f"run {record.run_id!r} is {record.status}, no longer paused: another worker resumed it; "
            "load its state again (store.load) if it paused again"
        )
    if record.status == "running":
        if record.lease_expires is not None and record.lease_expires <= now:
            return None
        return (
            f"run {record.run_id!r} is held by another worker for {(record.lease_expires or now) - now:.1f}s more; "
            "try again after its lease expires"
        )
    return f"run {record.run_id!r} has {record.status} already (another worker may have resumed it); nothing to resume"


def run_lost(run_id: str, status: str | None) -> LeaseLost:
    """`LeaseLost` for a worker whose lease lapsed and whose run (now `status`) another worker took."""
    return LeaseLost(
        f"this worker lost run {run_id!r}: its lease expired and another worker took it over",
        run_id=run_id,
        status=status,
    )


def session_lost(run_id: str, session_id: str) -> LeaseLost:
    """`LeaseLost` for a run whose session lock lapsed and passed to another run: its turn was not appended."""
    return LeaseLost(
        f"run {run_id!r} lost the lock of session {session_id!r}: it lapsed and another run on the session took it, "
        "so this run's messages were not appended (the run is failed; run again on the session's new history)",
        run_id=run_id,
        session=session_id,
    )
