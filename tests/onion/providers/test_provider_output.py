"""Structured output on all three APIs, through the real SDKs and the fake provider server."""

from __future__ import annotations

import enum
import json
from typing import Annotated, Any

import pytest
from pydantic import BaseModel, Field

from middleware import cache
from onion import Agent, RunFinished, tool
from onion.errors import OutputValidationError
from onion.testing import FakeProviderServer, call

from .conftest import APIS


class City(BaseModel):
    name: str
    population: int


class Size(enum.Enum):
    SMALL = "small"
    BIG = "big"


class Mayor(BaseModel):
    name: str
    party: str | None = None


class Town(BaseModel):
    name: str
    size: Size
    mayor: Mayor
    nickname: str | None = None


class Scores(BaseModel):
    by_name: dict[str, int]


@tool
def lookup(name: str) -> str:
    """Look a city up."""
    return f"{name}: 2102650 people"


CITY_STRICT = {
    "type": "object",
    "title": "City",
    "properties": {
        "name": {"type": "string", "title": "Name"},
        "population": {"type": "integer", "title": "Population"},
    },
    "required": ["name", "population"],
    "additionalProperties": False,
}

EXPECTED_FIELD = {
    "anthropic": ("output_config", {"format": {"type": "json_schema", "schema": CITY_STRICT}}),
    "openai": (
        "response_format",
        {"type": "json_schema", "json_schema": {"name": "City", "schema": CITY_STRICT, "strict": True}},
    ),
    "openai-responses": (
        "text",
        {"format": {"type": "json_schema", "name": "City", "schema": CITY_STRICT, "strict": True}},
    ),
}


async def run_typed(agent: Agent, output_type: Any, streamed: bool) -> Any:
    if not streamed:
        return (await agent.run("q", output_type=output_type)).output
    events = [event async for event in agent.stream("q", output_type=output_type)]
    assert isinstance(events[-1], RunFinished)
    return events[-1].result.output


async def test_the_schema_travels_in_each_apis_own_field_and_the_answer_comes_back_typed(
    api: str, streamed: bool, server: FakeProviderServer, make_model: Any
) -> None:
    server.script([City(name="Paris", population=2102650)])
    output = await run_typed(Agent(make_model(api)), City, streamed)
    assert output == City(name="Paris", population=2102650)
    field, value = EXPECTED_FIELD[api]
    assert server.requests[0].body[field] == value
    assert server.requests[0].output_format is not None


async def test_an_invalid_answer_is_retried_with_the_errors_in_the_next_request_then_succeeds(
    api: str, streamed: bool, server: FakeProviderServer, make_model: Any
) -> None:
    server.script(['{"name": "Paris", "population": "many"}', City(name="Paris", population=2102650)])
    output = await run_typed(Agent(make_model(api)), City, streamed)
    assert output.population == 2102650
    second = server.requests[1].body
    wire = second.get("messages") or second.get("input")
    assert "population: Input should be a valid integer" in str(wire[-1])
    assert server.requests[1].output_format == server.requests[0].output_format


async def test_after_the_retries_the_run_raises_output_validation_error(
    api: str, server: FakeProviderServer, make_model: Any
) -> None:
    server.script(["not json", '{"name": "Paris"}'])
    with pytest.raises(OutputValidationError) as raised:
        await Agent(make_model(api), output_type=City, output_retries=1).run("q")
    assert raised.value.text == '{"name": "Paris"}'
    assert raised.value.errors[0]["loc"] == ("population",)
    assert len(server.requests) == 2


@pytest.mark.parametrize("api", APIS)
async def test_tools_first_then_the_final_answer_is_validated(
    api: str, server: FakeProviderServer, make_model: Any
) -> None:
    server.script([[call("lookup", name="Paris")], City(name="Paris", population=2102650)])
    result = await Agent(make_model(api), tools=[lookup], output_type=City).run("how many in Paris?")
    assert result.output == City(name="Paris", population=2102650)
    assert all(request.output_format is not None for request in server.requests)


@pytest.mark.parametrize(
    ("output_type", "answer", "expected"),
    [
        (list[City], '{"response": [{"name": "Paris", "population": 1}]}', [City(name="Paris", population=1)]),
        (City | Town, '{"name": "Paris", "population": 1}', City(name="Paris", population=1)),
        (
            Town,
            '{"name": "Nice", "size": "big", "mayor": {"name": "E", "party": null}, "nickname": null}',
            Town(name="Nice", size=Size.BIG, mayor=Mayor(name="E")),
        ),
        (Size, '{"response": "small"}', Size.SMALL),
    ],
    ids=["list", "union", "nested-optional-enum", "enum"],
)
async def test_lists_unions_nested_models_optional_fields_and_enums_pass_the_strict_checks(
    api: str, server: FakeProviderServer, make_model: Any, output_type: Any, answer: str, expected: Any
) -> None:
    """The fake server refuses a strict schema with an open object or a property not required, as the APIs do."""
    server.script([answer])
    result = await Agent(make_model(api)).run("q", output_type=output_type)
    assert result.output == expected
    sent = server.requests[0].output_format
    assert sent is not None
    if api != "anthropic":
        assert (sent.get("json_schema") or sent)["strict"] is True


class Node(BaseModel):
    name: str = Field(description="what this node is called")
    children: list[Annotated[Node, Field(description="a node below this one")]]


class Person(BaseModel):
    name: str = Field(description="what this person is called")
    manager: Annotated[Person, Field(description="who this person reports to")] | None = None


