"""`FakeTime`: a clock and a sleep for tests, where time moves only when something sleeps."""

from __future__ import annotations

import asyncio

__all__ = ["FakeTime"]


class FakeTime:
    """A clock and an async sleep sharing one fake time: sleeping moves the clock on at once.

    Pass `clock` and `sleep` to what takes them (`retry(sleep=..., clock=...)`,
    `rate_limit(sleep=..., store=MemoryRateStore(clock=...))`); `now` is the
    time, `slept` every sleep's seconds in order. Sleeping yields to the event
    loop once, as a real sleep would.
    """

    __slots__ = ("now", "slept")

    def __init__(self, now: float = 0.0) -> None:
        self.now = now
        self.slept: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += max(0.0, seconds)
        await asyncio.sleep(0)
