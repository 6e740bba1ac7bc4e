"""`fallback`: the next model answers when a call fails retryably."""

from __future__ import annotations

import pytest

from middleware import fallback, retry
from onion import Agent, Handler, ModelCall, ModelResponse
from onion.errors import AuthenticationError, OverloadedError, ServerError
from onion.testing import ScriptedModel


def test_bare_fallback_raises_type_error_asking_for_models() -> None:
    with pytest.raises(TypeError, match="needs the models"):
        Agent(ScriptedModel(["x"])).use(fallback)


def test_a_bad_model_string_is_rejected_when_configured() -> None:
    with pytest.raises(ValueError, match="unknown model string"):
        fallback("nosuchprovider:model")


async def test_the_next_model_answers_after_a_retryable_failure_and_is_recorded() -> None:
    primary = ScriptedModel([OverloadedError("busy")], name="primary")
    backup = ScriptedModel(["from backup"], name="backup")
    result = await Agent(primary).use(fallback(backup)).run("hi")
    assert result.output == "from backup"
    assert result.state["fallback"] == {"model": "backup", "failed": ["primary"]}
    assert len(backup.requests) == 1


async def test_the_primary_answering_is_recorded_too() -> None:
    result = await Agent(ScriptedModel(["ok"], name="primary")).use(fallback(ScriptedModel([]))).run("hi")
    assert result.state["fallback"] == {"model": "primary", "failed": []}


async def test_models_are_tried_in_order_and_the_last_error_propagates() -> None:
    models = [ScriptedModel([ServerError(f"down {n}")], name=n) for n in ("a", "b", "c")]
    with pytest.raises(ServerError, match="down c"):
        await Agent(models[0]).use(fallback(models[1], models[2])).run("hi")
    assert [len(m.requests) for m in models] == [1, 1, 1]


async def test_a_non_retryable_error_propagates_without_falling_back() -> None:
    backup = ScriptedModel(["never"])
    with pytest.raises(AuthenticationError):
        await Agent(ScriptedModel([AuthenticationError("bad key")])).use(fallback(backup)).run("hi")
    assert backup.requests == []


async def test_when_chooses_the_errors_that_fall_back() -> None:
    backup = ScriptedModel(["rescued"], name="backup")
    layer = fallback(backup, when=lambda error: isinstance(error, AuthenticationError))
    result = await Agent(ScriptedModel([AuthenticationError("bad key")])).use(layer).run("hi")
    assert result.output == "rescued"


async def test_the_response_names_the_model_that_answered() -> None:
    seen: list[str | None] = []

    async def spy(ctx: ModelCall, call_next: Handler) -> ModelResponse:
        response: ModelResponse = await call_next(ctx)
        seen.append(response.model)
        return response

    backup = ScriptedModel(["ok"], name="backup")
    await Agent(ScriptedModel([ServerError("x")])).use(spy, fallback(backup)).run("hi")
    assert seen == ["backup"]


async def test_fallback_outside_retry_retries_each_model_before_moving_on() -> None:
    primary = ScriptedModel([ServerError("1"), ServerError("2")], name="primary")
    backup = ScriptedModel(["ok"], name="backup")
    agent = Agent(primary).use(fallback(backup), retry(2, initial=0.001, jitter=0))
    assert (await agent.run("hi")).output == "ok"
    assert len(primary.requests) == 2


async def test_inside_retry_each_attempt_starts_over_from_the_primary() -> None:
    """retry -> fallback: after every model failed, the next attempt asks the primary again."""
    primary = ScriptedModel([ServerError("p1"), "primary ok"], name="primary")
    backup = ScriptedModel([ServerError("b1")], name="backup")
    agent = Agent(primary).use(retry(attempts=2, initial=0, jitter=0), fallback(backup))
    result = await agent.run("hi")
    assert result.output == "primary ok"
    assert (len(primary.requests), len(backup.requests)) == (2, 1)
    assert result.state["fallback"] == {"model": "primary", "failed": []}
