"""`tripwire`: a check on the run's input, run alongside its first model call, that can stop the run."""

from __future__ import annotations

import asyncio
import inspect
import weakref
from collections.abc import Awaitable, Callable
from typing import Any

from onion import Message, ModelCall, ModelNext, ModelResponse, OnionError, Run, StreamReset, Usage

__all__ = ["TripwireTriggered", "tripwire"]

Check = Callable[[Run], "bool | Awaitable[bool]"]


class TripwireTriggered(OnionError):
    """A `tripwire` check tripped: the run stopped before any tool ran.

    `check` names the check; `messages` is the history (the first model
    call's answer, if one came, is not in it); `usage` the run's usage so far.
    """

    retryable = False

    def __init__(self, message: str, *, check: str, messages: list[Message], usage: Usage) -> None:
        super().__init__(message)
        self.check = check
        self.messages = messages
        self.usage = usage


class tripwire:
    """Run `check(run)` (true trips it) alongside the run's first model call.

    An async check runs concurrently with the model call, so a passing check
    costs no latency beyond the slower of the two. If it trips while the
    model call is in flight, the call is cancelled (its HTTP request closed)
    and `TripwireTriggered` raised. A model answer that arrives first waits
    for the check, so no tool runs before it passed. A sync check runs before
    the model call (keep it quick: a regex, a word list). An exception from
    the check propagates and stops the run the same way (fail closed); a
    failed model call waits for the check, then raises its own error.

    On a streamed run, what the model streams while the check decides is
    held back (`ModelCall.edit_stream`): a trip shows the consumer none of
    it; once the check passed, the held events go on with the next one (or
    the answer is shown whole when the call finishes).

    Only the run's first model call is checked (`run.steps == 1`): a resumed
    run is not checked again. A `retry` outside this layer reuses the check
    already under way. Not usable bare: it needs a check.
    """

    __slots__ = ("_checks", "check", "name")

    def __init__(self, check: Check | None = None, *, name: str | None = None) -> None:
        if check is None or not callable(check):
            raise TypeError(
                "tripwire needs a check: tripwire(fn) with fn(run) -> bool (or an async function), "
                f"true when the input must be stopped; got {check!r}"
            )
        self.check = check
        self.name: str = name or str(getattr(check, "__name__", type(check).__name__))
        self._checks: weakref.WeakKeyDictionary[Run, asyncio.Future[bool]] = weakref.WeakKeyDictionary()

    async def wrap_model(self, call: ModelCall, call_next: ModelNext) -> ModelResponse:
        run = call.run
        if run.steps != 1:
            response = await call_next(call)
            return response
        verdict = self._checks.get(run)
        if verdict is None or verdict.cancelled():  # a check cancelled with an earlier attempt starts again
            outcome = self.check(run)
            if not inspect.isawaitable(outcome):
                self._decide(run, outcome)
                response = await call_next(call)
                return response
            verdict = self._checks[run] = asyncio.ensure_future(outcome)
        if verdict.done():
            self._decide(run, verdict.result())
            response = await call_next(call)
            return response
        with call.edit_stream(HeldUntilPassed(verdict)):
            answer: asyncio.Task[ModelResponse] = asyncio.ensure_future(call_next(call))
            try:
                self._decide(run, await verdict)
                return await answer
            finally:
                for pending in (answer, verdict):
                    if not pending.done():
                        pending.cancel()
                await asyncio.gather(answer, verdict, return_exceptions=True)

    def _decide(self, run: Run, tripped: object) -> None:
        if not isinstance(tripped, bool):
            raise TypeError(f"tripwire({self.name}): the check must return a bool, got {tripped!r:.60}")
        if tripped:
            raise TripwireTriggered(
                f"tripwire {self.name} tripped on the input of run {run.id}",
                check=self.name,
                messages=run.messages,
                usage=run.usage,
            )

    def __repr__(self) -> str:
        return f"tripwire({self.name})"


class HeldUntilPassed:
    """A stream edit: events held back until the check has passed, then sent on with the next one.

    At the end of the model's stream it sends what it holds if the check
    passed, and keeps it otherwise: a tripped call shows nothing, and a call
    whose check passes later is shown whole when it finishes.
    """

    __slots__ = ("held", "verdict")

    def __init__(self, verdict: asyncio.Future[bool]) -> None:
        self.verdict = verdict
        self.held: list[Any] = []

    def __call__(self, event: Any) -> list[Any]:
        if isinstance(event, StreamReset):
            self.held.clear()
            return [event]
        self.held.append(event)
        return self.end()

    def end(self) -> list[Any]:
        if not self.passed():
            return []
        held, self.held = self.held, []
        return held

    def passed(self) -> bool:
        verdict = self.verdict
        return verdict.done() and not verdict.cancelled() and verdict.exception() is None and verdict.result() is False
