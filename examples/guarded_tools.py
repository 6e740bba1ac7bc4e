"""Guarding an agent's tools offline: deny_tools, redact and limit on a ScriptedModel.

Run it with `python examples/guarded_tools.py`; it prints what each layer did.
"""

from __future__ import annotations

import asyncio

from middleware import deny_tools, limit, redact
from onion import Agent, Handler, ToolCall, ToolResult, tool
from onion.testing import ScriptedModel, call


@tool
def search(query: str) -> str:
    """Search the help-desk knowledge base."""
    return f"3 articles about {query!r}"


@tool
def read_file(path: str) -> str:
    """Read a customer file."""
    return "Jane Doe <jane.doe@example.com>, card 4111 1111 1111 1111, order 1234 5678 9012 3456"


@tool
def delete_file(path: str) -> str:
    """Delete a file."""
    raise AssertionError("deny_tools must never let this run")


async def show_tool(call: ToolCall, call_next: Handler) -> ToolResult:
    """Outermost layer: print each tool call and the result the model will read."""
    result: ToolResult = await call_next(call)
    status = "BLOCKED" if result.is_error else "ok"
    print(f"  tool {call.name}({', '.join(f'{k}={v!r}' for k, v in call.args.items())}) -> {status}: {result.content}")
    return result


async def support_run() -> None:
    model = ScriptedModel(
        [
            [call("search", query="refund policy"), call("delete_file", path="/var/log/audit.log")],
            [call("search", query="jane doe"), call("read_file", path="customers/jane.txt")],
            [call("search", query="refund policy again")],
            "Refund approved for the customer on file.",
        ]
    )
    agent = Agent(model, tools=[search, read_file, delete_file])
    agent.use(show_tool, limit(tool_calls=10, per_tool={"search": 2}), deny_tools("delete_*"), redact())
    print("run 1: a support agent with deny_tools, redact and a per-tool limit")
    result = await agent.run("Customer jane.doe@example.com asks for a refund.")
    print("  tools offered to the model:", [t.name for t in model.requests[0].tools])
    print("  tools offered after search was used up:", [t.name for t in model.requests[-1].tools])
    print("  first message the model saw:", model.requests[0].messages[0].text)
    print("  customer file as the model saw it:", model.requests[2].messages[-1].text)
    print("  output:", result.output)


async def looping_run() -> None:
    model = ScriptedModel([[call("search", query=f"attempt {i}")] for i in range(10)])
    agent = Agent(model, tools=[search]).use(show_tool, limit(model_calls=3, on_limit="finish"))
    print("run 2: a model that never stops, cut off by limit(model_calls=3, on_limit='finish')")
    result = await agent.run("Find everything.")
    print(f"  model calls: {len(model.requests)}, usage requests: {result.usage.requests}")
    print("  output:", result.output)


async def main() -> None:
    await support_run()
    await looping_run()


if __name__ == "__main__":
    asyncio.run(main())
