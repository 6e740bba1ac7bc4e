"""Structured output: `output_type=` validates the final answer, feeds failures back, types `result.output`."""

from __future__ import annotations

import enum
import logging
from typing import Annotated, Any, Literal

import pytest
from pydantic import BaseModel, Field

from middleware import budget, limit, log
from middleware.limit import LimitReached
from onion import (
    Agent,
    ModelCall,
    PartialOutput,
    RunFinished,
    RunState,
    TextDelta,
    ToolCall,
    ToolResult,
    output_schema,
    tool,
)
from onion.errors import OutputValidationError
from onion.testing import ScriptedModel, call


class City(BaseModel):
    name: str
    population: int


class Kind(enum.Enum):
    CAPITAL = "capital"
    PORT = "port"


class Mayor(BaseModel):
    name: str
    party: str | None = None


class Town(BaseModel):
    name: str
    kind: Kind
    mayor: Mayor
    twin: str | None = None


class Country(BaseModel):
    country: str
    cities: list[City]


@tool
def lookup(name: str) -> str:
    """Look a city up."""
    return f"{name}: 2102650 people"


async def test_agent_output_type_returns_a_validated_object() -> None:
    """A JSON answer comes back as an instance of the agent's output type; the model sees `call.output_type`."""
    model = ScriptedModel([City(name="Paris", population=2102650)])
    result = await Agent(model, output_type=City).run("largest city in France?")
    assert result.output == City(name="Paris", population=2102650)
    assert model.requests[0].output_type is City


async def test_run_output_type_replaces_the_agents_for_that_run_only() -> None:
    model = ScriptedModel(['{"name": "Lyon", "population": 522250}', "plain text"])
    agent = Agent(model)
    typed = await agent.run("second city?", output_type=City)
    untyped = await agent.run("say something")
    assert typed.output == City(name="Lyon", population=522250)
    assert untyped.output == "plain text"
    assert [request.output_type for request in model.requests] == [City, str]


async def test_an_invalid_answer_is_fed_back_with_the_errors_and_the_next_answer_validated() -> None:
    model = ScriptedModel(['{"name": "Paris", "population": "lots"}', City(name="Paris", population=2102650)])
    result = await Agent(model, output_type=City).run("largest city in France?")
    assert result.output.population == 2102650
    feedback = model.requests[1].messages[-1]
    assert feedback.role == "user"
    assert "population: Input should be a valid integer" in feedback.text
    assert '"population"' in feedback.text  # the schema travels with the errors
    assert [m.role for m in result.messages] == ["user", "assistant", "user", "assistant"]


@pytest.mark.parametrize("output_type", [City, list[list[int]]])
async def test_an_answer_nested_50000_levels_deep_is_fed_back_like_any_invalid_one(output_type: Any) -> None:
    """Too deep to parse is pydantic's "recursion limit exceeded", fed back; never a `RecursionError` ending the run
    (a wrapped type, `list[...]`, is read as `{"response": ...}` first)."""
    deep = '{"response": ' + "[" * 50_000 + "]" * 50_000 + "}"
    fixed = City(name="Paris", population=1) if output_type is City else '{"response": [[1]]}'
    model = ScriptedModel([deep, fixed])
    result = await Agent(model, output_type=output_type).run("answer")
    assert result.output == (fixed if output_type is City else [[1]])
    assert "recursion limit exceeded" in model.requests[1].messages[-1].text


async def test_after_output_retries_the_run_raises_output_validation_error_with_errors_and_text() -> None:
    model = ScriptedModel(["not json", '{"name": 1}', '{"name": "Paris"}'])
    with pytest.raises(OutputValidationError) as raised:
        await Agent(model, output_type=City).run("largest city?")
    error = raised.value
    assert error.text == '{"name": "Paris"}'
    assert [(e["loc"], e["type"]) for e in error.errors] == [(("population",), "missing")]
    assert "after 3 answers (output_retries=2)" in str(error)
    assert len(model.requests) == 3


