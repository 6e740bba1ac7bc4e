"""`budget`: tokens and cost checked after every model call."""

from __future__ import annotations

import pytest

from middleware import approve, budget, cache
from middleware.budget import PRICES, BudgetExceeded
from onion import (
    Agent,
    Handler,
    Message,
    ModelResponse,
    OnionError,
    RunState,
    ToolCall,
    ToolNext,
    ToolResult,
    Usage,
    check_history,
    tool,
)
from onion.stores import MemoryStore
from onion.testing import ScriptedModel, call


@tool
def step(n: int) -> str:
    """One step."""
    return f"step {n}"


def response(text: str | None, usage: Usage, model: str = "gpt-4o-mini", tool_call: bool = False) -> ModelResponse:
    message = Message.assistant("", [call("step", n=1)]) if tool_call else Message.assistant(text or "")
    return ModelResponse(message, usage, model=model)


def scripted(items: list[ModelResponse], name: str = "gpt-4o-mini") -> ScriptedModel:
    """A scripted model named as a priced model (budget checks the model's price before its first call)."""
    return ScriptedModel(items, name=name)


def test_bare_budget_raises_type_error_asking_for_a_limit() -> None:
    with pytest.raises(TypeError, match="max_tokens=100_000"):
        Agent(ScriptedModel(["x"])).use(budget)


async def test_going_over_max_tokens_raises_budget_exceeded_with_the_runs_usage() -> None:
    model = ScriptedModel([response(None, Usage(60, 10, 1), tool_call=True), response("done", Usage(60, 10, 1))])
    with pytest.raises(BudgetExceeded) as caught:
        await Agent(model, tools=[step]).use(budget(max_tokens=100)).run("hi")
    error = caught.value
    assert isinstance(error, OnionError)
    assert error.usage == Usage(120, 20, 2)
    assert "140 tokens > max_tokens=100" in str(error)


async def test_a_run_within_budget_finishes() -> None:
    model = ScriptedModel([response("done", Usage(60, 10, 1))])
    assert (await Agent(model).use(budget(max_tokens=100)).run("hi")).output == "done"


async def test_the_history_has_no_unanswered_tool_call_when_the_budget_stops_the_run() -> None:
    model = ScriptedModel([response(None, Usage(500, 10, 1), tool_call=True)])
    agent = Agent(model, tools=[step]).use(budget(max_tokens=100))
    with pytest.raises(BudgetExceeded):
        await agent.run("hi")
    assert check_history(model.requests[0].messages) is None


async def test_cost_is_priced_per_million_tokens_and_over_max_cost_raises() -> None:
    input_price, output_price = PRICES["gpt-4o-mini"]
    usage = Usage(1_000_000, 1_000_000, 1)
    with pytest.raises(BudgetExceeded) as caught:
        await Agent(scripted([response("x", usage)])).use(budget(max_cost=0.5)).run("hi")
    assert caught.value.cost == pytest.approx(input_price + output_price)
    result = await Agent(scripted([response("x", usage)])).use(budget(max_cost=1.0)).run("hi")
    assert result.state["cost"] == pytest.approx(0.75)


def test_the_longest_matching_price_prefix_wins_and_provider_prefixes_are_ignored() -> None:
    layer = budget(max_cost=1, prices={"my-model": (1.0, 2.0)})
    assert layer.price("openai:gpt-4o-mini-2024-07-18") == PRICES["gpt-4o-mini"]
    assert layer.price("gpt-4o-2024-08-06") == PRICES["gpt-4o"]
    assert layer.price("claude-opus-4-5-20251101") == PRICES["claude-opus-4-5"]
    assert layer.price("my-model-v2") == (1.0, 2.0)


async def test_a_model_without_a_price_raises_naming_it_before_its_first_call_is_sent() -> None:
    model = ScriptedModel([response("x", Usage(10, 10, 1), model="mystery-9")], name="mystery-9")
    with pytest.raises(OnionError, match=r"no price for model 'mystery-9'; pass budget\(prices=\{'mystery-9'"):
        await Agent(model).use(budget(max_cost=1)).run("hi")
    assert model.requests == []


