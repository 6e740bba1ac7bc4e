"""`rate_limit`: requests and tokens per minute for model calls, per model or per key."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

from onion import ModelCall, ModelNext, ModelResponse
from onion.errors import RateLimitedError
from onion.stores import MemoryRateStore, RateStore
from onion.tracing import waited

from . import _tokens

_MAX_TOKEN_SETTINGS = ("max_tokens", "max_output_tokens", "max_completion_tokens")

LEAST_WAIT = 0.001
"""The shortest wait, in seconds: a wait shorter than a clock can tell apart from none would never end."""


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
    layer inside this one) gives its request and tokens back. `rpm` and
    `tpm` are per minute whatever the `window`: the buckets hold, and may
    spend at once, `window` seconds' worth of them (`rpm=60, window=1`: one
    request a second, no burst). An estimate above a window's tokens
    reserves them all (the call goes once the bucket is full), and its
    correction is measured from that reservation, so the steady rate stays
    at `tpm`. Over the limit it waits (`sleep`, default `asyncio.sleep`;
    never less than `LEAST_WAIT`), or with `wait=False` raises
    `RateLimitExceeded`. The key is the model's name unless `key(call)` says
    otherwise. Bare (no limits) it still obeys the provider: a call failing
    with `RateLimitedError` carrying `retry_after` makes later calls for that
    key wait that long. All runs and agents that share this layer share its
    `store` (default: a `MemoryRateStore`).
    """

    __slots__ = ("_refunds", "_rpw", "_tpw", "estimate", "key", "rpm", "sleep", "store", "tpm", "wait", "window")

    nondeterministic = "its buckets refill with the clock"
    """Why a replay of a run may decide differently with this layer: engines that replay workflow code refuse it."""

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
        self._rpw = rpm * window / 60 if rpm else None  # what the store counts: requests and tokens per window
        self._tpw = tpm * window / 60 if tpm else None
        self.sleep = sleep
        self.store: RateStore = store if store is not None else MemoryRateStore()
        self._refunds = Refunds()

    async def wrap_model(self, call: ModelCall, call_next: ModelNext) -> ModelResponse:
        key = self.key(call)
        reserved = min(self.estimate(call), int(self._tpw)) if self._tpw else 0
        epoch = self._refunds.epoch
        delay = await self.store.acquire(key, reserved, rpm=self._rpw, tpm=self._tpw, window=self.window)
        if delay > 0:
            await self._wait_for_room(key, reserved, delay, epoch)
        try:
            response = await call_next(call)
        except BaseException as error:
            if isinstance(error, RateLimitedError) and error.retry_after:
                await self.store.pause(key, error.retry_after)
            if self.tpm:  # every reservation under a tpm is reconciled, so the store knows none is open
                await self._give_back(key, reserved, 0)
            raise
        if response.cached:
            await self._give_back(key, reserved, 0, refund_request=True)
        elif self.tpm:
            await self._give_back(key, reserved, response.usage.total_tokens)
        return response

    async def _wait_for_room(self, key: str, reserved: int, delay: float, epoch: int) -> None:
        """Ask the store again until it takes the call (`delay`: its first answer), or raise without `wait`.

        A refund under `key` ends each wait early; so does any refund since
        `epoch`, when the first answer was asked for, as it may have been this
        key's (the refund count is kept only while calls wait)."""
        with self._refunds.tally(key) as refunds:
            seen = refunds.count  # read before `epoch`: a refund from another thread between the two is not missed
            if self._refunds.epoch != epoch:
                seen = -1
            while True:
                delay = max(delay, LEAST_WAIT)
                if not self.wait:
                    raise RateLimitExceeded(
                        f"rate limit for {key} reached; retry in {delay:.3f}s", key=key, retry_after=delay
                    )
                waited(await self._pause(key, delay, refunds, seen))
                seen = refunds.count
                delay = await self.store.acquire(key, reserved, rpm=self._rpw, tpm=self._tpw, window=self.window)
                if delay <= 0:
                    return

    async def _pause(self, key: str, delay: float, refunds: Tally, seen: int) -> float:
        """Wait `delay` seconds, or less when a call of this layer gives `key` tokens back (or gave some since
        `refunds` counted `seen`); the seconds waited."""
        loop = asyncio.get_running_loop()
        started = loop.time()
        woken = self._refunds.waiter(key, refunds, seen)
        if woken.done():  # a refund came while the store was asked: ask again now
            return 0.0
        sleeping = asyncio.ensure_future(self.sleep(delay))
        try:
            await asyncio.wait((sleeping, woken), return_when=asyncio.FIRST_COMPLETED)
        finally:
            sleeping.cancel()
            self._refunds.forget(key, woken)
        if not sleeping.done() or sleeping.cancelled():
            return loop.time() - started
        sleeping.result()  # a sleep that failed fails the call
        return delay

    async def _give_back(self, key: str, reserved: int, used: int, *, refund_request: bool = False) -> None:
        """Correct the reservation; when tokens or the request came back, the calls waiting on `key` try again."""
        await self.store.reconcile(key, reserved, used, refund_request=refund_request)
        if used < reserved or refund_request:
            self._refunds.wake(key)


class Tally:
    """How many refunds one key has had: counted while calls of that key wait (`holders` of them)."""

    __slots__ = ("count", "holders")

    def __init__(self) -> None:
        self.count = self.holders = 0


class Refunds:
    """The calls waiting for room under each key, woken when a call gives some back (from any thread's loop).

    A refund that comes while a call is asking the store wakes it too, so no
    refund is missed. Only this process's waiters are woken; waiters in other
    workers sharing the store try again when their own wait ends. Nothing is
    kept for a key no call is using (a layer keyed per user holds only the
    users with calls in flight).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiting: dict[str, list[asyncio.Future[None]]] = {}
        self._tallies: dict[str, Tally] = {}
        self.epoch = 0  # refunds of every key

    @contextlib.contextmanager
    def tally(self, key: str) -> Iterator[Tally]:
        """`key`'s refund count, kept up to date while inside (dropped when no call of `key` holds it)."""
        with self._lock:
            tally = self._tallies.get(key)
            if tally is None:
                tally = self._tallies[key] = Tally()
            tally.holders += 1
        try:
            yield tally
        finally:
            with self._lock:
                tally.holders -= 1
                if not tally.holders:
                    del self._tallies[key]

    def waiter(self, key: str, tally: Tally, seen: int) -> asyncio.Future[None]:
        """A future set by the next refund of `key`; set already if `tally` counted refunds since `seen`."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        with self._lock:
            if tally.count != seen:
                future.set_result(None)
            else:
                self._waiting.setdefault(key, []).append(future)
        return future

    def forget(self, key: str, future: asyncio.Future[None]) -> None:
        """Stop waking `future` (its wait ended); a key nobody waits on any more is dropped."""
        with self._lock:
            waiting = self._waiting.get(key)
            if waiting is not None and future in waiting:
                waiting.remove(future)
                if not waiting:
                    del self._waiting[key]

    def wake(self, key: str) -> None:
        with self._lock:
            self.epoch += 1
            tally = self._tallies.get(key)
            if tally is not None:
                tally.count += 1
            woken = self._waiting.pop(key, [])
        running = asyncio.get_running_loop()
        for future in woken:
            loop = future.get_loop()
            if loop is running:
                _set(future)
                continue
            with contextlib.suppress(RuntimeError):  # that loop is closed: nobody waits there any more
                loop.call_soon_threadsafe(_set, future)


def _set(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
