"""A long run with many tools: `pseudonymize`, `compact` and `select_tools` together.

`python examples/long_run.py` runs one agent offline for 60 model calls. It
has 40 tools; `select_tools(4)` offers each request only four (five with
the tool whose result the model reads next). Each step
reads a page of a customer's file (long results); `compact(1_500, ...)`
clears old results and has a second, small model summarise older turns, so
no request goes over 1,500 tokens. The customer's e-mail address reaches
neither model: `pseudonymize` turns it into `<EMAIL_1>` before `compact`
and the summariser see the history, and gives the tool the real address.
"""

from __future__ import annotations

import asyncio
from typing import Any

from middleware import compact, pseudonymize, select_tools
from middleware.compact import estimate_tokens
from onion import Agent, ModelCall, Tool, ToolRequest, tool
from onion.testing import FunctionModel

ADDRESS = "ana.silva@example.com"
looked_up: list[str] = []


@tool
def read_customer_file(email: str, page: int) -> str:
    """Read one page of a customer's file, by their e-mail address."""
    looked_up.append(email)
    return f"page {page} of the file: " + "order history, notes, tickets. " * 12


def other_tool(n: int) -> Tool:
    def run(query: str) -> str:
        return query

    return Tool(run, name=f"inventory_tool_{n}", description=f"Inventory report number {n} for a warehouse query.")


def agent_step(call: ModelCall) -> Any:
    """The scripted agent model: 59 pages of the customer's file, then an answer."""
    step = call.run.steps
    if step < 60:
        return [ToolRequest(f"call_{step}", "read_customer_file", {"email": "<EMAIL_1>", "page": step})]
    return "I read the whole customer file of <EMAIL_1>."


async def main() -> dict[str, Any]:
    """What each model was sent, in numbers, and what the tool and the user got."""
    looked_up.clear()
    model = FunctionModel(agent_step)
    summarizer = FunctionModel(lambda call: "The user asked to read <EMAIL_1>'s customer file; pages read so far.")
    agent = Agent(
        model,
        tools=[read_customer_file, *(other_tool(n) for n in range(39))],
        instructions="You help the support team.",
        max_steps=70,
    ).use(
        pseudonymize,  # outermost: compact, the summariser and the model see <EMAIL_1>
        select_tools(4),  # before compact, which then counts the tools sent (4, +1 just called), not all forty
        compact(1_500, summarize=summarizer),
    )
    result = await agent.run(f"Read the whole customer file of {ADDRESS}, every page.")
    sent = [call.messages for call in [*model.requests, *summarizer.requests]]
    report = {
        "output": result.output,
        "requests": len(model.requests),
        "summaries": len(summarizer.requests),
        "most_tools_offered": max(len(call.tools) for call in model.requests),
        "most_tokens_sent": max(estimate_tokens(call.messages, call.tools) for call in model.requests),
        "address_sent": any(ADDRESS in message.text for messages in sent for message in messages),
        "tool_got": sorted(set(looked_up)),
    }
    for key, value in report.items():
        print(f"{key:20} {value}")
    return report


if __name__ == "__main__":
    asyncio.run(main())
