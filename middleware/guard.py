"""`guard`: validate the final answer; feed failures back and let the model try again."""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeAlias, TypeGuard, cast

from pydantic_core import ValidationError

from onion import Message, Run, RunNext, RunResult
from onion.errors import OnionError

if TYPE_CHECKING:
    from pydantic import BaseModel

__all__ = ["GuardFailed", "guard"]

Verdict = bool | str | None
Predicate = Callable[[str], Verdict | Awaitable[Verdict]]
Check: TypeAlias = "Predicate | type[BaseModel]"
_FENCE = re.compile(r"^\s*```[\w-]*\s*\n(.*?)\n?```\s*$", re.DOTALL)


class GuardFailed(OnionError):
    """The final answer still failed the check after every retry.

    `output` is the last answer, `reason` why it failed, `attempts` how many
    answers were checked; `messages` is the history (feedback included).
    """

    def __init__(self, message: str, *, output: str, reason: str, attempts: int, messages: list[Message]) -> None:
        super().__init__(message)
        self.output = output
        self.reason = reason
        self.attempts = attempts
        self.messages = messages


class guard:
    """Check the run's final answer; on failure tell the model why and let it answer again.

    `check` is either a predicate on the answer text (sync or async), which
    passes by returning `True` or `None` and fails by returning `False`, a
    reason `str`, or raising an `Exception` (its message is the reason); or a
    pydantic model class: the answer (optionally inside a Markdown code fence)
    must parse as JSON into it.

    On failure the reason is injected as a user message (`feedback`, a format
    string with `{reason}`) and the conversation continues, up to `retries`
    more answers; then `GuardFailed` is raised. On success the accepted value
    (the model instance, or the answer text for a predicate) is stored in
    `run.state[key]` (default `"guard"`), so `result.state["guard"]`. Every
    retry is a model call and counts against `max_steps`. Not usable bare.
    With `output_type`, `check` gets the final answer's text, after the type
    validated it (prefer `output_type` to `guard(Model)`: docs/output.md).
    """

    __slots__ = ("check", "feedback", "key", "model", "predicate", "retries", "schema")

    def __init__(
        self,
        check: Check | None = None,
        retries: int = 2,
        *,
        feedback: str = "Your answer was rejected: {reason}\nAnswer again, fixing this.",
        key: str = "guard",
    ) -> None:
        if check is None:
            raise TypeError(
                "guard needs a check: guard(predicate) with a function of the answer text returning "
                "bool or a reason, or guard(MyModel) with a pydantic model the answer must parse into"
            )
        if not callable(check):
            raise TypeError(f"guard: check must be a callable or a pydantic model class, got {check!r}")
        if not isinstance(retries, int) or retries < 0:
            raise ValueError(f"guard: retries must be a non-negative int, got {retries!r}")
        self.check = check
        self.retries = retries
        self.feedback = feedback
        self.key = key
        self.model: type[BaseModel] | None = None
        self.predicate: Predicate | None = None
        self.schema: str | None = None
        if _is_model(check):
            self.model = check
            self.schema = json.dumps(check.model_json_schema())
        else:
            self.predicate = cast(Predicate, check)

    @property
    def name(self) -> str:
        return f"guard({getattr(self.check, '__name__', type(self.check).__name__)})"

    async def verdict(self, output: str) -> tuple[str | None, Any]:
        """`(None, accepted value)` when `output` passes, else `(reason, None)`."""
        if self.model is not None:
            fenced = _FENCE.match(output)
            try:
                return None, self.model.model_validate_json(fenced.group(1) if fenced else output)
            except ValidationError as error:
                problems = "; ".join(
                    f"{'.'.join(map(str, e['loc'])) or 'answer'}: {e['msg']}" for e in error.errors(include_url=False)
                )
                return f"it is not JSON matching the schema {self.schema} ({problems})", None
        assert self.predicate is not None
        try:
            passed = self.predicate(output)
            if inspect.isawaitable(passed):
                passed = await passed
        except Exception as error:
            return str(error) or type(error).__name__, None
        if passed is True or passed is None:
            return None, output
        if isinstance(passed, str) and passed:
            return passed, None
        return f"it failed the check {self.name}", None

    async def wrap_run(self, run: Run, call_next: RunNext) -> RunResult:
        result = await call_next(run)
        attempts = 1
        while True:
            text = result.output if isinstance(result.output, str) else result.messages[-1].text
            reason, value = await self.verdict(text)
            if reason is None:
                run.state[self.key] = value
                return result
            if attempts > self.retries:
                raise GuardFailed(
                    f"the final answer failed {self.name} after {attempts} attempts: {reason}",
                    output=text,
                    reason=reason,
                    attempts=attempts,
                    messages=run.messages,
                )
            run.inject(Message.user(self.feedback.format(reason=reason)))
            result = await call_next(run)
            attempts += 1


def _is_model(check: object) -> TypeGuard[type[BaseModel]]:
    """Whether `check` is a pydantic model class; pydantic's model machinery loads only for a class."""
    if not isinstance(check, type):
        return False
    from pydantic import BaseModel

    return issubclass(check, BaseModel)
