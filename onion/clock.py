"""The time, ids and random numbers of a run: the process's own, or a durable engine's.

onion and its built-in layers read the time and draw ids and random
numbers here, and so can your own layers. Outside an engine these are
`time.time`, `time.monotonic`, `uuid.uuid4` and `random.random`. Inside a
Temporal workflow `onion.temporal` sets the workflow's clock
(`temporalio.workflow.time()`, `workflow.uuid4()`, `workflow.random()`):
the same readings and draws when the workflow replays, so a layer that
uses them decides the same (docs/temporal.md); `replaying()` says when
it replays, so what was logged is not logged again.
"""

from __future__ import annotations

import random as _random
import time as _time
import uuid as _uuid
from contextvars import ContextVar
from typing import Protocol


class Clock(Protocol):
    """Where a run reads the time and draws ids and random numbers (a durable engine sets its own: `CLOCK`)."""

    def time(self) -> float:
        """Seconds since the epoch."""
        ...

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back, for measuring how long something took."""
        ...

    def uuid4(self) -> _uuid.UUID:
        """A random UUID."""
        ...

    def random(self) -> float:
        """A random number in [0, 1)."""
        ...

    def replaying(self) -> bool:
        """True while the engine replays what happened already (its clock reads the past): logs stay quiet."""
        ...


CLOCK: ContextVar[Clock | None] = ContextVar("onion.clock", default=None)
"""The engine's clock in force in this context (`onion.temporal` sets its workflow's), else None: the process's."""


def time() -> float:
    """Seconds since the epoch: `time.time()`, or the engine's."""
    clock = CLOCK.get()
    return _time.time() if clock is None else clock.time()


def monotonic() -> float:
    """Seconds on a clock that never goes back: `time.monotonic()`, or the engine's."""
    clock = CLOCK.get()
    return _time.monotonic() if clock is None else clock.monotonic()


def uuid4() -> _uuid.UUID:
    """A random UUID: `uuid.uuid4()`, or the engine's (the same one again when the engine replays)."""
    clock = CLOCK.get()
    return _uuid.uuid4() if clock is None else clock.uuid4()


def random() -> float:
    """A random number in [0, 1): `random.random()`, or the engine's."""
    clock = CLOCK.get()
    return _random.random() if clock is None else clock.random()


def replaying() -> bool:
    """True while a durable engine replays what happened already (a Temporal worker catching up on a workflow's
    history): what was logged or traced the first time is not logged again."""
    clock = CLOCK.get()
    return clock is not None and clock.replaying()


def in_engine() -> bool:
    """True where a durable engine set its clock (inside a Temporal workflow)."""
    return CLOCK.get() is not None


__all__ = ["CLOCK", "Clock", "in_engine", "monotonic", "random", "replaying", "time", "uuid4"]
