"""`fallback`: when a model call fails retryably, ask the next model."""

from __future__ import annotations

from collections.abc import Callable

from onion import Model, ModelCall, ModelNext, ModelResponse, resolve_model
from onion.errors import ModelError


def retryable(error: Exception) -> bool:
    """The default trigger: a `ModelError` whose `retryable` is true."""
    return isinstance(error, ModelError) and error.retryable


class fallback:
    """Try `models` in order after the agent's own model fails.

    A failure that `when(error)` accepts (default: a retryable
    `ModelError`) moves on to the next model, by setting `call.model` and
    calling the rest of the stack again, so layers inside `fallback` run once
    per model; anything else propagates at once. When every model failed,
    the last error propagates. Models are `onion.Model` objects or model
    strings (resolved now). The response's `model` names the model that
    answered, and `run.state["fallback"]` holds `{"model": name, "failed":
    [names that failed]}` for the latest model call. Not usable bare.
    """

    __slots__ = ("models", "when")

    def __init__(self, *models: Model | str, when: Callable[[Exception], bool] = retryable) -> None:
        if not models:
            raise TypeError(
                "fallback needs the models to fall back to, e.g. "
                "agent.use(fallback('openai:gpt-5.4-mini')); it cannot be used bare"
            )
        self.models: tuple[Model, ...] = tuple(resolve_model(model) for model in models)
        self.when = when

    async def wrap_model(self, call: ModelCall, call_next: ModelNext) -> ModelResponse:
        failed: list[str] = []
        primary = call.model
        for model in (primary, *self.models):
            call.model = model
            try:
                response = await call_next(call)
            except BaseException as error:
                if model is self.models[-1] or not isinstance(error, Exception) or not self.when(error):
                    call.model = primary  # a retry outside starts over from the primary
                    raise
                failed.append(_name(model))
                continue
            name = _name(call.model)
            if response.model is None:
                response.model = name
            call.run.state["fallback"] = {"model": name, "failed": failed}
            return response
        raise AssertionError("unreachable: the last model's error propagates")


def _name(model: Model) -> str:
    return str(getattr(model, "name", model))
