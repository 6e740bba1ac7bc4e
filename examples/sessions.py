"""Sessions: one conversation per user, kept in SQLite, continued by every run.

Run it twice: the second time, the agent still knows your name.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

from onion import Agent, ModelCall
from onion.stores import SQLiteStore
from onion.testing import FunctionModel


def remembering_model(call: ModelCall) -> str:
    """A stand-in for a real model: it answers from everything the user said in the conversation."""
    said = [m.text for m in call.messages if m.role == "user"]
    names = [text.removeprefix("I am ") for text in said if text.startswith("I am ")]
    if said[-1] == "Who am I?":
        return f"You are {names[-1]}." if names else "I don't know yet."
    return f"Nice to meet you, {names[-1]}." if names else "Hello."


async def main(path: Path) -> list[str]:
    async with SQLiteStore(path) as store:
        agent = Agent(FunctionModel(remembering_model), store=store, instructions="Remember the user.")
        answers = [
            (await agent.run("I am Ada", session="user-42")).output,
            (await agent.run("Who am I?", session="user-42")).output,
            (await agent.run("Who am I?", session="user-7")).output,
        ]
        history = await store.session("user-42").messages()
        answers.append(f"user-42 has {len(history)} messages")
        await store.session("user-7").clear()
        return answers


if __name__ == "__main__":
    where = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp()) / "sessions.db"
    for line in asyncio.run(main(where)):
        print(line)
