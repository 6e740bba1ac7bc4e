"""A worker process for `test_pause_processes.py`, on the real Anthropic SDK against the fake server.

`start URL STATE EFFECTS`: run until the pause, write the state's JSON to STATE, exit.
`resume URL STATE EFFECTS`: load STATE, approve toolu_b, reject toolu_c, edit toolu_d, finish;
print the result as JSON. Every tool run appends a line to EFFECTS.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from middleware import approve
from onion import Agent, RunState, tool
from onion.providers import AnthropicModel


def build(url: str, effects: Path) -> Agent:
    def record(line: str) -> None:
        with effects.open("a") as file:
            file.write(line + "\n")

    @tool
    def read(path: str) -> str:
        """Read a file."""
        record(f"read {path}")
        return f"contents of {path}"

    @tool
    def delete(path: str) -> str:
        """Delete a file."""
        record(f"delete {path}")
        return f"deleted {path}"

    model = AnthropicModel("claude-test", base_url=url, api_key="test-key")
    return Agent(model, tools=[read, delete], name="tidy").use(approve("delete", reason="deleting needs a person"))


async def main(mode: str, url: str, state_file: Path, effects: Path) -> None:
    agent = build(url, effects)
    try:
        if mode == "start":
            result = await agent.run("tidy up", state={"user": "ann"})
            assert result.paused, result
            state_file.write_text(result.to_state().to_json())
            return
        state = RunState.from_json(state_file.read_text())
        state.approve("toolu_b")
        state.reject("toolu_c", reason="c.txt is the only copy")
        state.edit("toolu_d", {"path": "d.tmp"})
        result = await agent.resume(state)
        print(json.dumps({"status": result.status, "output": result.output, "state": result.state}))
    finally:
        await agent.aclose()


if __name__ == "__main__":
    mode, url, state_file, effects = sys.argv[1:5]
    asyncio.run(main(mode, url, Path(state_file), Path(effects)))
