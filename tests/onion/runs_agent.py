"""The agent `python -m onion runs approve ... --agent runs_agent:agent` loads in test_runs_cli.py.

`delete` pauses for approval. The model asks to delete each word of the input after the first
(`"tidy a.txt b.txt"`: calls `del-a.txt`, `del-b.txt`), then answers with the results it read. Every
tool run appends a line to the file $EFFECTS names. With $START_AT (seconds since the epoch), importing this
waits until then: processes that race start together.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from middleware import approve
from onion import Agent, ModelCall, ToolRequest, tool
from onion.testing import FunctionModel, ScriptItem


@tool
def delete(path: str) -> str:
    """Delete a file."""
    with Path(os.environ["EFFECTS"]).open("a") as effects:
        effects.write(f"delete {path}\n")
    return f"deleted {path}"


def answer(call: ModelCall) -> ScriptItem:
    last = call.messages[-1]
    if last.role == "tool":
        return "done: " + "; ".join(m.text for m in call.messages if m.role == "tool")
    return [ToolRequest(id=f"del-{word}", name="delete", args={"path": word}) for word in last.text.split()[1:]]


def build() -> Agent[str]:
    """A fresh agent (tests add a store or layers to their own)."""
    return Agent(FunctionModel(answer), tools=[delete], name="tidy").use(approve("delete", reason="deleting"))


agent = build()
time.sleep(max(0.0, float(os.environ.get("START_AT", "0")) - time.time()))