async def test_a_response_from_a_model_without_a_price_raises_naming_it() -> None:
    """A model whose responses name another, unpriced model (a layer inside switched it) is an error when charged."""
    model = scripted([response("x", Usage(10, 10, 1), model="mystery-9")])
    with pytest.raises(OnionError, match="no price for model 'mystery-9'"):
        await Agent(model).use(budget(max_cost=1)).run("hi")


async def test_cache_hits_cost_nothing() -> None:
    layer = cache()
    usage = Usage(400_000, 100_000, 1)
    await Agent(scripted([response("x", usage)])).use(budget(max_cost=1), layer).run("hi")
    result = await Agent(scripted([])).use(budget(max_cost=0.0001), layer).run("hi")
    assert result.output == "x" and result.state.get("cost", 0.0) == 0.0


async def test_responses_that_a_layer_inside_retry_rejects_are_charged_and_stop_the_run() -> None:
    """Each rejected attempt costs $0.15: the second goes over $0.20 and the third is never sent."""
    from middleware import retry
    from onion import ModelCall
    from onion.errors import ResponseFormatError

    async def reject(ctx: ModelCall, call_next: Handler) -> ModelResponse:
        await call_next(ctx)
        raise ResponseFormatError("the answer is not valid JSON")

    async def no_wait(seconds: float) -> None:
        return None

    usage = Usage(200_000, 200_000, 1)
    model = scripted([response("x", usage), response("y", usage), response("z", usage)])
    agent = Agent(model, middleware=[budget(max_cost=0.20), retry(attempts=3, sleep=no_wait), reject])
    with pytest.raises(BudgetExceeded) as caught:
        await agent.run("hi")
    assert caught.value.cost == pytest.approx(0.30)
    assert caught.value.usage == Usage(400_000, 400_000, 2)
    assert len(model.requests) == 2


async def test_a_response_a_layer_inside_makes_itself_is_charged_once() -> None:
    """A layer that answers without the model (with usage it reports) is charged, and only once."""
    from onion import ModelCall

    async def answer_myself(ctx: ModelCall, call_next: Handler) -> ModelResponse:
        return response("mine", Usage(1_000_000, 0, 1))

    result = await Agent(scripted([]), middleware=[budget(max_cost=1.0), answer_myself]).run("hi")
    assert result.state["cost"] == pytest.approx(0.15)
    assert result.usage == Usage(1_000_000, 0, 1)


async def test_cache_reads_and_writes_are_priced_at_the_models_cache_rates() -> None:
    """Claude: reads at a tenth of the input price, writes at 1.25 times; a 4-tuple price sets both rates."""
    usage = Usage(input_tokens=3_000_000, output_tokens=0, requests=1, cached_input_tokens=1_000_000)
    usage.cache_write_tokens = 1_000_000
    claude = [response("x", usage, model="claude-sonnet-4-5")]
    result = await Agent(scripted(claude, "claude-sonnet-4-5")).use(budget(max_cost=100)).run("hi")
    assert result.state["cost"] == pytest.approx(3.0 + 0.3 + 3.75)
    custom = budget(max_cost=100, prices={"my-model": (1.0, 2.0, 0.5, 4.0)})
    assert custom.cost("my-model", usage) == pytest.approx(1.0 + 0.5 + 4.0)
    assert budget(max_cost=1).cost("gpt-4o", Usage(2_000_000, 0, 1, 1_000_000)) == pytest.approx(2.5 + 1.25)


class Crash(BaseException):
    """Stands in for the worker dying: nothing in the run catches it."""


async def crash_after_step(call_: ToolCall, call_next: ToolNext) -> ToolResult:
    """The worker dies right after `step` ran, before its result is recorded."""
    result = await call_next(call_)
    if call_.name == "step":
        raise Crash
    return result


def sixty_cents(tool_call: bool) -> ModelResponse:
    """A response costing $0.60 at the "priced" model's (1.0, 1.0) USD per million tokens."""
    return response("done", Usage(600_000, 0, 1), model="priced", tool_call=tool_call)