async def test_output_retries_zero_raises_at_the_first_invalid_answer() -> None:
    model = ScriptedModel(["nope"])
    with pytest.raises(OutputValidationError) as raised:
        await Agent(model, output_type=City, output_retries=0).run("q")
    assert raised.value.errors[0]["type"] == "json_invalid"
    assert len(model.requests) == 1


async def test_bad_output_type_and_output_retries_are_named_when_the_agent_is_made() -> None:
    with pytest.raises(TypeError, match=r"output_type=.*is not a type pydantic can validate"):
        Agent(ScriptedModel([]), output_type=object())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="output_retries must be a non-negative int"):
        Agent(ScriptedModel([]), output_retries=-1)


async def test_tool_calls_come_first_and_only_the_final_answer_is_validated() -> None:
    model = ScriptedModel([[call("lookup", name="Paris")], City(name="Paris", population=2102650)])
    result = await Agent(model, tools=[lookup], output_type=City).run("how many live in Paris?")
    assert result.output == City(name="Paris", population=2102650)
    assert [m.role for m in result.messages] == ["user", "assistant", "tool", "assistant"]


@pytest.mark.parametrize(
    ("output_type", "answer", "expected"),
    [
        (list[City], '[{"name": "Paris", "population": 1}]', [City(name="Paris", population=1)]),
        (list[City], '{"response": [{"name": "Paris", "population": 1}]}', [City(name="Paris", population=1)]),
        (City | Country, '{"country": "France", "cities": []}', Country(country="France", cities=[])),
        (
            Town,
            '{"name": "Nice", "kind": "port", "mayor": {"name": "Estrosi", "party": null}, "twin": null}',
            Town(name="Nice", kind=Kind.PORT, mayor=Mayor(name="Estrosi")),
        ),
        (
            Town,
            '{"name": "Nice", "kind": "capital", "mayor": {"name": "E"}}',
            Town(name="Nice", kind=Kind.CAPITAL, mayor=Mayor(name="E")),
        ),
        (Kind, '{"response": "port"}', Kind.PORT),
        (int, '```json\n{"response": 42}\n```', 42),
        (Literal["yes", "no"], '"yes"', "yes"),
    ],
)
async def test_lists_unions_nested_models_optional_fields_and_enums_validate(
    output_type: Any, answer: str, expected: Any
) -> None:
    """Non-object types are wrapped as {"response": ...}, and accepted bare too; fenced JSON is accepted."""
    result = await Agent(ScriptedModel([answer])).run("q", output_type=output_type)
    assert result.output == expected


async def test_an_enum_value_outside_the_enum_is_fed_back() -> None:
    model = ScriptedModel(
        [
            '{"name": "Nice", "kind": "village", "mayor": {"name": "E"}}',
            '{"name": "Nice", "kind": "port", "mayor": {"name": "E"}}',
        ]
    )
    result = await Agent(model, output_type=Town).run("q")
    assert result.output.kind is Kind.PORT
    assert "kind: Input should be 'capital' or 'port'" in model.requests[1].messages[-1].text


def test_strict_schema_closes_objects_requires_every_property_and_drops_defaults() -> None:
    strict = output_schema(Town).strict
    assert strict is not None
    assert strict["required"] == ["name", "kind", "mayor", "twin"]
    assert strict["additionalProperties"] is False
    mayor = strict["$defs"]["Mayor"]
    assert mayor["required"] == ["name", "party"] and mayor["additionalProperties"] is False
    assert "default" not in mayor["properties"]["party"]
    assert {"type": "null"} in mayor["properties"]["party"]["anyOf"]  # optional stays nullable
    assert strict["$defs"]["Kind"]["enum"] == ["capital", "port"]


def test_a_type_with_open_ended_objects_has_no_strict_schema() -> None:
    class Scores(BaseModel):
        by_name: dict[str, int]

    class Loose(BaseModel):
        value: Any

    assert output_schema(Scores).strict is None
    assert output_schema(Loose).strict is None
    assert output_schema(list[City]).wrapped and output_schema(list[City]).strict is not None


