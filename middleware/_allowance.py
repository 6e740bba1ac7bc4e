"""Whose allowance a model call spends from (`budget(per=...)`) and over which window (`budget(window=...)`)."""

from __future__ import annotations

import datetime
import math
from typing import Any, NamedTuple

from onion import Run

PER = ("run", "session", "principal", "tenant", "agent")
"""What may share one allowance."""

MADE_AT_MOST = 4096
"""The most allowances of one period kept made (beyond that they are made again)."""

GRACE = 3600.0
"""How long a calendar window's counter outlives the window, in seconds: a worker whose clock is behind still finds
it."""


class Where(NamedTuple):
    """One allowance: its key in the store, how the store counts it, and how an error names it."""

    key: str
    rolling: float | None
    """A rolling window's seconds, else None."""
    expires: float | None
    """When the store may forget a calendar window's counter (seconds since the epoch), else None."""
    scope: str
    window: str | None


class Allowances:
    """The allowance each run spends from: one per `per` value (a session, a principal, ...) and window."""

    __slots__ = ("_made", "_period", "per", "rolling", "window")

    def __init__(self, per: str, window: str | datetime.timedelta | None) -> None:
        if per not in PER:
            raise ValueError(f"budget: per must be one of {', '.join(map(repr, PER))}, not {per!r}")
        if window not in (None, "day", "month") and not isinstance(window, datetime.timedelta):
            raise ValueError(f"budget: window is None, 'day', 'month' or a timedelta, not {window!r}")
        if isinstance(window, datetime.timedelta) and window.total_seconds() <= 0:
            raise ValueError(f"budget: a rolling window must be positive, not {window}")
        if per == "run" and window is not None:
            raise ValueError(
                "budget: a window needs an allowance that outlives a run: give per='session', 'principal', "
                "'tenant' or 'agent'"
            )
        self.per, self.window = per, window
        self.rolling = window.total_seconds() if isinstance(window, datetime.timedelta) else None
        self._period: tuple[float, float, str] = (-math.inf, math.inf, "ever")  # the calendar window: start, end, tag
        if self.rolling is not None:
            self._period = (-math.inf, math.inf, f"last:{self.rolling:g}")
        elif window is not None:
            self._period = (0.0, 0.0, "")
        self._made: dict[Any, Where] = {}
        """The allowances of the current period, by `per` value."""

    def tag(self) -> str:
        """How the settings name this kind of allowance in a run's own counters (`budget.key`)."""
        window = self.window
        shown = f"{self.rolling:g}s" if self.rolling is not None else window or "ever"
        return f"{self.per}/{shown}"

    def of(self, run: Run, now: float) -> Where:
        """The allowance `run` spends from at `now` (seconds since the epoch)."""
        per, principal = self.per, run.principal
        value: Any
        if per == "tenant":
            value = None if principal is None else principal.tenant
        elif per == "principal":
            value = None if principal is None else (principal.tenant, principal.id)
        elif per == "session":
            value = run.session
        else:
            value = run.agent.name
        start, end, tag = self._period
        if not start <= now < end:
            self._period = start, end, tag = _calendar(str(self.window), now)
            self._made = {}
        made = self._made
        where = made.get(value)
        if where is None:
            if len(made) >= MADE_AT_MOST:
                made.clear()
            where = made[value] = self._where(value, end, tag)
        return where

    def _where(self, value: Any, end: float, tag: str) -> Where:
        per = self.per
        if per == "tenant":
            part, scope = _part(value), f"tenant {value!r}" if value is not None else "runs without a tenant"
        elif per == "principal":
            part = "-:" if value is None else _part(value[0]) + _part(value[1])
            scope = "runs without a principal" if value is None else f"principal {value[1]!r}"
            if value is not None and value[0] is not None:
                scope += f" (tenant {value[0]!r})"
        elif per == "session":
            part, scope = _part(value), f"session {value!r}" if value is not None else "runs without a session"
        else:
            part, scope = _part(value), f"agent {value!r}"
        key = f"budget:{per}:{part}{tag}"
        if self.rolling is not None:
            return Where(key, self.rolling, None, scope, f"the last {self.rolling:g} s")
        if self.window is None:
            return Where(key, None, None, scope, None)
        return Where(key, None, end + GRACE, scope, tag.replace(":", " "))


def _part(value: str | None) -> str:
    """`value` as a part of a key that no other value's parts can spell: its length first."""
    return "-:" if value is None else f"{len(value)}:{value}:"


def _calendar(window: str, now: float) -> tuple[float, float, str]:
    """The UTC day or month holding `now`: its start, its end (seconds since the epoch) and its tag."""
    utc = datetime.UTC
    moment = datetime.datetime.fromtimestamp(now, utc)
    if window == "day":
        first = datetime.datetime(moment.year, moment.month, moment.day, tzinfo=utc)
        after = first + datetime.timedelta(days=1)
        tag = f"day:{first:%Y-%m-%d}"
    else:
        first = datetime.datetime(moment.year, moment.month, 1, tzinfo=utc)
        after = datetime.datetime(moment.year + moment.month // 12, moment.month % 12 + 1, 1, tzinfo=utc)
        tag = f"month:{first:%Y-%m}"
    return first.timestamp(), after.timestamp(), tag
