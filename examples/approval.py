"""Approvals: a run pauses on the calls a person must approve, and a second process decides and finishes it.

`python examples/approval.py` runs the first part here (the agent reads two
files and asks to delete two; both deletes pause), saves the state to a file,
then starts a second Python process that loads it, approves one delete,
rejects the other with a reason, and resumes. A scripted model stands in for
a real one: each process gets the part of the conversation it plays.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import tempfile
from pathlib import Path

from middleware import approve
from onion import Agent, ModelCall, RunState, ToolRequest, tool
from onion.testing import FunctionModel, ScriptedModel

ASKED = [
    ToolRequest("call_1", "read_file", {"path": "notes.txt"}),
    ToolRequest("call_2", "delete_file", {"path": "old-draft.txt"}),
    ToolRequest("call_3", "delete_file", {"path": "taxes-2025.pdf"}),
]


@tool
def read_file(path: str) -> str:
    """Read a file."""
    return f"(contents of {path})"


@tool
def delete_file(path: str) -> str:
    """Delete a file."""
    print(f"  deleting {path}")
    return f"deleted {path}"


def build(model: ScriptedModel | FunctionModel) -> Agent:
    """The same agent in both processes: its tools, and deletes need a person."""
    agent = Agent(model, tools=[read_file, delete_file], name="tidy")
    return agent.use(approve("delete_file", reason="deleting needs a person"))


def summary(call: ModelCall) -> str:
    """The model's final answer: what its tools reported, rejections included."""
    answers = [m for m in call.messages if m.role == "tool"]
    return "Done. " + " | ".join(m.text for m in answers)


async def first_process(state_file: Path) -> list[str]:
    """Run until the pause; save the state as JSON."""
    result = await build(ScriptedModel([ASKED])).run("tidy my folder")
    state_file.write_text(result.to_state().to_json())
    return [f"paused: {call.id} {call.name}({call.args['path']}): {call.reason}" for call in result.pending]


async def second_process(state_file: Path) -> list[str]:
    """Load the state, decide, resume."""
    state = RunState.from_json(state_file.read_text())
    state.approve("call_2")
    state.reject("call_3", reason="keep tax records for 10 years")
    result = await build(FunctionModel(summary)).resume(state)
    return [f"{result.status}: {result.output}"]


def main(state_file: Path) -> list[str]:
    lines = asyncio.run(first_process(state_file))
    done = subprocess.run(
        [sys.executable, __file__, "resume", str(state_file)], capture_output=True, text=True, check=True
    )
    return lines + done.stdout.splitlines()


if __name__ == "__main__":
    if sys.argv[1:2] == ["resume"]:
        for line in asyncio.run(second_process(Path(sys.argv[2]))):
            print(line)
    else:
        for line in main(Path(tempfile.mkdtemp()) / "run-state.json"):
            print(line)
