"""`compact`: a long run's requests stay under a token budget, each a valid history."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from middleware import approve, compact
from middleware.compact import CLEARED, estimate_tokens
from onion import Agent, Handler, Message, ModelCall, ModelResponse, RunState, Usage, tool
from onion.testing import FunctionModel, ScriptedModel, call

BUDGET = 2_000


@tool
def fetch(page: int) -> str:
    """Fetch one page of the report."""
    return f"page {page}: " + "lorem ipsum dolor sit amet " * 16


def valid(messages: Sequence[Message]) -> None:
    """An independent check of what providers require of a history."""
    roles = [m.role for m in messages]
    first = next(i for i, role in enumerate(roles) if role != "system")
    assert "system" not in roles[first:], "system messages only at the start"
    assert roles[first] == "user", "the conversation opens with a user message"
    waiting: list[str] = []
    for message in messages:
        if message.role == "tool":
            assert waiting and message.tool_call_id == waiting.pop(0), "a result right after its call, in order"
        else:
            assert not waiting, "every call answered before anything else"
            waiting = [request.id for request in message.tool_calls] if message.role == "assistant" else []
    assert not waiting, "no call left unanswered"


def two_hundred_turns(call_: ModelCall) -> object:
    step = call_.run.steps
    return [call("fetch", page=step)] if step <= 200 else "read it all"


class Recorder:
    """Records every model call that goes through the agent's own stack."""

    def __init__(self) -> None:
        self.calls: list[ModelCall] = []

    async def wrap_model(self, call_: ModelCall, call_next: Handler) -> ModelResponse:
        self.calls.append(call_)
        response: ModelResponse = await call_next(call_)
        return response


def test_bad_budgets_are_refused_naming_the_argument() -> None:
    with pytest.raises(ValueError, match="max_tokens"):
        compact(0)
    with pytest.raises(ValueError, match="keep_last"):
        compact(1000, keep_last=0)


@pytest.mark.parametrize("summarize", [False, True], ids=["clear-and-drop", "summarize"])
async def test_a_200_turn_run_with_tool_calls_stays_under_budget_and_every_history_is_valid(summarize: bool) -> None:
    """The summariser's calls go through its own stack: the agent's model layers never see them."""
    summarizer = FunctionModel(lambda c: "The user wants the whole report read; pages fetched so far.")
    model, recorder = FunctionModel(two_hundred_turns), Recorder()
    agent = Agent(model, tools=[fetch], instructions="Read the report.", max_steps=250).use(
        compact(BUDGET, summarize=summarizer if summarize else None), recorder
    )

    result = await agent.run("Read every page of the report.")

    assert result.output == "read it all"
    assert len(model.requests) == 201
    for request in model.requests:
        valid(request.messages)
        assert estimate_tokens(request.messages, request.tools) <= BUDGET
        assert request.messages[0] == Message.system("Read the report.")
    last = model.requests[-1].messages
    assert last[-2].tool_calls[0].args == {"page": 200} and last[-1].text.startswith("page 200: ")
    assert any(m.text == CLEARED for m in last)
    assert len(result.messages) == 1 + 1 + 200 * 2 + 1  # the run's own history keeps everything
    assert [c.messages for c in recorder.calls] == [r.messages for r in model.requests]
    if summarize:
        assert summarizer.requests and last[1].text.startswith("[Summary of the earlier conversation]")
        assert all(r.run.agent is not agent for r in summarizer.requests)
        assert result.usage.requests == 201 + len(summarizer.requests)
    else:
        assert "earlier messages were removed" in last[1].text


async def test_a_short_run_is_sent_untouched() -> None:
    model = ScriptedModel([[call("fetch", page=1)], "ok"])
    result = await Agent(model, tools=[fetch]).use(compact).run("one page")
    assert model.requests[1].messages == result.messages[:-1]


async def test_compaction_holds_across_a_pause_and_resume() -> None:
    """The compacted view is in run.state: the resumed run sends the same summary and stays under budget."""

    def turns(call_: ModelCall) -> object:
        step = call_.run.steps
        if step == 60:
            return [call("approve_me")]
        return [call("fetch", page=step)] if step <= 80 else "finished"

    @tool
    def approve_me() -> str:
        """A step a person approves."""
        return "approved"

    def make() -> tuple[Agent, FunctionModel]:
        model = FunctionModel(turns)
        return Agent(model, tools=[fetch, approve_me], max_steps=100).use(compact(800), approve("approve_me")), model

    agent, first = make()
    paused = await agent.run("Read the report.")
    assert paused.paused
    before = first.requests[-1].messages

    state = RunState.from_json(paused.to_state().to_json())
    state.approve_all()
    agent, second = make()
    result = await agent.resume(state)

    assert result.output == "finished"
    after = second.requests[0].messages
    assert after[0].text == before[0].text and "earlier messages were removed" in after[0].text
    for request in second.requests:
        valid(request.messages)
        assert estimate_tokens(request.messages, request.tools) <= 800


async def test_the_providers_token_count_is_used_when_known() -> None:
    """The estimate says the request is small; the provider said it was not: compact acts on the provider's count."""

    def big(call_: ModelCall) -> ModelResponse:
        message = Message.assistant("", [call("fetch", page=1)]) if call_.run.steps == 1 else Message.assistant("ok")
        return ModelResponse(message, Usage(input_tokens=5_000, requests=1))

    model = FunctionModel(big)
    await Agent(model, tools=[fetch]).use(compact(BUDGET, keep_last=1)).run("one page")

    assert estimate_tokens(model.requests[1].messages) < BUDGET // 4
    assert "earlier messages were removed" in model.requests[1].messages[0].text
