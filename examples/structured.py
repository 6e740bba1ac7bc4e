"""Structured output offline: `output_type=City` gives a validated `City` in `result.output`.

The model looks a city up with a tool, answers with JSON that fails
validation once (the errors go back to it), then answers right. The script
is a `ScriptedModel`; swap in `"anthropic:claude-sonnet-5-5"` to ask a real
model. `mypy --strict` clean: `result.output.population` is an `int`.

python examples/structured.py
"""

from __future__ import annotations

import asyncio

from pydantic import BaseModel

from middleware import log
from onion import Agent, RunResult, tool
from onion.errors import OutputValidationError
from onion.testing import ScriptedModel, call


class City(BaseModel):
    name: str
    country: str
    population: int


@tool
def census(city: str) -> str:
    """The latest census figure for a city."""
    return f"{city}: 2,102,650 inhabitants (2023)"


def largest_city_model() -> ScriptedModel:
    return ScriptedModel(
        [
            [call("census", city="Paris")],
            '{"name": "Paris", "country": "France", "population": "about two million"}',
            City(name="Paris", country="France", population=2102650),
            [
                City(name="Paris", country="France", population=2102650),
                City(name="Lyon", country="France", population=522250),
            ],
        ]
    )


async def main() -> list[str]:
    lines: list[str] = []
    model = largest_city_model()
    agent = Agent(model, tools=[census], output_type=City).use(log)

    result: RunResult[City] = await agent.run("What is the largest city in France?")
    city = result.output
    lines.append(f"{city.name}, {city.country}: {city.population:,} people")
    feedback = model.requests[2].messages[-1].text
    lines.append(f"fed back after the first answer: {feedback.splitlines()[1]}")

    cities = (await agent.run("The two largest cities in France?", output_type=list[City])).output
    lines.append("two largest: " + ", ".join(c.name for c in cities))

    try:
        await Agent(ScriptedModel(["Paris, I think."]), output_type=City, output_retries=0).run("Largest city?")
    except OutputValidationError as error:
        lines.append(f"OutputValidationError: {error.errors[0]['type']} in {error.text!r}")
    return lines


if __name__ == "__main__":
    for line in asyncio.run(main()):
        print(line)
