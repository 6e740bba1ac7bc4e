"""Lease renewals of running journals: one timer per event loop and lease, not one per run."""

from __future__ import annotations

import asyncio
import weakref
from typing import Protocol

from ..errors import LeaseLost, RunNotFound


class Renewable(Protocol):
    """What a tick reads and calls of a running journal (`Journal` is one)."""

    _renewing: asyncio.Task[None] | None
    _renewed: float

    def _renew_now(self, now: float) -> None: ...


def taken_over(run_id: str) -> LeaseLost:
    """Why a renewal stopped the run: another worker holds it now."""
    return LeaseLost(
        f"this worker lost run {run_id!r}: its lease lapsed and another worker took it over; "
        "the run was stopped here (its model call and tools cancelled), the other worker goes on with it",
        run_id=run_id,
    )


def deleted(run_id: str) -> RunNotFound:
    """Why a renewal stopped the run: it is gone from the store."""
    return RunNotFound(
        f"run {run_id!r} was deleted from the store while it ran; it was stopped here (its model call and tools "
        "cancelled)"
    )


def renewals_for(loop: asyncio.AbstractEventLoop, lease: float) -> Renewals:
    """The renewal timer of `loop` for journals of `lease` seconds, made when there is none."""
    key = (id(loop), lease)
    group = _renewals.get(key)
    if group is None or group.loop is not loop:
        group = _renewals[key] = Renewals(loop, lease)
    return group


_renewals: weakref.WeakValueDictionary[tuple[int, float], Renewals] = weakref.WeakValueDictionary()
"""Each loop's renewal timers, by `(id(loop), lease)`; a timer is kept alive by its journals and its loop."""


class Renewals:
    """The running journals of one loop and lease, renewed by one timer ticking every `lease / 6` seconds.

    A tick renews each journal that went `lease / 6` seconds without a
    renewal, so renewals are at most `lease / 3` apart; the timer stops at a
    tick that finds no journal left.
    """

    __slots__ = ("__weakref__", "journals", "lease", "loop", "timer")

    def __init__(self, loop: asyncio.AbstractEventLoop, lease: float) -> None:
        self.loop, self.lease = loop, lease
        self.journals: set[Renewable] = set()
        self.timer: asyncio.TimerHandle | None = None

    def add(self, journal: Renewable) -> None:
        self.journals.add(journal)
        if self.timer is None:
            self.timer = self.loop.call_later(self.lease / 6, self._tick)

    def _tick(self) -> None:
        if not self.journals:  # nothing keeps it now: the next run makes another
            self.timer = None
            return
        now = self.loop.time()
        due = now - self.lease / 6
        for journal in list(self.journals):
            if journal._renewing is None and journal._renewed <= due:
                journal._renew_now(now)
        self.timer = self.loop.call_later(self.lease / 6, self._tick)
