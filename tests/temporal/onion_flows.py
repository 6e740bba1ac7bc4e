"""The agents and workflows the Temporal tests run: imported by name in the sandbox and in worker processes."""

from __future__ import annotations

import asyncio
import json
import os
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pydantic
from temporalio import workflow
from temporalio.common import RetryPolicy

from middleware import approve
from onion import Agent, ModelCall, ToolCall, ToolResult, tool
from onion.providers.anthropic import AnthropicModel
from onion.stores import MemoryStore
from onion.temporal import ActivityOptions
from onion.testing import FunctionModel, RecordedRequest, call


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

FAST = ActivityOptions(
    heartbeat_timeout=timedelta(seconds=2),
    heartbeat_every=0.3,
    retry=RetryPolicy(initial_interval=timedelta(milliseconds=200), maximum_attempts=5),
)
"""Options for the crash tests: a dead worker's call is given up after 2 s."""


def wall_clock() -> float:
    """The wall clock (`time.time()`), for a layer of another module to read (clock_flows.hidden_clock)."""
    return time.time()


def _effect(line: str) -> bool:
    """Appends `line` to the side-effects file ($ONION_EFFECTS); True if it was there already."""
    return _effects(line) > 0


def _effects(line: str) -> int:
    """Appends `line` to the side-effects file ($ONION_EFFECTS); how many times it was there already."""
    path = Path(os.environ["ONION_EFFECTS"])
    seen = path.read_text().splitlines().count(line) if path.exists() else 0
    with path.open("a") as file:
        file.write(line + "\n")
    return seen


@tool
def lookup(order: int) -> str:
    """The status of an order."""
    return f"order {order} shipped"


@tool
def charge(order: int) -> str:
    """Charges an order (not idempotent). Its first run takes a minute: long enough to kill its worker."""
    if not _effect("charge start"):
        time.sleep(60)
    _effect("charge done")
    return f"charged order {order}"


@tool(idempotent=True)
def resend(order: int) -> str:
    """Sends an order's receipt again (idempotent). Its first run takes a minute."""
    if not _effect("resend start"):
        time.sleep(60)
    _effect("resend done")
    return f"receipt of order {order} sent"


@tool(in_doubt="ask")
def refund(order: int, call: ToolCall) -> str:
    """Refunds an order (not idempotent: after a crash mid-call a person decides). Its first run takes a minute, and
    its second too for an order over 100."""
    if _effects(f"refund start {order} {call.idempotency_key}") < (2 if order > 100 else 1):
        time.sleep(60)
    _effect(f"refund done {order} {call.idempotency_key}")
    return f"refunded order {order}"


def _settled(call: ToolCall) -> ToolResult | None:
    """Asks the payment API (the side-effects file) whether this call's settlement happened; it is down for order 13."""
    order = call.args["order"]
    if order == 13:
        raise RuntimeError("the payment API is down")
    path = Path(os.environ["ONION_EFFECTS"])
    if f"settle done {order} {call.idempotency_key}" in path.read_text().splitlines():
        return ToolResult(f"order {order} was settled (found by reconcile)")
    return None


@tool(in_doubt="ask", reconcile=_settled)
def settle(order: int, call: ToolCall) -> str:
    """Settles an order (not idempotent: after a crash mid-call its reconcile asks the payment API, else a person).
    Its first run takes a minute, after settling for an order over 100, before for the others."""
    done = f"settle done {order} {call.idempotency_key}"
    if not _effect(f"settle start {order} {call.idempotency_key}"):
        if order > 100:
            _effect(done)
        time.sleep(60)
    _effect(done)
    return f"settled order {order}"


def support_agent(url: str) -> Agent[str]:
    """The support agent on the real anthropic SDK, against the fake provider server at `url`."""
    model = AnthropicModel("claude-test", base_url=url, api_key="test-key", max_tokens=256)
    return Agent(model, name="support", tools=[lookup, charge, resend, refund, settle])


def _text(content: Any) -> str:
    return content if isinstance(content, str) else " ".join(part.get("text", "") for part in content)


def support_answers(request: RecordedRequest) -> Any:
    """The fake server's answer: call the tool the question names with its order, then report what it said."""
    messages = request.body["messages"]
    blocks = [b for m in messages if not isinstance(m["content"], str) for b in m["content"]]
    results = [b for b in blocks if b["type"] == "tool_result"]
    if not results:
        name, order = _text(messages[-1]["content"]).split()[-2:]
        return [call(name, order=int(order))]
    return f"done: {_text(results[-1]['content'])}"


