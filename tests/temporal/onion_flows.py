"""The agents and workflows the Temporal tests run: imported by name in the sandbox and in worker processes."""

from __future__ import annotations

from typing import Any

from temporalio import workflow

from onion import Agent, ModelCall, tool
from onion.testing import FunctionModel, call


@tool
def get_weather(city: str) -> str:
    """Current weather for a city."""
    return f"18°C and sunny in {city}"


def clerk(model_call: ModelCall) -> Any:
    """Asks for the weather of the city the question names, then answers with what the tool said."""
    results = [m.text for m in model_call.messages if m.role == "tool"]
    if not results:
        return [call("get_weather", city=model_call.messages[-1].text.split()[-1])]
    return "Answer: " + "; ".join(results)


weather = Agent(FunctionModel(clerk, name="clerk"), name="weather", tools=[get_weather])

AGENTS = [weather]


@workflow.defn
class AskWeather:
    """Runs the weather agent on one question."""

    @workflow.run
    async def run(self, question: str) -> dict[str, Any]:
        result = await weather.run(question)
        return {"output": result.output, "messages": [m.to_dict() for m in result.messages]}
