"""Many users through one shared agent: nothing of one user reaches another, the logs or the disk.

200 concurrent runs of one agent for 20 users, through the real anthropic
SDK over HTTP to the fake provider server, with `redact`, `log` and
`cache(tools=True, key=...)` on SQLite, and a tool that reads the user from
its context. Afterwards every result, every request the server received,
every log record and the cache file is scanned for each user's data.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import secrets
from pathlib import Path
from typing import Any

import pytest

from middleware import cache, log, redact
from middleware.cache import SQLiteStore
from onion import Agent, ToolCall, tool
from onion.providers import AnthropicModel
from onion.testing import FakeProviderServer, call
from onion.testing.server import RecordedRequest

USERS = {f"u{n:02d}": (f"user{n:02d}@corp.example", f"ORD-{n:02d}-{secrets.token_hex(4)}") for n in range(20)}
OWNER = {marker: user for user, data in USERS.items() for marker in data}
MARKERS = re.compile("|".join(re.escape(marker) for marker in OWNER))


def owners(text: str) -> set[str]:
    """The users whose e-mail or order id appears in `text`."""
    return {OWNER[found] for found in MARKERS.findall(text)}


@tool
def my_orders(call: ToolCall) -> str:
    """The orders of the user this run serves."""
    user = call.run.state["user"]
    return f"open orders: {USERS[user][1]}"


def answer(request: RecordedRequest) -> Any:
    """First turn: call `my_orders`; after its result: repeat the result and what the user said."""
    messages = request.body["messages"]
    last = messages[-1]["content"]
    results = [block for block in last if isinstance(block, dict) and block.get("type") == "tool_result"]
    if not results:
        return [call("my_orders")]
    content = results[0]["content"]
    text = content if isinstance(content, str) else "".join(part["text"] for part in content)
    said = messages[0]["content"]
    said = said if isinstance(said, str) else "".join(part.get("text", "") for part in said)
    return f"You said: {said} Your {text}."


class Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@pytest.fixture
def records() -> Any:
    handler = Records()
    logger = logging.getLogger("onion")
    logger.addHandler(handler)
    level = logger.level
    logger.setLevel(logging.INFO)
    yield handler
    logger.removeHandler(handler)
    logger.setLevel(level)


async def test_two_hundred_runs_for_twenty_users_never_mix_their_data(tmp_path: Path, records: Records) -> None:
    """Results, provider requests, logs and the cache file each hold at most one user's data, and no raw e-mail."""
    path = tmp_path / "cache.db"
    store = SQLiteStore(path)
    with FakeProviderServer(respond=answer) as server:
        model = AnthropicModel("claude-test", base_url=server.url, api_key="test-key")
        agent = Agent(model, tools=[my_orders]).use(
            redact,
            log,
            cache(store=store, tools=True, key=lambda call: call.run.state["user"]),
        )

        async def serve(user: str) -> tuple[str, str]:
            email = USERS[user][0]
            result = await agent.run(f"I am {email}, list my orders.", state={"user": user})
            return user, result.output

        outputs = await asyncio.gather(*(serve(user) for _ in range(10) for user in USERS))
        await model.aclose()
    store.close()

    assert len(outputs) == 200
    for user, output in outputs:
        assert USERS[user][1] in output, output
        assert owners(output) <= {user}, f"{user} was shown {owners(output) - {user}}: {output}"
    assert len(server.requests) >= 40  # at least one model round trip per user; the rest may be cache hits
    for request in server.requests:
        body = json.dumps(request.body, ensure_ascii=False)
        assert len(owners(body)) <= 1, f"one request carried several users' data: {owners(body)}"
        assert not any(email in body for email, _ in USERS.values()), "a raw e-mail reached the provider"
    assert records.lines, "log wrote nothing"
    for line in records.lines:
        assert len(owners(line)) <= 1, f"one log record mixed users: {line}"
        assert not any(email in line for email, _ in USERS.values()), f"a raw e-mail was logged: {line}"
    stored = path.read_bytes() + b"".join(p.read_bytes() for p in tmp_path.glob("cache.db-*"))
    text = stored.decode("utf-8", "replace")
    assert not any(email in text for email, _ in USERS.values()), "a raw e-mail was written to the cache file"
    assert sum(order in text for _, order in USERS.values()) == 20, "each user's tool result is cached, under its key"