support = support_agent(os.environ.get("ONION_FAKE_URL", "http://127.0.0.1:9"))


@workflow.defn
class Support:
    """Runs the support agent on one request."""

    @workflow.run
    async def run(self, question: str) -> str:
        return (await support.run(question)).output


@workflow.defn
class AskWeather:
    """Runs the weather agent on one question."""

    @workflow.run
    async def run(self, question: str) -> dict[str, Any]:
        result = await weather.run(question)
        return {"output": result.output, "messages": [m.to_dict() for m in result.messages]}


PAID: list[dict[str, Any]] = []
"""Every run of `pay` in this process (the in-process worker's activities), with its arguments."""


@tool
def pay(order: int, amount: int) -> str:
    """Pays an order."""
    PAID.append({"order": order, "amount": amount})
    return f"paid {amount} for order {order}"


def cashier(model_call: ModelCall) -> Any:
    """Asks to pay order 7 for 30, then answers with what the tool said."""
    results = [m.text for m in model_call.messages if m.role == "tool"]
    return [call("pay", order=7, amount=30)] if not results else "Answer: " + results[-1]


cash = Agent(FunctionModel(cashier, name="cashier"), name="cash", tools=[pay]).use(approve("pay"))

AGENTS.append(cash)


@workflow.defn
class Pay:
    """Runs the cash agent, waiting durably for a person to decide on each payment."""

    @workflow.run
    async def run(self, question: str) -> str:
        return (await cash.run(question)).output  # inside a workflow, agent.run waits for each pause's decisions


def two_payments(model_call: ModelCall) -> Any:
    """Asks to pay order 7 for 30 and order 8 for 10 in one batch, then answers with what the tools said."""
    results = [m.text for m in model_call.messages if m.role == "tool"]
    return [call("pay", order=7, amount=30), call("pay", order=8, amount=10)] if not results else "; ".join(results)


till = Agent(FunctionModel(two_payments, name="two_payments"), name="till", tools=[pay]).use(approve("pay"))

AGENTS.append(till)


@workflow.defn
class PayTwo:
    """Runs the till agent: two payments wait in one pause, so the workflow waits until both are decided."""

    @workflow.run
    async def run(self, question: str) -> str:
        return (await till.run(question)).output


class Forecast(pydantic.BaseModel):
    """A typed answer: what a run's own `output_type` asks for."""

    city: str
    celsius: int


def forecaster(model_call: ModelCall) -> Any:
    """Asks for the weather of the question's last word, then answers with a Forecast as JSON."""
    results = [m.text for m in model_call.messages if m.role == "tool"]
    city = next(m.text for m in model_call.messages if m.role == "user").split()[-1]
    if not results:
        return [call("get_weather", city=city)]
    return json.dumps({"city": city, "celsius": int(results[-1].split("°")[0])})


FORECASTS = {
    False: Agent(FunctionModel(forecaster, name="forecaster"), name="forecasts", tools=[get_weather]),
    True: Agent(FunctionModel(forecaster, name="forecaster"), name="forecasts-approved", tools=[get_weather]).use(
        approve("get_weather")
    ),
}
"""Agents whose output_type is str (one asks a person before each weather call): a run asks for a Forecast."""

AGENTS.extend(FORECASTS.values())


@workflow.defn
class Forecasting:
    """Runs the forecasts agent with `output_type=Forecast` for this run; `approved` puts approve() on the tool."""

    @workflow.run
    async def run(self, question: str, approved: bool) -> dict[str, Any]:
        result = await FORECASTS[approved].run(question, output_type=Forecast)
        assert isinstance(result.output, Forecast)
        return result.output.model_dump()


kept = Agent(FunctionModel(clerk, name="clerk"), name="kept", tools=[get_weather], store=MemoryStore())
"""The weather agent with a store (as one served over HTTP has): inside a workflow, Temporal keeps its runs."""

AGENTS.append(kept)


@workflow.defn
class Kept:
    """Runs the agent with a store, on a session or not."""

    @workflow.run
    async def run(self, question: str, session: str | None) -> str:
        agent = kept if session is None else weather
        return (await agent.run(question, session=session)).output


@workflow.defn
class PayBoth:
    """Two runs of the cash agent side by side in one workflow: both pause for a person."""

    @workflow.run
    async def run(self, question: str) -> list[str]:
        first, second = await asyncio.gather(cash.run(question), cash.run(f"{question}, once more"))
        return [first.output, second.output]
