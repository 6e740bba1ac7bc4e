"""The token-bucket arithmetic of rate limits, shared by every store."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(slots=True)
class Bucket:
    """One key's remaining requests and tokens, refilled evenly over the window."""

    requests: float = math.inf
    tokens: float = math.inf
    updated: float = 0.0
    paused_until: float = 0.0

    def take(self, now: float, tokens: int, rpm: float | None, tpm: float | None, window: float) -> float:
        """Reserve one request and `tokens` tokens (returns 0), or nothing (returns the seconds to wait)."""
        elapsed, self.updated = max(0.0, now - self.updated), now
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
        return 0.0

    def give_back(self, reserved: int, used: int, refund_request: bool) -> None:
        self.tokens += reserved - used
        self.requests += refund_request

    def pause(self, now: float, seconds: float) -> None:
        self.paused_until = max(self.paused_until, now + seconds)