class Tree(BaseModel):
    name: str = Field(description="what this node is called")
    children: list[Tree]


class Node(BaseModel):
    name: str = Field(description="what this node is called")
    children: list[Annotated[Node, Field(description="a node below this one")]]


class Person(BaseModel):
    name: str
    manager: Annotated[Person, Field(description="who this person reports to")] | None = None


NULL = {"type": "null"}


def refs(node: Any) -> list[str]:
    """Every `$ref` in a schema."""
    if isinstance(node, list):
        return [ref for item in node for ref in refs(item)]
    if not isinstance(node, dict):
        return []
    own = [node["$ref"]] if "$ref" in node else []
    return own + [ref for value in node.values() for ref in refs(value)]


def test_a_self_reference_with_a_description_has_a_strict_schema_that_refers_back_instead_of_looping() -> None:
    """`list[Annotated[Node, Field(description=...)]]`, `Annotated[Person, Field(description=...)] | None`: a `$ref`
    with siblings back to its own type stays a reference (`anyOf: [$ref]`, description kept), naming a definition."""
    node, person = output_schema(Node), output_schema(Person)
    assert node.strict is not None and person.strict is not None
    child = node.strict["$defs"]["Node"]["properties"]["children"]["items"]
    assert child == {"anyOf": [{"$ref": "#/$defs/Node"}], "description": "a node below this one"}
    manager = person.strict["properties"]["manager"]["anyOf"]
    assert manager == [{"anyOf": [{"$ref": "#/$defs/Person"}], "description": "who this person reports to"}, NULL]
    for strict in (node.strict, person.strict):
        assert all(ref.removeprefix("#/$defs/") in strict["$defs"] for ref in refs(strict))
    assert node.recursive and person.recursive and not output_schema(Town).recursive
    tree = node.validate('{"name": "root", "children": [{"name": "leaf", "children": []}]}')
    assert tree == Node(name="root", children=[Node(name="leaf", children=[])])


def test_a_self_referencing_model_is_its_own_root_object_not_wrapped() -> None:
    """pydantic names a recursive model by `$ref` at the root; onion sends the model's object with its `$defs`."""
    schema = output_schema(Tree)
    assert not schema.wrapped and schema.name == "Tree"
    assert schema.strict is not None and schema.strict["required"] == ["name", "children"]
    assert schema.strict["properties"]["children"]["items"] == {"$ref": "#/$defs/Tree"}
    assert schema.validate('{"name": "root", "children": []}') == Tree(name="root", children=[])


async def test_retries_go_through_the_model_stack_seen_by_log_and_counted_by_limit_and_budget(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="onion")
    model = ScriptedModel(['{"name": "Paris"}', City(name="Paris", population=1)])
    agent = Agent(model, output_type=City).use(log, budget(max_tokens=10**6), limit(model_calls=2))
    result = await agent.run("q")
    assert result.usage.requests == 2
    assert sum("population" in record.getMessage() for record in caplog.records) >= 1

    limited = Agent(ScriptedModel(['{"name": "Paris"}', "{}"]), output_type=City).use(limit(model_calls=1))
    with pytest.raises(LimitReached):
        await limited.run("q")


async def test_a_streamed_run_ends_with_the_typed_output() -> None:
    model = ScriptedModel(['{"name": "Paris"}', City(name="Paris", population=1)])
    events = [event async for event in Agent(model).stream("q", output_type=City)]
    assert isinstance(events[0], TextDelta)
    final = events[-1]
    assert isinstance(final, RunFinished)
    assert final.result.output == City(name="Paris", population=1)


