"""`retry`: try a failed model (or opted-in tool) call again, with tenacity.

The decision lives in `RetryPolicy` (what is retried, how long to wait);
`retry` is the layer that runs tenacity's `AsyncRetrying` with it.
"""

from __future__ import annotations

import asyncio
import types
from collections.abc import Awaitable, Callable, Collection
from typing import TYPE_CHECKING, Any

from onion import ModelCall, ModelNext, ModelResponse, ToolCall, ToolNext, ToolResult, clock
from onion.errors import ModelError
from onion.tracing import waited

from .attempts import retried

if TYPE_CHECKING:
    from tenacity import AsyncRetrying, RetryCallState

ToolSelector = bool | Collection[str] | Callable[[ToolCall], bool]
"""Which tool calls are retried: all (`True`), none (`False`), these names, or a predicate."""


class RetryPolicy:
    """What is retried and how long to wait before the next attempt.

    Only `Exception`s are ever retried: `asyncio.CancelledError`,
    `KeyboardInterrupt`, `SystemExit` and onion's control-flow signals
    (all `BaseException`) pass straight through, and so does any error
    whose `retryable` is false (a `ModelError` so marked,
    `onion.errors.ToolAborted`), and an error whose `retry_after` asks for a
    longer wait than `max_retry_after` (nothing is sent before the provider
    allows it). Model calls: a retryable `ModelError`, or what
    `retry_on(error)` accepts. Tool calls: any other exception, or what
    `retry_on` accepts. The wait is the error's `retry_after`, else
    exponential backoff from `initial` doubling up to `max_backoff`, plus up
    to `jitter` seconds at random (`onion.clock.random`: a workflow's own
    draws inside Temporal).
    """

    __slots__ = ("initial", "jitter", "max_backoff", "max_retry_after", "retry_on")

    def __init__(
        self,
        *,
        retry_on: Callable[[Exception], bool] | None = None,
        initial: float = 0.5,
        max_backoff: float = 8.0,
        jitter: float = 0.5,
        max_retry_after: float = 60.0,
    ) -> None:
        self.retry_on = retry_on
        self.initial, self.max_backoff, self.jitter = initial, max_backoff, jitter
        self.max_retry_after = max_retry_after

    def retries_model(self, error: BaseException) -> bool:
        """Whether a model call that raised `error` is tried again."""
        if not isinstance(error, Exception) or not self._may_retry(error):
            return False
        if self.retry_on is not None:
            return self.retry_on(error)
        return isinstance(error, ModelError)

    def retries_tool(self, error: BaseException) -> bool:
        """Whether a tool call that raised `error` is tried again."""
        if not isinstance(error, Exception) or not self._may_retry(error):
            return False
        return True if self.retry_on is None else self.retry_on(error)

    def _may_retry(self, error: Exception) -> bool:
        """False for an error marked not retryable, or one asking to wait past `max_retry_after`."""
        if getattr(error, "retryable", True) is False:
            return False
        asked = retry_after(error)
        return asked is None or asked <= self.max_retry_after

    def delay(self, state: RetryCallState) -> float:
        """Seconds to wait after the failed attempt described by `state` (tenacity's `wait`)."""
        asked = retry_after(_error(state))
        if asked is not None:
            return asked
        backoff: float = min(self.initial * 2.0 ** (state.attempt_number - 1), self.max_backoff)
        return backoff + clock.random() * self.jitter if self.jitter else backoff


