"""Your own retry layer, written with tenacity in a dozen lines, offline.

onion maps every provider error to a `ModelError` with `.retryable` and
`.retry_after`, so the layer needs no provider-specific code. It retries
only `Exception`s that say they are retryable: cancellation and onion's
control-flow signals (`BaseException`s) always pass through.

python examples/own_retry.py
"""

from __future__ import annotations

import asyncio

from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt, wait_random_exponential

from onion import Agent, Handler, ModelCall, ModelResponse
from onion.errors import ModelError, OverloadedError, RateLimitedError
from onion.testing import ScriptedModel

backoff = wait_random_exponential(multiplier=0.01, max=0.1)


def retryable(error: BaseException) -> bool:
    return isinstance(error, ModelError) and error.retryable


def wait(state: RetryCallState) -> float:
    """The provider's retry_after when it gave one (capped), else jittered exponential backoff."""
    error = state.outcome.exception() if state.outcome else None
    retry_after = getattr(error, "retry_after", None)
    return min(retry_after, 30.0) if retry_after is not None else backoff(state)


def report(state: RetryCallState) -> None:
    error = state.outcome.exception() if state.outcome else None
    print(f"  attempt {state.attempt_number} failed ({error!r}); retrying in {state.upcoming_sleep:.2f}s")


async def my_retry(call: ModelCall, call_next: Handler) -> ModelResponse:
    """Retry retryable model errors up to 4 attempts."""
    retrying = AsyncRetrying(
        retry=retry_if_exception(retryable), stop=stop_after_attempt(4), wait=wait, before_sleep=report, reraise=True
    )
    async for attempt in retrying:
        with attempt:
            response: ModelResponse = await call_next(call)
            return response
    raise AssertionError("unreachable: tenacity reraises the last error")


async def main() -> str:
    model = ScriptedModel(
        [OverloadedError("overloaded"), RateLimitedError("slow down", retry_after=0.05), "Hello after two retries."]
    )
    agent = Agent(model).use(my_retry)
    result = await agent.run("Say hello.")
    print(f"answer: {result.output}")
    print(f"model requests: {len(model.requests)}")
    return result.output


if __name__ == "__main__":
    asyncio.run(main())
