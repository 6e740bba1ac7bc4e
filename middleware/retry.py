"""`retry`: try a failed model (or opted-in tool) call again, with tenacity.

The decision lives in `RetryPolicy` (what is retried, how long to wait);
`retry` is the layer that runs tenacity's `AsyncRetrying` with it.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable, Collection
from typing import TYPE_CHECKING, Any

from onion import Handler, ModelCall, ModelResponse, ToolCall, ToolResult
from onion.errors import ModelError

if TYPE_CHECKING:
    from tenacity import AsyncRetrying, RetryCallState

ToolSelector = bool | Collection[str] | Callable[[ToolCall], bool]
"""Which tool calls are retried: all (`True`), none (`False`), these names, or a predicate."""


class RetryPolicy:
    """What is retried and how long to wait before the next attempt.

    Only `Exception`s are ever retried: `asyncio.CancelledError`,
    `KeyboardInterrupt`, `SystemExit` and onion's control-flow signals
    (all `BaseException`) pass straight through, and so does a `ModelError`
    whose `retryable` is false. Model calls: a retryable `ModelError`, or
    what `retry_on(error)` accepts. Tool calls: any other exception, or what
    `retry_on` accepts. The wait is the error's `retry_after` (capped at
    `max_retry_after`), else exponential backoff from `initial` doubling up
    to `max_backoff`, plus up to `jitter` seconds at random.
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
        if not isinstance(error, Exception) or (isinstance(error, ModelError) and not error.retryable):
            return False
        if self.retry_on is not None:
            return self.retry_on(error)
        return isinstance(error, ModelError)

    def retries_tool(self, error: BaseException) -> bool:
        """Whether a tool call that raised `error` is tried again."""
        if not isinstance(error, Exception) or (isinstance(error, ModelError) and not error.retryable):
            return False
        return True if self.retry_on is None else self.retry_on(error)

    def delay(self, state: RetryCallState) -> float:
        """Seconds to wait after the failed attempt described by `state` (tenacity's `wait`)."""
        error = state.outcome.exception() if state.outcome is not None else None
        retry_after = getattr(error, "retry_after", None)
        if isinstance(retry_after, (int, float)) and retry_after >= 0:
            return min(float(retry_after), self.max_retry_after)
        backoff: float = min(self.initial * 2.0 ** (state.attempt_number - 1), self.max_backoff)
        return backoff + random.uniform(0, self.jitter) if self.jitter else backoff


class retry:
    """Retry model calls that raise a retryable `ModelError`; tool calls when opted in.

    `attempts` counts the first try. `max_delay` bounds the total time spent
    (no sleep runs past it). `tools` opts tool calls in: `True`, names, or a
    predicate on the `ToolCall`. The remaining keywords configure the
    `RetryPolicy` (or pass your own as `policy`). Each retry adds 1 to
    `run.state["retries"]`. Put `timeout` inside `retry` to bound each
    attempt, outside to bound them all.
    """

    __slots__ = ("_model", "_tool", "attempts", "max_delay", "policy", "sleep", "tools", "wrap_only")

    def __init__(
        self,
        attempts: int = 3,
        *,
        tools: ToolSelector = False,
        max_delay: float | None = None,
        policy: RetryPolicy | None = None,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
        **policy_options: Any,
    ) -> None:
        if attempts < 1:
            raise ValueError(f"retry(attempts={attempts}): attempts counts the first try, so it must be at least 1")
        if policy is not None and policy_options:
            raise TypeError(f"retry: pass either policy= or {sorted(policy_options)}, not both")
        self.attempts, self.max_delay, self.tools, self.sleep = attempts, max_delay, tools, sleep
        self.wrap_only = ("model",) if tools is False else ("model", "tool")
        self.policy = policy if policy is not None else RetryPolicy(**policy_options)
        self._model = self._retrying(self.policy.retries_model)
        self._tool = self._retrying(self.policy.retries_tool)

    def _retrying(self, predicate: Callable[[BaseException], bool]) -> AsyncRetrying:
        from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt, stop_after_delay

        stop = stop_after_attempt(self.attempts)
        if self.max_delay is not None:
            stop = stop | stop_after_delay(self.max_delay)  # type: ignore[assignment]
        return AsyncRetrying(
            retry=retry_if_exception(predicate),
            wait=self._wait,
            stop=stop,
            sleep=self.sleep,
            before_sleep=_count,
            reraise=True,
        )

    def _wait(self, state: RetryCallState) -> float:
        delay = self.policy.delay(state)
        if self.max_delay is not None:
            delay = max(0.0, min(delay, self.max_delay - (time.monotonic() - state.start_time)))
        return delay

    async def wrap_model(self, call: ModelCall, call_next: Handler) -> ModelResponse:
        async for attempt in self._model.copy():
            with attempt:
                attempt.retry_state.kwargs = {"ctx": call}
                return await call_next(call)  # type: ignore[no-any-return]
        raise AssertionError("unreachable: tenacity reraises the last error")

    async def wrap_tool(self, call: ToolCall, call_next: Handler) -> ToolResult:
        if not self._selects(call):
            return await call_next(call)  # type: ignore[no-any-return]
        async for attempt in self._tool.copy():
            with attempt:
                attempt.retry_state.kwargs = {"ctx": call}
                return await call_next(call)  # type: ignore[no-any-return]
        raise AssertionError("unreachable: tenacity reraises the last error")

    def _selects(self, call: ToolCall) -> bool:
        tools = self.tools
        if isinstance(tools, bool):
            return tools
        if callable(tools):
            return bool(tools(call))
        return call.name in tools


def _count(state: RetryCallState) -> None:
    ctx = state.kwargs.get("ctx")
    if ctx is not None:
        run_state = ctx.run.state
        run_state["retries"] = run_state.get("retries", 0) + 1
