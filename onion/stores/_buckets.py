"""Token buckets for rate limits: the arithmetic every store shares, and the in-process store built on it."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(slots=True)
class Bucket:
    """One key's remaining requests and tokens, refilled evenly over the window."""

    requests: float = math.inf
    tokens: float = math.inf
    updated: float = 0.0
    paused_until: float = 0.0
    limits: tuple[float | None, float | None, float] = (None, None, 60.0)  # rpm, tpm, window of the last take
    held: int = 0  # reservations under a tpm not reconciled yet: their calls' real usage is still to be charged

    def take(self, now: float, tokens: int, rpm: float | None, tpm: float | None, window: float) -> float:
        """Reserve one request and `tokens` tokens (returns 0), or nothing (returns the seconds to wait)."""
        elapsed, self.updated, self.limits = max(0.0, now - self.updated), now, (rpm, tpm, window)
        wait = self.paused_until - now
        if rpm:
            self.requests = min(max(rpm, 1.0), self.requests + elapsed * rpm / window)
            wait = max(wait, (1 - self.requests) * window / rpm)
        if tpm:
            if tokens > tpm:
                raise ValueError(f"rate store: {tokens} tokens can never fit in tpm={tpm}")
            self.tokens = min(tpm, self.tokens + elapsed * tpm / window)
            wait = max(wait, (tokens - self.tokens) * window / tpm)
        if wait > 0:
            return wait
        self.requests -= 1
        self.tokens -= tokens
        self.held += bool(tpm)
        return 0.0

    def give_back(self, reserved: int, used: int, refund_request: bool) -> None:
        self.tokens += reserved - used
        self.requests += refund_request
        self.held = max(0, self.held - 1)

    def pause(self, now: float, seconds: float) -> None:
        self.paused_until = max(self.paused_until, now + seconds)

    def full(self, now: float) -> bool:
        """Whether the bucket has refilled, is not paused and waits for no call's usage: then it is the same as a
        new one."""
        rpm, tpm, window = self.limits
        elapsed = max(0.0, now - self.updated)
        return (
            not self.held
            and self.paused_until <= now
            and (not rpm or self.requests + elapsed * rpm / window >= max(rpm, 1.0))
            and (not tpm or self.tokens + elapsed * tpm / window >= tpm)
        )


class MemoryRateStore:
    """Token buckets in this process, one per key.

    Each limit refills evenly over `window` and holds at most one window's
    worth (so a full minute's requests may go at once, as providers allow).
    One store may serve several threads, each with its own event loop: every
    operation reads `clock` and changes its bucket under one lock. A clock
    that steps back refills nothing. Buckets that have refilled, with no call
    in flight, are dropped now and then, so keys used once (one per user,
    say) do not pile up.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._buckets: dict[str, Bucket] = {}
        self._buckets_lock = threading.Lock()
        self._sweep_at = 1024  # buckets held; each sweep doubles what is left

    async def acquire(self, key: str, tokens: int, *, rpm: float | None, tpm: float | None, window: float) -> float:
        with self._buckets_lock:
            now = self.clock()
            bucket = self._buckets.get(key)
            if bucket is None:
                if len(self._buckets) >= self._sweep_at:
                    self._sweep(now)
                bucket = self._buckets[key] = Bucket(updated=now)
            return bucket.take(now, tokens, rpm, tpm, window)

    def _sweep(self, now: float) -> None:
        """Drop the buckets that have refilled (a new bucket is full): amortised, as the next sweep waits until
        twice as many are held."""
        self._buckets = {key: bucket for key, bucket in self._buckets.items() if not bucket.full(now)}
        self._sweep_at = max(1024, 2 * len(self._buckets))

    async def reconcile(self, key: str, reserved: int, used: int, *, refund_request: bool = False) -> None:
        with self._buckets_lock:
            bucket = self._buckets.get(key)
            if bucket is not None:
                bucket.give_back(reserved, used, refund_request)

    async def pause(self, key: str, seconds: float) -> None:
        with self._buckets_lock:
            now = self.clock()
            bucket = self._buckets.get(key)
            if bucket is None:
                bucket = self._buckets[key] = Bucket(updated=now)
            bucket.pause(now, seconds)