class retry:
    """Retry model calls that raise a retryable `ModelError`; tool calls when opted in.

    `attempts` counts the first try. `max_delay` bounds the total time spent
    (measured on `clock`, by default `onion.clock.monotonic`: a workflow's
    time inside Temporal): a backoff is cut short at it, and when the
    provider's `retry_after` would run past it the error is raised at once
    (never sent early). `tools` opts tool calls in: `True`, names, or a
    predicate on the `ToolCall`. The remaining keywords configure the
    `RetryPolicy` (or pass your own as `policy`). `sleep` and `clock` are
    swapped in tests. Each retry adds 1 to the run's count (kept in
    `run.private`, where a caller's `state=` cannot set it), reported in
    `run.state["retries"]`, and tells a `log` outside what failed
    (`middleware.attempts`). Put `timeout`
    inside `retry` to bound each attempt, outside to bound them all.
    """

    __slots__ = ("_model", "_tool", "attempts", "clock", "max_delay", "policy", "sleep", "tools", "wrap_only")

    def __init__(
        self,
        attempts: int = 3,
        *,
        tools: ToolSelector = False,
        max_delay: float | None = None,
        policy: RetryPolicy | None = None,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
        clock: Callable[[], float] = clock.monotonic,
        **policy_options: Any,
    ) -> None:
        if attempts < 1:
            raise ValueError(f"retry(attempts={attempts}): attempts counts the first try, so it must be at least 1")
        if policy is not None and policy_options:
            raise TypeError(f"retry: pass either policy= or {sorted(policy_options)}, not both")
        self.attempts, self.max_delay, self.tools, self.sleep, self.clock = attempts, max_delay, tools, sleep, clock
        self.wrap_only = ("model",) if tools is False else ("model", "tool")
        self.policy = policy if policy is not None else RetryPolicy(**policy_options)
        self._model = self._retrying(self.policy.retries_model)
        self._tool = self._retrying(self.policy.retries_tool)

    def _retrying(self, predicate: Callable[[BaseException], bool]) -> AsyncRetrying:
        from tenacity import AsyncRetrying, retry_if_exception

        return AsyncRetrying(
            retry=retry_if_exception(predicate),
            wait=self._wait,
            stop=self._stop,
            sleep=self.sleep,
            before_sleep=_count,
            reraise=True,
        )

    def _wait(self, state: RetryCallState) -> float:
        delay = self.policy.delay(state)
        if self.max_delay is None or retry_after(_error(state)) is not None:
            return delay
        return max(0.0, min(delay, self.max_delay - self._elapsed(state)))

    def _stop(self, state: RetryCallState) -> bool:
        """Whether to give up now (tenacity's `stop`; runs after `_wait` has set `upcoming_sleep`)."""
        if state.attempt_number >= self.attempts:
            return True
        if self.max_delay is None:
            return False
        left = self.max_delay - self._elapsed(state)
        return left <= 0 or (retry_after(_error(state)) is not None and state.upcoming_sleep > left)

    def _elapsed(self, state: RetryCallState) -> float:
        """Seconds since the first attempt, on `clock`."""
        started: float = state.kwargs["started"]
        return self.clock() - started

    async def wrap_model(self, call: ModelCall, call_next: ModelNext) -> ModelResponse:
        started = self.clock()
        async for attempt in _per_call(self._model):
            with attempt:
                attempt.retry_state.kwargs = {"ctx": call, "started": started}
                return await call_next(call)
        raise AssertionError("unreachable: tenacity reraises the last error")

    async def wrap_tool(self, call: ToolCall, call_next: ToolNext) -> ToolResult:
        if not self._selects(call):
            return await call_next(call)
        started = self.clock()
        async for attempt in _per_call(self._tool):
            with attempt:
                attempt.retry_state.kwargs = {"ctx": call, "started": started}
                return await call_next(call)
        raise AssertionError("unreachable: tenacity reraises the last error")

    def _selects(self, call: ToolCall) -> bool:
        tools = self.tools
        if isinstance(tools, bool):
            return tools
        if callable(tools):
            return bool(tools(call))
        return call.name in tools


def _per_call(retrying: AsyncRetrying) -> AsyncRetrying:
    """A copy of `retrying` for one call, its state kept on the copy: tenacity keeps it per thread
    (`threading.local`), and a call may go on in another thread (a Temporal worker resumes a workflow on any of
    its threads: the attempt's state was gone, `KeyError: 'idle_for'`)."""
    copy = retrying.copy()
    copy._local = types.SimpleNamespace()  # type: ignore[assignment]
    return copy


def retry_after(error: BaseException | None) -> float | None:
    """The wait in seconds that `error` asks for (its `retry_after`), or None."""
    asked = getattr(error, "retry_after", None)
    return float(asked) if isinstance(asked, (int, float)) and asked >= 0 else None


def _error(state: RetryCallState) -> BaseException | None:
    return state.outcome.exception() if state.outcome is not None else None


def _count(state: RetryCallState) -> None:
    waited(state.upcoming_sleep)
    ctx = state.kwargs.get("ctx")
    if ctx is not None:
        error = _error(state)
        if error is not None:
            retried(ctx, error)
        run = ctx.run
        private = run.private
        private["retry"] = run.state["retries"] = private.get("retry", 0) + 1
