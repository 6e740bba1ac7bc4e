"""`guard`: a final answer failing its check is fed back, then `GuardFailed`."""

from __future__ import annotations

import subprocess
import sys

import pydantic
import pytest

from middleware import guard
from middleware.guard import GuardFailed
from onion import Agent, OnionError, check_history, tool
from onion.testing import ScriptedModel, call


class Answer(pydantic.BaseModel):
    city: str
    population: int


def short(text: str) -> bool:
    return len(text) < 10


def test_bare_guard_raises_type_error_asking_for_a_check() -> None:
    with pytest.raises(TypeError, match="guard needs a check"):
        Agent(ScriptedModel(["x"])).use(guard)


def test_non_callable_check_and_negative_retries_are_rejected() -> None:
    with pytest.raises(TypeError, match="must be a callable"):
        guard("not a check")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="retries"):
        guard(short, retries=-1)


async def test_passing_answer_is_returned_untouched_and_stored_in_state() -> None:
    model = ScriptedModel(["ok"])
    result = await Agent(model).use(guard(short)).run("q")
    assert result.output == "ok"
    assert result.state["guard"] == "ok"
    assert len(model.requests) == 1


async def test_failing_answer_is_fed_back_and_the_model_tries_again() -> None:
    model = ScriptedModel(["far too long an answer", "short"])
    result = await Agent(model).use(guard(short)).run("q")
    assert result.output == "short"
    feedback = model.requests[1].messages[-1]
    assert feedback.role == "user"
    assert feedback.text.startswith("Your answer was rejected: it failed the check guard(short)")
    assert [m.role for m in result.messages] == ["user", "assistant", "user", "assistant"]
    check_history(result.messages)


async def test_reason_from_a_returned_string_or_a_raised_exception_is_fed_back() -> None:
    def no_digits(text: str) -> str | None:
        return "no digits please" if any(c.isdigit() for c in text) else None

    def no_shouting(text: str) -> None:
        if text.isupper():
            raise ValueError("do not shout")

    model = ScriptedModel(["42", "YES", "fine"])
    result = await Agent(model).use(guard(no_digits), guard(no_shouting)).run("q")
    assert result.output == "fine"
    assert "no digits please" in model.requests[1].messages[-1].text
    assert "do not shout" in model.requests[2].messages[-1].text


async def test_async_predicates_are_awaited() -> None:
    async def polite(text: str) -> bool:
        return "please" in text

    result = await Agent(ScriptedModel(["no", "yes please"])).use(guard(polite)).run("q")
    assert result.output == "yes please"


async def test_guard_failed_after_retries_carries_output_reason_and_valid_history() -> None:
    model = ScriptedModel(["one long answer", "two long answer", "three long answer", "unused"])
    with pytest.raises(GuardFailed, match="after 3 attempts") as caught:
        await Agent(model).use(guard(short, retries=2)).run("q")
    error = caught.value
    assert isinstance(error, OnionError)
    assert (error.output, error.attempts) == ("three long answer", 3)
    assert error.reason == "it failed the check guard(short)"
    check_history(error.messages)
    assert model.remaining == 1


async def test_retries_zero_fails_at_the_first_bad_answer() -> None:
    with pytest.raises(GuardFailed):
        await Agent(ScriptedModel(["too long an answer"])).use(guard(short, retries=0)).run("q")


async def test_pydantic_model_parses_the_answer_and_stores_the_value() -> None:
    model = ScriptedModel(['{"city": "Oslo"}', '```json\n{"city": "Oslo", "population": 700000}\n```'])
    result = await Agent(model).use(guard(Answer)).run("q")
    assert result.state["guard"] == Answer(city="Oslo", population=700000)
    feedback = model.requests[1].messages[-1].text
    assert "population: Field required" in feedback
    assert '"required": ["city", "population"]' in feedback


async def test_non_json_answer_fails_a_pydantic_guard() -> None:
    with pytest.raises(GuardFailed, match="not JSON matching the schema"):
        await Agent(ScriptedModel(["Oslo"])).use(guard(Answer, retries=0)).run("q")


async def test_retried_answers_may_use_tools_and_the_history_stays_valid() -> None:
    @tool
    def population(city: str) -> int:
        """Population of a city."""
        return 700000

    model = ScriptedModel(["Oslo is big", [call("population", city="Oslo")], '{"city": "Oslo", "population": 700000}'])
    result = await Agent(model, tools=[population]).use(guard(Answer, feedback="Bad: {reason}")).run("q")
    assert result.state["guard"].population == 700000
    assert model.requests[1].messages[-1].text.startswith("Bad: it is not JSON")
    check_history(result.messages)


async def test_custom_state_key() -> None:
    result = await Agent(ScriptedModel(["ok"])).use(guard(short, key="checked")).run("q")
    assert result.state["checked"] == "ok"


def test_importing_the_library_leaves_pydantic_models_and_tenacity_unloaded() -> None:
    """`import middleware` pays for neither until a model guard or a retry layer is built."""
    code = (
        "import sys, middleware\n"
        "assert 'pydantic.main' not in sys.modules and 'tenacity' not in sys.modules, sys.modules.keys()\n"
        "middleware.retry()\n"
        "assert 'tenacity' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


async def test_a_guard_predicate_checks_the_text_of_a_typed_answer() -> None:
    """With output_type, guard's predicate reads the answer's JSON text; the typed value stays in result.output."""
    from pydantic import BaseModel

    class Point(BaseModel):
        x: int

    seen: list[str] = []

    def small(text: str) -> bool | str:
        seen.append(text)
        return '"x":1' in text.replace(" ", "") or "x must be 1"

    model = ScriptedModel(['{"x": 2}', '{"x": 1}'])
    result = await Agent(model, output_type=Point).use(guard(small)).run("q")
    assert result.output == Point(x=1)
    assert seen == ['{"x": 2}', '{"x": 1}']