PRICED = {"priced": (1.0, 1.0)}


async def test_the_cost_lives_in_run_private_and_survives_a_pause_resumed_from_json() -> None:
    """$0.60 spent before the pause still counts after `RunState` went through JSON: the next $0.60 goes over $1."""
    model = scripted([sixty_cents(tool_call=True), sixty_cents(tool_call=False)], "priced")
    spend = budget(max_cost=1.0, prices=PRICED)
    agent = Agent(model, tools=[step]).use(spend, approve("step"))
    paused = await agent.run("hi")
    state = RunState.from_json(paused.to_state().to_json())
    assert state.private[spend.key] == pytest.approx(0.6) and paused.state["cost"] == pytest.approx(0.6)
    state.approve_all()
    with pytest.raises(BudgetExceeded) as over:
        await agent.resume(state)
    assert over.value.cost == pytest.approx(1.2)


async def test_the_cost_survives_a_crash_through_the_journal() -> None:
    """A worker dies after spending $0.60: recovered elsewhere, the next $0.60 goes over the $1 budget."""
    store = MemoryStore()
    model = scripted([sixty_cents(tool_call=True)], "priced")
    worker = Agent(model, tools=[step], store=store).use(budget(max_cost=1.0, prices=PRICED), crash_after_step)
    with pytest.raises(Crash):
        await worker.run("hi")
    (record,) = await store.runs()
    later = Agent(scripted([sixty_cents(tool_call=False)], "priced"), tools=[step], store=store)
    with pytest.raises(BudgetExceeded) as over:
        await later.use(budget(max_cost=1.0, prices=PRICED)).recover(record.run_id)
    assert over.value.cost == pytest.approx(1.2)


@pytest.mark.parametrize("per", ["run", "tenant"])
async def test_a_retry_outside_charges_each_attempt_once(per: str) -> None:
    """`retry` outside `budget` sends the same call through it again: each response is charged once, not once
    more for every earlier attempt (each attempt's $0.15 adds up to $0.30 after two)."""
    from middleware import retry
    from onion import ModelCall
    from onion.errors import ResponseFormatError

    attempts = 0

    async def reject_first(ctx: ModelCall, call_next: Handler) -> ModelResponse:
        nonlocal attempts
        attempts += 1
        answer = await call_next(ctx)
        if attempts == 1:
            raise ResponseFormatError("the answer is not valid JSON")
        return answer

    async def no_wait(seconds: float) -> None:
        return None

    usage = Usage(200_000, 200_000, 1)
    model = scripted([response("x", usage), response("y", usage)])
    shared = {} if per == "run" else {"per": per, "store": MemoryStore()}
    layer = budget(max_cost=1.0, **shared)  # type: ignore[arg-type]
    result = await Agent(model, middleware=[retry(attempts=2, sleep=no_wait), layer, reject_first]).run("hi")
    assert result.output == "y" and result.state["cost"] == pytest.approx(0.30)


def test_a_model_without_a_price_is_an_error_when_the_budget_is_added_to_its_agent() -> None:
    """Seen at `agent.use(budget(...))` and at `Agent(..., middleware=[...])` (in a nested stack too), before any
    run: the error names the model and how to price it, and the agent is left without the layer."""
    from onion import Stack

    model = ScriptedModel([], name="mystery-9")
    agent = Agent(model)
    with pytest.raises(OnionError, match=r"no price for model 'mystery-9'; pass budget\(prices=\{'mystery-9'"):
        agent.use(budget(max_cost=1))
    assert agent.stack.layers() == []
    with pytest.raises(OnionError, match="no price for model 'mystery-9'"):
        Agent(model, middleware=[Stack(budget(max_cost=1, per="tenant", store=MemoryStore()))])
    Agent(model, middleware=[budget(max_tokens=1_000)])  # a token limit needs no price
    Agent(model).use(budget(max_cost=1, prices={"mystery": (1.0, 2.0)}))
