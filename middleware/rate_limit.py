"""`rate_limit`: requests and tokens per minute for model calls, per model or per key."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from onion import Handler, ModelCall, ModelResponse
from onion.errors import RateLimitedError
from onion.stores import RateStore
from onion.stores._buckets import MemoryRateStore
from onion.tracing import waited

from . import _tokens

_MAX_TOKEN_SETTINGS = ("max_tokens", "max_output_tokens", "max_completion_tokens")


class RateLimitExceeded(RateLimitedError):
    """A call would exceed the limit and `rate_limit(wait=False)` does not wait.

    A retryable `RateLimitedError` (so an `OnionError`): `retry_after` is the
    wait in seconds after which the call would pass, `key` the limited key.
    """

    def __init__(self, message: str, *, key: str, retry_after: float) -> None:
        super().__init__(message, retry_after=retry_after)
        self.key = key


def estimate_tokens(call: ModelCall) -> int:
    """A rough token count for `call` before it is sent: text length / 4, plus its max tokens setting.

    The text is the messages, their tool calls' names and arguments (as
    JSON) and the tools' names, descriptions and schemas (as JSON): the
    count `compact` uses too (`middleware.compact.estimate_tokens`).
    """
    most = next((call.settings[name] for name in _MAX_TOKEN_SETTINGS if name in call.settings), 0)
    return _tokens.estimate_tokens(call.messages, call.tools) + (most if isinstance(most, int) else 0)


def model_key(call: ModelCall) -> str:
    """The default key: the model's name."""
    return str(getattr(call.model, "name", call.model))


class rate_limit:
    """Keep model calls under `rpm` requests and `tpm` tokens per minute, per key.

    Before each call the layer reserves one request and an estimate of its
    tokens (`estimate(call)`, default `estimate_tokens`), then corrects the
    estimate with the response's real usage; a cached response (a `cache`
    layer inside this one) gives its request and tokens back. An estimate
    above `tpm` reserves `tpm` (the call goes once the bucket is full), and
    its correction is measured from that reservation, so the steady rate
    stays at `tpm`. Over the limit it waits (`sleep`, default
    `asyncio.sleep`), or with `wait=False` raises `RateLimitExceeded`. The
    key is the model's name unless `key(call)` says otherwise. Bare (no
    limits) it still obeys the
    provider: a call failing with `RateLimitedError` carrying `retry_after`
    makes later calls for that key wait that long. All runs and agents that
    share this layer share its `store` (default: a `MemoryRateStore`).
    """

    __slots__ = ("estimate", "key", "rpm", "sleep", "store", "tpm", "wait", "window")

    def __init__(
        self,
        rpm: float | None = None,
        tpm: float | None = None,
        *,
        wait: bool = True,
        key: Callable[[ModelCall], str] = model_key,
        estimate: Callable[[ModelCall], int] = estimate_tokens,
        store: RateStore | None = None,
        window: float = 60.0,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
    ) -> None:
        for label, value in (("rpm", rpm), ("tpm", tpm), ("window", window)):
            if value is not None and value <= 0:
                raise ValueError(f"rate_limit: {label} must be positive, got {value!r}")
        self.rpm, self.tpm, self.wait, self.key, self.estimate, self.window = rpm, tpm, wait, key, estimate, window
        self.sleep = sleep
        self.store: RateStore = store if store is not None else MemoryRateStore()

    async def wrap_model(self, call: ModelCall, call_next: Handler) -> ModelResponse:
        key = self.key(call)
        reserved = min(self.estimate(call), int(self.tpm)) if self.tpm else 0
        while (delay := await self.store.acquire(key, reserved, rpm=self.rpm, tpm=self.tpm, window=self.window)) > 0:
            if not self.wait:
                raise RateLimitExceeded(
                    f"rate limit for {key} reached; retry in {delay:.3f}s", key=key, retry_after=delay
                )
            await self.sleep(delay)
            waited(delay)
        try:
            response: ModelResponse = await call_next(call)
        except BaseException as error:
            if isinstance(error, RateLimitedError) and error.retry_after:
                await self.store.pause(key, error.retry_after)
            if reserved:
                await self.store.reconcile(key, reserved, 0)
            raise
        if response.cached:
            await self.store.reconcile(key, reserved, 0, refund_request=True)
        elif self.tpm:
            await self.store.reconcile(key, reserved, response.usage.total_tokens)
        return response
