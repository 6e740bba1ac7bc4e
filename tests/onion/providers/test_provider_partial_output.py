"""Typed output streams: `PartialOutput` events carry the answer validated so far, through the real SDKs' streams."""

from __future__ import annotations

import itertools
import json

import pydantic
import pytest

from onion import Agent, PartialOutput, RunFinished, TextDelta
from onion.testing import FakeProviderServer

from .conftest import ModelFactory


class City(pydantic.BaseModel):
    name: str
    population: int
    sights: list[str] = []


ANSWER = {"name": "Paris", "population": 2100000, "sights": ["Louvre", "Eiffel Tower", "Notre-Dame"]}


@pytest.mark.parametrize("api", ["anthropic", "openai"])
async def test_a_streamed_typed_answer_yields_partial_outputs_that_grow_until_the_validated_one(
    api: str, server: FakeProviderServer, make_model: ModelFactory
) -> None:
    """Each `PartialOutput` is a `City` (its required fields arrived), its sights grow, the last one is whole."""
    server.script([json.dumps(ANSWER)])
    agent = Agent(make_model(api))
    events = [event async for event in agent.stream("a city", output_type=City)]
    partials = [event.output for event in events if isinstance(event, PartialOutput)]
    assert len(partials) >= 3 and all(isinstance(partial, City) for partial in partials)
    assert partials[0].sights == [] and partials[-1] == City(**ANSWER)
    assert [len(p.sights) for p in partials] == sorted(len(p.sights) for p in partials)
    assert any(p.sights and p.sights[-1] not in ANSWER["sights"] for p in partials)  # a sight still arriving
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == json.dumps(ANSWER)
    last = events[-1]
    assert isinstance(last, RunFinished) and last.result.output == City(**ANSWER)
    assert partials[-1] == last.result.output


async def test_a_list_output_streams_its_items_as_they_arrive(
    server: FakeProviderServer, make_model: ModelFactory
) -> None:
    """A non-object type travels wrapped (`{"response": ...}`): the partial outputs are lists that grow."""
    server.script([json.dumps({"response": [ANSWER, {**ANSWER, "name": "Lyon"}]})])
    events = [event async for event in Agent(make_model("anthropic")).stream("cities", output_type=list[City])]
    partials = [event.output for event in events if isinstance(event, PartialOutput)]
    assert len(partials) >= 2 and all(len(b) >= len(a) for a, b in itertools.pairwise(partials))
    assert partials[-1] == [City(**ANSWER), City(**{**ANSWER, "name": "Lyon"})]


async def test_a_str_stream_has_no_partial_outputs(server: FakeProviderServer, make_model: ModelFactory) -> None:
    """Without an `output_type`, nothing changes: text deltas only."""
    server.script([json.dumps(ANSWER)])
    events = [event async for event in Agent(make_model("openai")).stream("a city")]
    assert not any(isinstance(event, PartialOutput) for event in events)