async def test_a_paused_typed_run_resumes_to_a_typed_output_and_saves_the_answer_text() -> None:
    async def hold(ctx: ToolCall, call_next: Any) -> ToolResult:
        return ctx.pause("check first") if not ctx.approved else await call_next(ctx)

    model = ScriptedModel([[call("lookup", name="Paris")], City(name="Paris", population=1)])
    agent = Agent(model, tools=[lookup], middleware=[hold])
    paused = await agent.run("q", output_type=City)
    assert paused.paused and paused.output is None
    state = RunState.from_json(paused.to_state().to_json())
    state.approve_all()
    result = await agent.resume(state, output_type=City)
    assert result.output == City(name="Paris", population=1)
    assert result.to_state().output == '{"name":"Paris","population":1}'


async def test_a_layer_sees_output_type_on_every_model_call() -> None:
    seen: list[Any] = []

    async def watch(ctx: ModelCall, call_next: Any) -> Any:
        seen.append(ctx.output_type)
        return await call_next(ctx)

    model = ScriptedModel([[call("lookup", name="Paris")], "[]"])
    await Agent(model, tools=[lookup], middleware=[watch]).run("q", output_type=list[City])
    assert seen == [list[City], list[City]]


def test_run_sync_takes_output_type() -> None:
    result = Agent(ScriptedModel([City(name="Oslo", population=717710)])).run_sync("q", output_type=City)
    assert result.output.population == 717710


async def test_a_journaled_typed_run_recovers_to_a_typed_output() -> None:
    """A run with a store completes typed; recovering a run whose final answer was recorded validates it again."""
    from onion.stores import MemoryStore

    store = MemoryStore()
    result = await Agent(ScriptedModel([City(name="Oslo", population=1)]), store=store, output_type=City).run("q")
    assert result.output == City(name="Oslo", population=1)
    store._runs[result.run_id].status = "failed"  # the release was lost
    again = await Agent(ScriptedModel([]), store=store).recover(result.run_id, output_type=City)
    assert again.output == City(name="Oslo", population=1)


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ('{"name": "Paris", "population": 210', None),  # 210 may become 2102650: City has no population yet
        ('{"name": "Paris", "population": 2102650}', City(name="Paris", population=2102650)),
        ('{"name": "Paris", "population": 2102650,', City(name="Paris", population=2102650)),
        ('{"name": "Paris", "population": 2102650 ', City(name="Paris", population=2102650)),
        ('{"population": 2102650, "name": "Route 66', City(name="Route 66", population=2102650)),
        ('{"population": 21.', None),
        ('{"population": 2.1e', None),
        ('{"population": -', None),
    ],
)
def test_a_partial_never_shows_a_number_that_may_still_grow(text: str, shown: City | None) -> None:
    """A number the text ends in is not a value yet (more digits may follow); a digit inside a string is text."""
    schema = output_schema(City)
    if shown is None:
        with pytest.raises(ValueError):
            schema.validate_partial(text)
    else:
        assert schema.validate_partial(text) == shown


def test_a_partial_list_of_numbers_leaves_out_the_one_still_arriving() -> None:
    """`[1, 2, 3` holds 1 and 2: the 3 may be 35; a string still arriving is shown as far as it came."""
    assert output_schema(list[int]).validate_partial('{"response": [1, 2, 3') == [1, 2]
    assert output_schema(list[int]).validate_partial("[1, 2, 3]") == [1, 2, 3]
    assert output_schema(list[str]).validate_partial('["Louvre", "Eiff') == ["Louvre", "Eiff"]


async def test_a_streamed_typed_answer_never_shows_a_cut_number() -> None:
    """Streamed 8 characters at a time (`ration": 2`, then `102650, `), every `PartialOutput` has the whole number."""
    answer = '{"name": "Lyon", "population": 2102650, "sights": ["Louvre"]}'

    class Sights(City):
        sights: list[str] = []

    model = ScriptedModel([answer])
    events = [event async for event in Agent(model).stream("q", output_type=Sights)]
    partials = [event.output for event in events if isinstance(event, PartialOutput)]
    assert partials and {partial.population for partial in partials} == {2102650}
    assert partials[-1] == Sights(name="Lyon", population=2102650, sights=["Louvre"])
