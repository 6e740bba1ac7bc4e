"""Hooks with the event names users know: a before_each_tool guard and an after_tools reflection.

python examples/hooks.py
"""

from __future__ import annotations

import asyncio

from onion import Agent, ToolBatch, ToolCall, ToolResult, tool
from onion.hooks import Block, after_tools, before_each_tool, on_complete
from onion.testing import ScriptedModel, call


@tool
def read_file(path: str) -> str:
    """Read a text file."""
    return f"contents of {path}"


@tool
def delete_file(path: str) -> str:
    """Delete a file."""
    raise AssertionError("the guard never lets this run outside /tmp")


@before_each_tool("delete_file")
def only_tmp(call: ToolCall) -> Block | None:
    """A guard: deleting is allowed under /tmp only."""
    if not str(call.args.get("path", "")).startswith("/tmp/"):
        return Block("files may only be deleted under /tmp/")
    return None


@after_tools
def reflect(batch: ToolBatch, results: list[ToolResult]) -> None:
    """After a whole batch, the safe point: ask the model to reflect."""
    failed = [call.name for call, result in zip(batch.calls, results, strict=True) if result.is_error]
    batch.run.inject(f"Reflect: {len(results)} results, failures: {failed or 'none'}.")


@on_complete(errors="log")
def report(run: object, result: object) -> None:
    """An observer: if it fails, the failure is logged and the run goes on."""
    print("run complete")


async def main() -> list[str]:
    model = ScriptedModel(
        [[call("read_file", path="/etc/hosts"), call("delete_file", path="/etc/hosts")], "I could not delete it."]
    )
    agent = Agent(model, tools=[read_file, delete_file], middleware=[only_tmp, reflect, report])
    result = await agent.run("Read /etc/hosts, then delete it.")
    lines = [f"{m.role:9} {m.text or [c.name for c in m.tool_calls]}" for m in result.messages]
    print("\n".join(lines))
    return lines


if __name__ == "__main__":
    asyncio.run(main())
