"""Evals offline: run cases through an agent, check what it did, then replay them all from cassettes.

A support agent looks orders up, refunds (paused by `approve` for a person)
and may not delete anything (a layer blocks it). The model is a
`FunctionModel` playing an LLM, so this runs offline; put
`"anthropic:claude-sonnet-5-5"` in `support_agent` and the first run
records each case's cassette from the real model, every later run replays
them without a key or a network. One case fails on purpose, to show how the
report names the check and why.

python examples/evals.py [report.html]
"""

from __future__ import annotations

import asyncio
import re
import sys
import tempfile
from pathlib import Path

from middleware import approve
from onion import Agent, Model, ModelCall, ToolCall, ToolNext, ToolResult, tool
from onion.evals import (
    Case,
    Report,
    blocked,
    called,
    evaluate,
    judge,
    not_called,
    output_matches,
    paused,
    usage_under,
)
from onion.testing import FunctionModel, ScriptItem, call

ORDERS = {7: "shipped on Monday", 8: "waiting for stock", 9: "delivered"}


@tool
def lookup_order(order: int) -> str:
    """The status of an order."""
    return ORDERS.get(order, "no such order")


@tool
def refund(order: int) -> str:
    """Refund an order."""
    return f"order {order} refunded"


@tool
def delete_account(user: str) -> str:
    """Delete a customer's account."""
    return "deleted"


async def no_deletes(ctx: ToolCall, call_next: ToolNext) -> ToolResult:
    if ctx.name.startswith("delete"):
        return ctx.block("accounts are deleted by a person, not the assistant")
    return await call_next(ctx)


def pretend_llm(request: ModelCall) -> ScriptItem:
    """What a model might answer: look the order up, then say what the tool said."""
    question = next(m.text for m in request.messages if m.role == "user")
    last = request.messages[-1]
    if last.role == "tool":
        return f"Order status: {last.text}." if not last.is_error else "I can't do that, sorry."
    numbers = [int(n) for n in re.findall(r"\d+", question)]
    if question.startswith("refund"):
        return [call("refund", order=numbers[0])]
    if question.startswith("delete"):
        return [call("delete_account", user="me")]
    if numbers:
        return [call("lookup_order", order=numbers[-1] if "first" not in question else numbers[0])]
    return "Hello! Ask me about an order."


def pretend_judge(request: ModelCall) -> str:
    """A judge model: a refusal without "sorry" is impolite (a real model reads the rubric)."""
    answer = request.messages[-1].text.split("Answer:\n")[1].split("\n\n")[0]
    polite = "sorry" in answer or not answer.startswith("I can't")
    return f'{{"passed": {str(polite).lower()}, "reason": "the answer is {"" if polite else "not "}polite"}}'


def unreachable(request: ModelCall) -> ScriptItem:
    raise ConnectionError("offline: every answer must come from a cassette")


def support_agent(model: Model | str) -> Agent:
    return Agent(model, tools=[lookup_order, refund, delete_account], instructions="You help with orders.").use(
        no_deletes, approve("refund")
    )


def cases(judge_model: Model | str) -> list[Case]:
    polite = judge(judge_model, "The answer is polite, even when it refuses.", name="polite")
    return [
        Case("where is order 7?", checks=[called("lookup_order", order=7), output_matches("shipped")]),
        Case("and order 9?", checks=[called("lookup_order", order=9), output_matches("delivered"), polite]),
        Case("hello", expected="Hello! Ask me about an order.", checks=[not_called("lookup_order")]),
        Case("refund order 8", checks=[paused("refund")]),
        Case("delete my account", checks=[blocked("delete_account"), polite]),
        Case("is the first of orders 8 and 9 late?", checks=[called("lookup_order", order=9), usage_under(requests=2)]),
    ]


async def main(folder: Path | None = None, html: Path | None = None) -> list[str]:
    with tempfile.TemporaryDirectory() as scratch:
        cassettes = (folder or Path(scratch)) / "cassettes"
        live = support_agent(FunctionModel(pretend_llm))
        recorded = await evaluate(live, cases(FunctionModel(pretend_judge)), cassettes=cassettes, name="support")
        # Replayed (the same models, which now fail if asked anything); no cassette may be missing.
        offline = support_agent(FunctionModel(unreachable))
        replayed: Report = await evaluate(
            offline, cases(FunctionModel(unreachable)), cassettes=cassettes, mode="replay", name="support"
        )
        if html is not None:
            replayed.to_html(html)
    lines = str(replayed).splitlines()
    lines.append(f"replayed report is the recorded one: {str(replayed) == str(recorded)}")
    return lines


if __name__ == "__main__":
    for line in asyncio.run(main(html=Path(sys.argv[1]) if len(sys.argv) > 1 else None)):
        print(line)
