"""Many users through one shared agent: nothing of one user reaches another, the logs or the disk.

200 concurrent runs of one agent for 20 users, through the real anthropic
SDK over HTTP to the fake provider server, with `redact`, `log` and
`cache(tools=True, key=...)` on SQLite, and a tool that reads the user from
its context. Afterwards every result, every request the server received,
every log record and the cache file is scanned for each user's data.

Then two tenants: two agents sharing one policy stack with `pseudonymize`,
each with its own store, the same session ids and so the same placeholders:
nothing of one tenant's customers reaches the other's results, model
requests, logs, journals, sessions or traces.
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

from middleware import cache, log, pseudonymize, redact
from middleware.cache import SQLiteStore
from onion import Agent, ModelCall, Stack, ToolCall, ToolRequest, tool, tracing
from onion.providers import AnthropicModel
from onion.stores import RedisStore
from onion.stores import SQLiteStore as SQLiteRunStore
from onion.testing import FakeProviderServer, FunctionModel, RecordedRequest, call
from onion.tracing._html import page

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
        self.records: list[logging.LogRecord] = []
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)
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


SESSIONS = [f"s{n:02d}" for n in range(50)]
CUSTOMERS = {
    (tenant, session): (f"{session}.{tenant}@{tenant}-customers.example", f"CUST-{tenant.upper()}-{n:04d}")
    for tenant in ("a", "b")
    for n, session in enumerate(SESSIONS)
}
"""Each tenant's customer on each session: an e-mail address and a customer id (`<EMAIL_1>`, `<CUSTOMER_1>`)."""
TENANT_OF = {value: tenant for (tenant, _), values in CUSTOMERS.items() for value in values}
CUSTOMER_VALUES = re.compile("|".join(re.escape(value) for value in TENANT_OF))


def tenants_in(text: str) -> set[str]:
    """The tenants whose customers' values `text` holds."""
    return {TENANT_OF[found] for found in CUSTOMER_VALUES.findall(text)}


mailed: list[tuple[str, str | None, str, str]] = []


@tool
def send_mail(to: str, body: str, call: ToolCall) -> str:
    """Send an e-mail."""
    mailed.append((call.run.agent.name, call.run.session, to, body))
    return f"sent to {to}: {body}"


def customer_service(seen: list[tuple[str, str]]) -> FunctionModel:
    """A model that greets, mails and confirms with placeholders only, recording each request it gets."""

    def answer(call: ModelCall) -> Any:
        seen.append((call.run.id, json.dumps([m.to_dict() for m in call.messages], ensure_ascii=False)))
        last = call.messages[-1]
        if last.role == "tool":
            return "Sent to <EMAIL_1> for <CUSTOMER_1>."
        if last.text.startswith("I am"):
            return "Noted, <CUSTOMER_1> at <EMAIL_1>."
        return [ToolRequest(f"mail-{call.run.id}", "send_mail", {"to": "<EMAIL_1>", "body": "Dear <CUSTOMER_1>"})]

    return FunctionModel(answer)


@pytest.mark.parametrize("stores", ["sqlite files", "redis namespaces"])
async def test_two_tenants_sharing_one_pseudonymize_policy_never_see_each_others_customers(
    stores: str, tmp_path: Path, records: Records, request: pytest.FixtureRequest
) -> None:
    """Two agents, one policy stack (`pseudonymize` outside `log`), two stores: on the same 50 session ids, 100
    concurrent first turns and 100 concurrent second turns (every customer is `<EMAIL_1>` and `<CUSTOMER_1>`).
    Each result and each mail has its own customer's values; the model, the journals and the sessions get
    placeholders only; no log record or trace of a run holds the other tenant's values. After tenant a's sessions
    are cleared, its 50 runs that type `<EMAIL_1>` get it back as typed."""
    if stores == "sqlite files":
        store_a, store_b = SQLiteRunStore(tmp_path / "a.db"), SQLiteRunStore(tmp_path / "b.db")
    else:
        url, tag = request.getfixturevalue("redis_url"), secrets.token_hex(4)
        store_a, store_b = RedisStore(url, namespace=f"a{tag}"), RedisStore(url, namespace=f"b{tag}")
    policy = Stack(pseudonymize(CUSTOMER=r"CUST-[AB]-\d{4}"), log(payloads=True), name="policy")
    seen: dict[str, list[tuple[str, str]]] = {"a": [], "b": []}
    agents = {
        tenant: Agent(customer_service(seen[tenant]), tools=[send_mail], store=store, middleware=[policy], name=tenant)
        for tenant, store in (("a", store_a), ("b", store_b))
    }
    runs: dict[str, str] = {}  # run id -> tenant
    mailed.clear()

    async def turn(tenant: str, session: str, text: str) -> tuple[str, str, str]:
        result = await agents[tenant].run(text, session=session)
        runs[result.run_id] = tenant
        return tenant, session, result.output

    everyone = [(tenant, session) for session in SESSIONS for tenant in ("a", "b")]
    try:
        with tracing.capture(max_runs=None) as trace:
            first = await asyncio.gather(*(turn(t, s, "I am {}, {}".format(*CUSTOMERS[t, s])) for t, s in everyone))
            second = await asyncio.gather(*(turn(t, s, "mail me") for t, s in everyone))
        for tenant, session, output in first:
            email, customer = CUSTOMERS[tenant, session]
            assert output == f"Noted, {customer} at {email}."
        for tenant, session, output in second:
            email, customer = CUSTOMERS[tenant, session]
            assert output == f"Sent to {email} for {customer}."
        assert sorted(mailed) == sorted((t, s, CUSTOMERS[t, s][0], f"Dear {CUSTOMERS[t, s][1]}") for t, s in everyone)

        for tenant, store in (("a", store_a), ("b", store_b)):
            assert len(seen[tenant]) == 150 and all(runs[run_id] == tenant for run_id, _ in seen[tenant])
            assert not any(tenants_in(sent) for _, sent in seen[tenant]), "a real value reached the model"
            own = [run_id for run_id, of in runs.items() if of == tenant]
            journals = [json.dumps(await store.journal(run_id), ensure_ascii=False) for run_id in own]
            assert len(journals) == 100 and not any(tenants_in(journal) for journal in journals)
            sessions = [json.dumps([m.to_dict() for m in await store.session(s).messages()]) for s in SESSIONS]
            assert all("<EMAIL_1>" in session for session in sessions)
            assert not any(tenants_in(session) for session in sessions)
        assert len(trace) == 200
        for span in trace:
            tenant = runs[span.ctx.id]
            assert tenants_in(str(span) + page([span])) <= {tenant}
        logged = [record for record in records.records if record.run_id in runs]
        assert len(logged) > 400
        for record in logged:
            assert tenants_in(record.getMessage()) <= {runs[record.run_id]}

        mailed.clear()
        await asyncio.gather(*(store_a.session(session).clear() for session in SESSIONS))
        again = await asyncio.gather(*(turn("a", s, "mail <EMAIL_1> about <CUSTOMER_1>") for s in SESSIONS))
        assert all(output == "Sent to <EMAIL_1> for <CUSTOMER_1>." for _, _, output in again)
        assert sorted(mailed) == [("a", s, "<EMAIL_1>", "Dear <CUSTOMER_1>") for s in SESSIONS]
    finally:
        await store_a.aclose()
        await store_b.aclose()
