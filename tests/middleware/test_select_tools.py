"""`select_tools`: each model call is offered only the `k` most relevant tools; remembered tools still run."""

from __future__ import annotations

import pytest

from middleware import select_tools
from onion import Agent, ModelCall, Tool, tool
from onion.testing import FunctionModel, ScriptedModel, call

TOPICS = ["weather", "stocks", "flights", "hotels", "recipes", "football", "movies", "music", "books", "news"]
ACTIONS = ["search", "summary", "forecast", "history", "alerts", "compare"]


def make_tool(topic: str, action: str) -> Tool:
    def run(query: str) -> str:
        return f"{action} of {topic} for {query}"

    return Tool(run, name=f"{topic}_{action}", description=f"The {action} of {topic} for a query.")


SIXTY = [make_tool(topic, action) for topic in TOPICS for action in ACTIONS]


def test_select_tools_needs_a_positive_k() -> None:
    with pytest.raises(TypeError, match="select_tools needs k"):
        Agent(ScriptedModel(["x"])).use(select_tools)
    with pytest.raises(TypeError, match="select_tools needs k"):
        select_tools(0)


async def test_with_sixty_tools_and_k_5_each_request_offers_five_and_a_remembered_tool_still_runs() -> None:
    """The model calls a tool it saw in an earlier request but is not offered now: it runs all the same."""
    remembered = "books_alerts"

    def answer(call_: ModelCall) -> object:
        step = call_.run.steps
        if step == 1:
            return [call(remembered, query="Oslo")]
        if step == 2:
            assert remembered in [t.name for t in call_.tools]  # its result is what the model reads now
            return [call("stocks_search", query="ACME")]
        if step == 3:
            return [call(remembered, query="Bergen")]  # remembered from step 1, not offered now
        return "done"

    model = FunctionModel(answer)
    agent = Agent(model, tools=SIXTY, max_steps=10).use(select_tools(5))
    result = await agent.run("What is the weather forecast in Oslo? Then the stocks search for ACME.")

    assert result.output == "done"
    offered = [[t.name for t in request.tools] for request in model.requests]
    assert [len(names) for names in offered] == [5, 6, 6, 6]  # from step 2 the tool just called, on top of the 5
    assert remembered not in offered[0] and remembered not in offered[2]
    assert "weather_forecast" in offered[0]
    results = [m for m in result.messages if m.role == "tool"]
    assert [m.text for m in results] == [
        "alerts of books for Oslo",
        "search of stocks for ACME",
        "alerts of books for Bergen",
    ]


async def test_a_tool_the_model_just_called_is_offered_on_top_of_the_k() -> None:
    """k=2: after the model called `music_search`, it is offered with two more, not in one of the two places."""
    model = ScriptedModel([[call("music_search", query="jazz")], "done"])
    await Agent(model, tools=SIXTY).use(select_tools(2)).run("Any flights alerts or flights history?")
    second = [t.name for t in model.requests[1].tools]
    assert "music_search" in second and len(second) == 3
    assert set(second) - {"music_search"} == {"flights_alerts", "flights_history"}


async def test_ties_in_the_word_score_are_broken_by_relevance_not_the_agents_tool_order() -> None:
    """No tool shares a whole word with "Is it raining in Paris?": the rain tool still beats an earlier send_email."""

    def send_email(to: str) -> str:
        """Send an e-mail to someone."""
        return "sent"

    def rain_report(city: str) -> str:
        """Rainfall for a city."""
        return "wet"

    model = ScriptedModel(["ok"])
    tools = [send_email, *SIXTY[6:12], rain_report]
    await Agent(model, tools=tools).use(select_tools(1)).run("Is it raining in Paris?")
    assert [t.name for t in model.requests[0].tools] == ["rain_report"]


async def test_the_default_ranking_prefers_tools_whose_words_match_the_latest_user_message() -> None:
    model = ScriptedModel(["ok"])
    await Agent(model, tools=SIXTY).use(select_tools(3)).run("Any flights alerts or flights history for Lisbon?")
    assert sorted(t.name for t in model.requests[0].tools) == ["flights_alerts", "flights_history", "flights_search"]


async def test_a_scoring_function_ranks_the_tools_and_ties_keep_the_agents_order() -> None:
    async def by_music(call_: ModelCall, candidate: Tool) -> float:
        return 1.0 if candidate.name.startswith("music") else 0.0

    model = ScriptedModel(["ok"])
    await Agent(model, tools=SIXTY).use(select_tools(2, by=by_music)).run("hi")
    assert [t.name for t in model.requests[0].tools] == ["music_search", "music_summary"]


async def test_a_selecting_model_picks_the_tools_through_its_own_stack_and_its_usage_counts() -> None:
    selector = ScriptedModel(["books_search\nnot_a_tool\nmovies_alerts"])
    model = ScriptedModel(["ok"])
    seen: list[str] = []

    async def agent_layer(call_: ModelCall, call_next: object) -> object:
        seen.append("agent model call")
        return await call_next(call_)  # type: ignore[operator]

    agent = Agent(model, tools=SIXTY).use(agent_layer, select_tools(3, by=selector))
    result = await agent.run("something about books and films")

    names = [t.name for t in model.requests[0].tools]
    assert len(names) == 3 and {"books_search", "movies_alerts"} <= set(names)
    assert "Tools:\n- weather_search" in selector.requests[0].messages[-1].text
    assert seen == ["agent model call"]
    assert result.usage.requests == 2


async def test_calls_offering_k_tools_or_fewer_pass_untouched() -> None:
    @tool
    def only() -> str:
        """The one tool."""
        return "x"

    model = ScriptedModel(["ok"])
    await Agent(model, tools=[only]).use(select_tools(5)).run("hi")
    assert [t.name for t in model.requests[0].tools] == ["only"]
