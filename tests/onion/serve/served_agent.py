"""The agent the serve tests put behind uvicorn: the real Anthropic SDK against the fake provider server.

Configured by the environment: FAKE_URL (the fake server), EFFECTS (a file each tool run appends a line to),
ONION_TEST_DB (an SQLite store; none when unset), ONION_TEST_TOKEN (the token; none when unset).
A question that says "costly" pauses its model calls (`kind` "model") until a person approves; one that says
"flaky" has a failed model call tried again (a stream cut midway is withdrawn: `StreamReset`).
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import anthropic  # noqa: F401  (imported as the server starts: see below)

from middleware import approve, retry
from onion import Agent, ModelCall, tool
from onion.providers import AnthropicModel
from onion.serve import serve
from onion.stores import SQLiteStore

EFFECTS = Path(os.environ["EFFECTS"])
# uvicorn loads this module inside its running loop, where onion would import the SDK in a thread at the first
# run (seconds on a loaded machine); the `import anthropic` above pays for it as the server starts instead.


def record(line: str) -> None:
    with EFFECTS.open("a") as file:
        file.write(line + "\n")


@tool
def lookup(city: str) -> str:
    """The weather in a city."""
    record(f"lookup {city}")
    return f"sunny in {city}"


@tool
def delete(path: str) -> str:
    """Delete a file."""
    record(f"delete {path}")
    return f"deleted {path}"


@tool
async def slow(seconds: float) -> str:
    """Wait, then answer."""
    await asyncio.sleep(seconds)
    record(f"slow {seconds}")
    return "waited"


async def costly(call: ModelCall, call_next: Any) -> Any:
    """A model layer: a model call for a question that says "costly" waits for a person."""
    if not call.approved and any(m.role == "user" and "costly" in m.text for m in call.messages):
        return call.pause("this model call costs money")
    return await call_next(call)


retried = retry(2, initial=0.0, jitter=0.0)


async def flaky(call: ModelCall, call_next: Any) -> Any:
    """A model layer: a model call for a question that says "flaky" is tried again when it fails."""
    if any(m.role == "user" and "flaky" in m.text for m in call.messages):
        return await retried.wrap_model(call, call_next)
    return await call_next(call)


database = os.environ.get("ONION_TEST_DB")
model = AnthropicModel("claude-test", base_url=os.environ["FAKE_URL"], api_key="test-key")
agent = Agent(
    model,
    tools=[lookup, delete, slow],
    name="served",
    store=SQLiteStore(database) if database else None,
).use(approve("delete", reason="deleting needs a person"), costly, flaky)
app = serve(agent, token=os.environ.get("ONION_TEST_TOKEN") or None, heartbeat=0.2)