@pytest.mark.parametrize(
    ("output_type", "answer", "expected"),
    [
        (
            Node,
            {"name": "root", "children": [{"name": "leaf", "children": []}]},
            Node(name="root", children=[Node(name="leaf", children=[])]),
        ),
        (
            Person,
            {"name": "Bo", "manager": {"name": "Ada", "manager": None}},
            Person(name="Bo", manager=Person(name="Ada")),
        ),
    ],
    ids=["described-children", "described-parent"],
)
async def test_a_recursive_output_type_goes_strict_to_openai_and_as_the_answer_tool_to_anthropic(
    api: str,
    streamed: bool,
    server: FakeProviderServer,
    make_model: Any,
    output_type: Any,
    answer: dict[str, Any],
    expected: Any,
) -> None:
    """The fake server refuses a `$ref` naming no definition, and on Anthropic a recursive strict schema, as the
    APIs do: OpenAI gets the strict schema (its `$ref`s and descriptions kept), Anthropic the `final_answer` tool."""
    server.script([[call("final_answer", **answer)]] if api == "anthropic" else [json.dumps(answer)])
    assert await run_typed(Agent(make_model(api)), output_type, streamed) == expected
    body = server.requests[0].body
    if api == "anthropic":
        assert "output_config" not in body
        (offered,) = body["tools"]
        assert offered["name"] == "final_answer" and "$defs" in offered["input_schema"]
        return
    sent = server.requests[0].output_format
    assert sent is not None
    settings = sent.get("json_schema") or sent
    assert settings["strict"] is True and "$ref" in json.dumps(settings["schema"])
    assert "what this node is called" in str(settings) or "what this person is called" in str(settings)


async def test_a_schema_without_a_strict_form_is_sent_non_strict_to_openai_and_as_a_tool_to_anthropic(
    api: str, streamed: bool, server: FakeProviderServer, make_model: Any
) -> None:
    server.script([[call("final_answer", by_name={"a": 1})]] if api == "anthropic" else ['{"by_name": {"a": 1}}'])
    output = await run_typed(Agent(make_model(api)), Scores, streamed)
    assert output == Scores(by_name={"a": 1})
    body = server.requests[0].body
    if api == "anthropic":
        assert "output_config" not in body
        assert [t["name"] for t in body["tools"]] == ["final_answer"]
    else:
        sent = server.requests[0].output_format
        assert sent is not None and (sent.get("json_schema") or sent)["strict"] is False


async def test_output_mode_tool_asks_through_a_final_answer_tool_and_reads_its_arguments(
    api: str, server: FakeProviderServer, make_model: Any
) -> None:
    server.script([[call("lookup", name="Paris")], [call("final_answer", name="Paris", population=1)]])
    result = await Agent(make_model(api, output_mode="tool"), tools=[lookup], output_type=City).run("q")
    assert result.output == City(name="Paris", population=1)
    assert server.requests[0].output_format is None
    assert result.messages[-1].tool_calls == []  # the answer call became the answer
    assert len(server.requests) == 2


async def test_with_cache_outside_the_same_prompt_with_two_output_types_makes_two_requests(
    api: str, server: FakeProviderServer, make_model: Any
) -> None:
    server.script(['{"response": [{"name": "Paris", "population": 1}]}', City(name="Paris", population=1)])
    agent = Agent(make_model(api)).use(cache)
    many = await agent.run("largest city?", output_type=list[City])
    one = await agent.run("largest city?", output_type=City)
    again = await agent.run("largest city?", output_type=City)
    assert many.output == [City(name="Paris", population=1)]
    assert one.output == again.output == City(name="Paris", population=1)
    assert len(server.requests) == 2


def test_a_malformed_format_field_is_refused_as_the_api_would() -> None:
    from onion.testing._fake_formats import format_problem

    open_object = {"type": "object", "properties": {"a": {"type": "string"}}}
    assert "additionalProperties" in str(
        format_problem("anthropic", {"output_config": {"format": {"type": "json_schema", "schema": open_object}}})
    )
    chat = {"type": "json_schema", "json_schema": {"name": "bad name", "schema": open_object}}
    assert "'name' must match" in str(format_problem("chat", {"response_format": chat}))
    closed = {**open_object, "additionalProperties": False}
    strict = {"type": "json_schema", "name": "A", "schema": closed, "strict": True}
    assert "'required' must list every key" in str(format_problem("responses", {"text": {"format": strict}}))
    assert format_problem("responses", {"text": {"format": {**strict, "strict": False}}}) is None
    dangling = {"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}}, "required": ["a"]}
    dangling["additionalProperties"] = False
    assert "'#/$defs/A' names no definition" in str(
        format_problem("anthropic", {"output_config": {"format": {"type": "json_schema", "schema": dangling}}})
    )
    recursive = {**dangling, "$defs": {"A": {"type": "array", "items": {"$ref": "#/$defs/A"}}}}
    assert "recursive schemas are not supported" in str(
        format_problem("anthropic", {"output_config": {"format": {"type": "json_schema", "schema": recursive}}})
    )
    assert (
        format_problem(
            "chat",
            {
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {"name": "A", "schema": recursive, "strict": True},
                }
            },
        )
        is None
    )


async def test_a_tool_of_yours_named_final_answer_is_refused_when_the_answer_tool_is_needed(
    server: FakeProviderServer, make_model: Any
) -> None:
    @tool
    def final_answer(text: str) -> str:
        """Mine."""
        return text

    agent = Agent(make_model("openai", output_mode="tool"), tools=[final_answer], output_type=City)
    with pytest.raises(ValueError, match="'final_answer' clashes with the tool that carries the output schema"):
        await agent.run("q")
    assert server.requests == []
