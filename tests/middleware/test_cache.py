"""`cache`: identical model requests served from a store with zero usage."""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import uuid
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from middleware import _cache_entries as cache_entries
from middleware import cache, redact, retry
from middleware._cache_entries import credential_hash, hashed_credentials, model_options
from middleware.cache import MemoryStore, SQLiteStore, decode_response, encode_response, request_key
from onion import (
    Agent,
    Handler,
    Image,
    Message,
    ModelCall,
    ModelResponse,
    Run,
    Tool,
    ToolCall,
    ToolRequest,
    Usage,
    tool,
)
from onion.errors import ServerError
from onion.providers import AnthropicModel, OpenAIChatModel, OpenAIResponsesModel
from onion.testing import FakeProviderServer, FakeTime, FunctionModel, ScriptedModel, call


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def counting_model(answer: str = "hello") -> FunctionModel:
    return FunctionModel(lambda call: ModelResponse(Message.assistant(answer), Usage(10, 5, 1), model="m-1"))


async def test_bare_cache_serves_a_repeated_request_with_zero_usage_and_marks_it() -> None:
    model = counting_model()
    agent = Agent(model).use(cache)
    first = await agent.run("hi")
    second = await agent.run("hi")
    assert len(model.requests) == 1
    assert second.output == first.output == "hello"
    assert first.usage.input_tokens == 10 and second.usage == Usage()
    assert first.state["cache"] == {"hits": 0, "misses": 1}
    assert second.state["cache"] == {"hits": 1, "misses": 0}


async def test_the_same_prompt_with_two_output_types_makes_two_model_requests() -> None:
    """An answer cached for one output type is never served for another (nor for plain text)."""

    class First(BaseModel):
        value: int

    class Second(BaseModel):
        value: int
        note: str = ""

    model = counting_model('{"value": 1}')
    agent = Agent(model).use(cache)
    assert (await agent.run("hi", output_type=First)).output == First(value=1)
    assert (await agent.run("hi", output_type=Second)).output == Second(value=1)
    assert (await agent.run("hi")).output == '{"value": 1}'
    assert (await agent.run("hi", output_type=First)).state["cache"] == {"hits": 1, "misses": 0}
    assert len(model.requests) == 3


async def test_a_hit_is_a_cached_response_visible_to_outer_layers() -> None:
    seen: list[ModelResponse] = []

    async def spy(ctx: ModelCall, call_next: Handler) -> ModelResponse:
        response: ModelResponse = await call_next(ctx)
        seen.append(response)
        return response

    agent = Agent(counting_model()).use(spy, cache)
    await agent.run("hi")
    await agent.run("hi")
    assert [r.cached for r in seen] == [False, True]
    assert seen[1].model == "m-1" and seen[1].usage == Usage()


async def test_different_requests_miss() -> None:
    model = counting_model()
    layer = cache()
    await Agent(model).use(layer).run("hi")
    await Agent(model).use(layer).run("hello")
    await Agent(model, settings={"temperature": 0.5}).use(layer).run("hi")
    await Agent(model, tools=[add]).use(layer).run("hi")
    assert len(model.requests) == 4 and layer.misses == 4 and layer.hits == 0


async def test_tool_calls_round_trip_with_their_ids_and_the_run_continues_from_the_cache() -> None:
    script = [[ToolRequest(id="call_A", name="add", args={"a": 1, "b": 2})], "3"]
    layer = cache()
    first = await Agent(ScriptedModel(script), tools=[add]).use(layer).run("1+2?")
    replay = ScriptedModel([])
    second = await Agent(replay, tools=[add]).use(layer).run("1+2?")
    assert replay.requests == [] and second.output == "3"
    assert second.messages[1].tool_calls[0].id == "call_A"
    assert [m.text for m in second.messages] == [m.text for m in first.messages]


async def test_the_key_ignores_dict_order_and_provider_tool_call_ids() -> None:
    def model_call(args: dict[str, int], call_id: str, settings: dict[str, object]) -> ModelCall:
        agent = Agent(ScriptedModel([]), tools=[add])
        run_messages = [Message.user("q"), Message.assistant("", [ToolRequest(call_id, "add", args)])]
        run_messages.append(Message.tool(call_id, "3"))
        return ModelCall(Run(agent, "q", run_messages), run_messages, agent.tools, agent.model, settings)

    one = model_call({"a": 1, "b": 2}, "x1", {"temperature": 0, "max_tokens": 5})
    two = model_call({"b": 2, "a": 1}, "y9", {"max_tokens": 5, "temperature": 0})
    assert request_key(one) == request_key(two)
    assert request_key(one) != request_key(one, namespace="other")
    assert request_key(one) != request_key(model_call({"a": 2, "b": 2}, "x1", {}))


async def test_errors_are_never_cached() -> None:
    model = ScriptedModel([ServerError("boom"), "ok"])
    agent = Agent(model).use(cache)
    with pytest.raises(ServerError):
        await agent.run("hi")
    assert (await agent.run("hi")).output == "ok"


async def test_entries_expire_after_ttl() -> None:
    """With ttl=20, an entry is served for 20 s of the store's clock, then asked for again."""
    fake, model = FakeTime(), counting_model()
    agent = Agent(model).use(cache(ttl=20, store=MemoryStore(clock=fake.clock)))
    await agent.run("hi")
    fake.now += 19
    await agent.run("hi")
    assert len(model.requests) == 1
    fake.now += 2
    await agent.run("hi")
    assert len(model.requests) == 2


async def test_namespaces_keep_caches_apart() -> None:
    store, model = MemoryStore(), counting_model()
    await Agent(model).use(cache(store=store, namespace="a")).run("hi")
    await Agent(model).use(cache(store=store, namespace="b")).run("hi")
    await Agent(model).use(cache(store=store, namespace="a")).run("hi")
    assert len(model.requests) == 2


async def test_memory_store_evicts_the_least_recently_used() -> None:
    store = MemoryStore(max_entries=2)
    await store.set("a", "1", None)
    await store.set("b", "2", None)
    assert await store.get("a") == "1"
    await store.set("c", "3", None)
    assert await store.get("b") is None and await store.get("a") == "1" and len(store) == 2


async def test_sqlite_store_persists_across_instances_and_expires(tmp_path: Path) -> None:
    path, fake = tmp_path / "cache.db", FakeTime(1_000_000.0)
    model = counting_model()
    with SQLiteStore(path) as first:
        await Agent(model).use(cache(store=first)).run("hi")
    reopened = SQLiteStore(path, clock=fake.clock)
    result = await Agent(model).use(cache(store=reopened)).run("hi")
    assert len(model.requests) == 1 and result.output == "hello"
    await reopened.set("old", "x", 10)
    fake.now += 9
    assert await reopened.get("old") == "x"
    fake.now += 2
    assert await reopened.get("old") is None
    await reopened.set("older", "x", 10)
    fake.now += 11
    assert reopened.purge() == 1
    reopened.close()


async def test_sqlite_store_waits_for_another_process_lock_without_blocking_the_loop(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "locked.db"
    with SQLiteStore(path, busy_timeout=30) as store:
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        writing = asyncio.create_task(store.set("k", "v", None))
        for _ in range(100):  # the loop goes on running while the write waits for the lock
            await asyncio.sleep(0)
        assert not writing.done()
        other.execute("COMMIT")
        await writing
        other.close()
        assert await store.get("k") == "v"


def test_sqlite_store_rejects_a_table_name_that_is_not_an_identifier(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="identifier"):
        SQLiteStore(tmp_path / "x.db", table="a; DROP TABLE b")


def test_responses_round_trip_faithfully() -> None:
    requests = [ToolRequest("id1", "add", {"a": 1, "b": [1, {"x": None}]}), ToolRequest("id2", "bad", {}, "{oops")]
    message = Message.assistant("text é", requests)
    message.meta = {"thinking": "hmm"}
    original = ModelResponse(message, Usage(1, 2, 1), "max_tokens", model="claude-x")
    agent = Agent(ScriptedModel([]))
    run = Run(agent, "q", [])
    back = decode_response(encode_response(original, ModelCall(run, [], [], agent.model, {})))
    assert back.cached and back.usage == Usage()
    assert (back.text, back.stop_reason, back.model) == ("text é", "max_tokens", "claude-x")
    assert back.message.meta == {"thinking": "hmm"}
    assert back.tool_calls == requests


async def test_tool_results_are_cached_only_for_opted_in_tools_and_never_errors() -> None:
    runs: list[int] = []

    @tool
    def lookup(key: str) -> str:
        """Look up."""
        runs.append(1)
        if key == "bad":
            raise KeyError(key)
        return f"value of {key}"

    def script() -> ScriptedModel:
        return ScriptedModel([[call("lookup", key="k"), call("lookup", key="bad")], "done"])

    layer = cache(tools=["lookup"], namespace="t")
    await Agent(script(), tools=[lookup]).use(layer).run("one")
    result = await Agent(script(), tools=[lookup]).use(layer).run("two")
    assert len(runs) == 3  # "k" once, "bad" twice
    assert result.messages[-3].text == "value of k" and result.messages[-2].is_error
    assert result.state["cache"]["hits"] == 1

    runs.clear()
    plain = cache()
    await Agent(script(), tools=[lookup]).use(plain).run("one")
    await Agent(script(), tools=[lookup]).use(plain).run("two")
    assert len(runs) == 4


async def test_cache_outside_retry_caches_the_retried_success_once() -> None:
    """cache -> retry: a failure then success is stored; the next run is a hit without any attempt."""
    model = ScriptedModel([ServerError("flaky"), "ok"])
    agent = Agent(model).use(cache, retry(initial=0.001, jitter=0))
    assert (await agent.run("hi")).output == "ok"
    result = await agent.run("hi")
    assert result.output == "ok" and len(model.requests) == 2 and "retries" not in result.state


async def test_cache_inside_retry_is_consulted_on_every_attempt() -> None:
    """retry -> cache: each attempt looks the request up again (a miss each time while it fails)."""
    model = ScriptedModel([ServerError("flaky"), "ok"])
    layer = cache()
    result = await Agent(model).use(retry(initial=0.001, jitter=0), layer).run("hi")
    assert result.output == "ok" and result.state["cache"] == {"hits": 0, "misses": 2}


def test_the_key_covers_each_tool_schema_and_not_the_tool_list_object() -> None:
    """Tool lists are serialized once per list of `Tool`s; equal lists key alike, a different schema differs."""

    def subtract(a: int, b: int) -> int:
        """Add two numbers."""
        return a - b

    other = tool(name="add")(subtract)
    other.parameters = {**other.parameters, "required": ["a"]}
    agent = Agent(ScriptedModel([]), tools=[add])
    run_messages = [Message.user("q")]

    def key(tools: list[Tool]) -> str:
        return request_key(ModelCall(Run(agent, "q", run_messages), run_messages, tools, agent.model, {}))

    assert key([add]) == key([add]) == key(list(agent.tools))
    assert key([add]) != key([other]) and key([add]) != key([add, add]) and key([]) != key([add])


@tool
def my_orders(call: ToolCall) -> str:
    """The orders of the user the run serves."""
    return f"orders of {call.run.state['user']}"


def orders_script() -> ScriptedModel:
    return ScriptedModel([[call("my_orders")], "done"])


async def test_a_tool_that_takes_the_call_context_is_not_cached_without_a_key_function() -> None:
    """cache(tools=True): a tool reading the user from its context gives each user their own data, not a cached one."""
    layer = cache(tools=True)
    alice = await Agent(orders_script(), tools=[my_orders]).use(layer).run("orders?", state={"user": "alice"})
    bob = await Agent(orders_script(), tools=[my_orders]).use(layer).run("orders?", state={"user": "bob"})
    assert alice.messages[2].text == "orders of alice"
    assert bob.messages[2].text == "orders of bob"


async def test_a_key_function_scopes_tool_entries_so_context_tools_are_cached_per_user() -> None:
    """cache(key=...): its value joins every key; a context tool is then cached, one entry per user."""
    runs: list[str] = []

    @tool
    def orders(call: ToolCall) -> str:
        """The orders of the user the run serves."""
        runs.append(call.run.state["user"])
        return f"orders of {call.run.state['user']}"

    def script() -> ScriptedModel:
        return ScriptedModel([[call("orders")], "done"])

    layer = cache(tools=["orders"], key=lambda call: call.run.state["user"])
    for user in ("alice", "bob", "alice", "bob"):
        result = await Agent(script(), tools=[orders]).use(layer).run("orders?", state={"user": user})
        assert result.messages[2].text == f"orders of {user}"
    assert runs == ["alice", "bob"]


async def test_a_tool_declared_to_take_context_is_not_cached_and_a_named_one_is_reported_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """`Tool.takes_context = True` keeps a tool that reads the user elsewhere out; naming it logs why, once."""
    current = {"user": "alice"}

    @tool
    def profile() -> str:
        """The current user's profile."""
        return f"profile of {current['user']}"

    profile.takes_context = True
    assert my_orders.takes_context and not add.takes_context
    layer = cache(tools=["profile"])
    with caplog.at_level(logging.WARNING, logger="onion.cache"):
        for user in ("alice", "bob", "bob"):
            current["user"] = user
            script = ScriptedModel([[call("profile")], "done"])
            result = await Agent(script, tools=[profile]).use(layer).run("me?")
            assert result.messages[2].text == f"profile of {user}"
    assert [r.getMessage() for r in caplog.records if "profile" in r.getMessage()] == [
        "cache: tool profile takes the call context, so it is not cached; give cache(key=...) to cache it per key"
    ]


async def test_a_cache_write_that_cannot_take_the_lock_is_logged_once_and_the_answer_returned(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Another connection holds the write lock past busy_timeout: both runs return the model's answer."""
    import sqlite3

    path = tmp_path / "locked.db"
    model = counting_model()
    with SQLiteStore(path, busy_timeout=0.01) as store:
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        agent = Agent(model).use(cache(store=store))
        with caplog.at_level(logging.WARNING, logger="onion.cache"):
            assert (await agent.run("hi")).output == "hello"
            assert (await agent.run("hi")).output == "hello"
        other.execute("COMMIT")
        other.close()
        assert len(model.requests) == 2
        failures = [r for r in caplog.records if r.name == "onion.cache"]
        assert len(failures) == 1 and "database is locked" in failures[0].getMessage()
        assert (await agent.run("hi")).output == "hello" and len(model.requests) == 3
        assert (await agent.run("hi")).state["cache"] == {"hits": 1, "misses": 0}


async def test_a_cache_write_to_a_full_or_read_only_database_returns_the_answer(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A database at its page limit, or read-only, cannot store: the tool and model answers still arrive."""
    limits = {"full": "PRAGMA max_page_count = {pages}", "readonly": "PRAGMA query_only = ON"}
    for problem, pragma in limits.items():
        with SQLiteStore(tmp_path / f"{problem}.db") as store:
            pages = store._db.execute("PRAGMA page_count").fetchone()[0]
            store._db.execute(pragma.format(pages=pages))
            script = ScriptedModel([[call("add", a=1, b=2)], "x" * 10_000])
            caplog.clear()
            with caplog.at_level(logging.WARNING, logger="onion.cache"):
                result = await Agent(script, tools=[add]).use(cache(store=store, tools=True)).run("1+2?")
            assert result.messages[2].text == "3" and result.output == "x" * 10_000
            assert [problem in r.getMessage() for r in caplog.records] == [True]


async def test_lone_surrogates_in_requests_tool_arguments_and_answers_neither_crash_nor_collide(
    tmp_path: Path,
) -> None:
    """A non-UTF-8 file name (`caf\\udce9`) in the input, a tool's arguments or an answer is keyed and stored."""
    opened: list[str] = []

    @tool
    def read(path: str) -> str:
        """Read a file."""
        opened.append(path)
        return f"contents of {path!a}"

    def script() -> ScriptedModel:
        calls = [call("read", path="caf\udce9"), call("read", path="caf\udce8")]
        return ScriptedModel([calls, "done caf\udce9"])

    with SQLiteStore(tmp_path / "cache.db") as store:
        layer = cache(store=store, tools=True)
        first = await Agent(script(), tools=[read]).use(layer).run("list caf\udce9")
        replay = ScriptedModel([])
        second = await Agent(replay, tools=[read]).use(layer).run("list caf\udce9")
    assert sorted(opened) == ["caf\udce8", "caf\udce9"] and replay.requests == []  # the two ran in parallel
    assert [m.text for m in second.messages] == [m.text for m in first.messages]
    assert second.messages[3].text == "contents of 'caf\\udce8'" and second.output == "done caf\udce9"


async def test_an_answer_made_under_other_model_options_is_not_served(
    server: FakeProviderServer, one_ssl_context: None
) -> None:
    """An answer cut at max_tokens=16 is not served to a model configured for 4096: both requests reach the API."""
    layer = cache()
    server.script(["cut", "whole answer"])
    short = AnthropicModel("claude-test", base_url=server.url, api_key="test-key", max_tokens=16)
    long = AnthropicModel("claude-test", base_url=server.url, api_key="test-key", max_tokens=4096)
    try:
        assert (await Agent(short).use(layer).run("hi")).output == "cut"
        assert (await Agent(long).use(layer).run("hi")).output == "whole answer"
        assert (await Agent(long).use(layer).run("hi")).output == "whole answer"
    finally:
        await short.aclose()
        await long.aclose()
    assert [request.body["max_tokens"] for request in server.requests] == [16, 4096]


async def test_the_key_covers_model_options_base_url_and_a_hash_of_each_credential_never_the_credential() -> None:
    """Every model option that changes the answer splits the key, and so does each credential (API key, auth
    header, a client's own headers): by its SHA-256, so the key's input never holds a credential itself."""
    from anthropic import AsyncAnthropic
    from openai import AsyncOpenAI

    def head(model: object, settings: dict[str, Any] | None = None) -> str:
        """What the key hashes, besides the messages and tools: the model's options and the settings."""
        return json.dumps([model_options(model), hashed_credentials(settings or {})])

    def key(model: object, settings: dict[str, Any] | None = None) -> str:
        agent = Agent(ScriptedModel([]))
        messages = [Message.user("q")]
        return request_key(ModelCall(Run(agent, "q", messages), messages, [], model, settings or {}))  # type: ignore[arg-type]

    def anthropic(**options: Any) -> AnthropicModel:
        return AnthropicModel("claude-x", **{"api_key": "sk-ant-api03-first-secret", **options})

    assert key(anthropic()) == key(anthropic()) != key(anthropic(api_key="sk-ant-api03-other-secret"))
    assert "first-secret" not in head(anthropic())
    assert key(anthropic()) != key(anthropic(max_tokens=16))
    assert key(anthropic(base_url="http://a.test")) != key(anthropic(base_url="http://b.test"))
    built = anthropic()
    unbuilt_key = key(built)
    assert built.client.api_key == "sk-ant-api03-first-secret" and key(built) == unbuilt_key
    await built.aclose()
    chat = OpenAIChatModel("gpt-x", api_key="k")
    assert key(chat) != key(OpenAIChatModel("gpt-x", api_key="k", system_role="developer"))
    assert key(chat) != key(OpenAIResponsesModel("gpt-x", api_key="k"))
    clients = [AsyncOpenAI(api_key="k", base_url=f"http://{host}.test/v1") for host in "ab"]
    assert key(OpenAIChatModel("gpt-x", client=clients[0])) != key(OpenAIChatModel("gpt-x", client=clients[1]))
    tenants = [AsyncAnthropic(api_key="k", default_headers={"X-Tenant-Token": token}) for token in ("t-one", "t-two")]
    assert key(AnthropicModel("claude-x", client=tenants[0])) != key(AnthropicModel("claude-x", client=tenants[1]))
    assert "t-one" not in head(AnthropicModel("claude-x", client=tenants[0]))
    for client in [*clients, *tenants]:
        await client.close()

    class Homemade(ScriptedModel):
        def __init__(self, api_key: str, temperature: float) -> None:
            super().__init__([])
            self.api_key, self.temperature = api_key, temperature

    assert key(Homemade("one-secret", 0.5)) == key(Homemade("one-secret", 0.5))
    assert key(Homemade("one-secret", 0.5)) != key(Homemade("other-secret", 0.5)) != key(Homemade("one-secret", 1))
    assert "one-secret" not in head(Homemade("one-secret", 0.5))

    headers = {"extra_headers": {"Authorization": "Bearer first-secret-token", "x-api-key": "k1"}, "api_key": "k1"}
    others = {"extra_headers": {"Authorization": "Bearer other-secret-token", "x-api-key": "k2"}, "api_key": "k2"}
    assert key(anthropic(), headers) == key(anthropic(), dict(headers)) != key(anthropic(), others)
    assert key(anthropic(), others) != key(anthropic())
    assert not any(secret in head(anthropic(), headers) for secret in ("first-secret-token", '"k1"'))
    assert key(anthropic(), {"max_tokens": 16}) != key(anthropic(), {"max_tokens": 4096})
    text = "use sk-ant-api03-abcdefghijklmnopqrstuvwxyz now"
    assert hashed_credentials(text) == f"use {credential_hash('sk-ant-api03-abcdefghijklmnopqrstuvwxyz')} now"
    prefixed = hashlib.sha256(b"onion.cache.credential\x00sk-ant-api03-abcdefghijklmnopqrstuvwxyz")
    assert credential_hash("sk-ant-api03-abcdefghijklmnopqrstuvwxyz") == "sha256:" + prefixed.hexdigest()


TENANT_KEYS = ("sk-ant-api03-tenant-a-0123456789abcdef", "sk-ant-api03-tenant-b-0123456789abcdef")


async def test_two_api_keys_asking_the_same_never_share_an_answer_and_one_key_does(
    server: FakeProviderServer, one_ssl_context: None
) -> None:
    """Through the real SDK: tenants A and B (two API keys) ask the same; each request reaches the API once,
    under its own key; A asking again is served from the cache."""
    layer = cache()
    server.script(["A's answer", "B's answer"])
    models = [AnthropicModel("claude-test", base_url=server.url, api_key=key) for key in (*TENANT_KEYS, TENANT_KEYS[0])]
    try:
        outputs = [(await Agent(model).use(layer).run("same question")).output for model in models]
    finally:
        for model in models:
            await model.aclose()
    assert outputs == ["A's answer", "B's answer", "A's answer"]
    sent_as = [[key for key in TENANT_KEYS if key in str(request.headers)] for request in server.requests]
    assert sent_as == [[TENANT_KEYS[0]], [TENANT_KEYS[1]]]
    assert (layer.hits, layer.misses) == (1, 2)


async def test_no_api_key_nor_its_hash_reaches_the_sqlite_file_or_redis(
    tmp_path: Path, server: FakeProviderServer, redis_url: str, one_ssl_context: None
) -> None:
    """Entries made under two API keys (in the model and in an `Authorization` setting) leave neither the keys
    nor their credential hashes in the SQLite cache file (database and WAL) or in Redis's keys and values."""
    from onion.stores import RedisStore

    path = tmp_path / "cache.db"
    namespace = f"t{uuid.uuid4().hex[:12]}"
    server.script(["one", "two", "three", "four"])
    async with RedisStore(redis_url, namespace=namespace) as redis_store:
        with SQLiteStore(path) as sqlite_store:
            for store in (sqlite_store, redis_store):
                for key in TENANT_KEYS:
                    model = AnthropicModel("claude-test", base_url=server.url, api_key=key)
                    settings = {"extra_headers": {"Authorization": f"Bearer {key}"}}
                    try:
                        await Agent(model, settings=settings).use(cache(store=store)).run("same question")
                    finally:
                        await model.aclose()
            stored = b"".join(file.read_bytes() for file in tmp_path.iterdir())
        client = redis_store._client()
        names = await client.keys(f"{namespace}:*")
        assert len(names) == 2
        stored += "".join([*names, *[await client.get(name) for name in names]]).encode()
    assert len(server.requests) == 4
    for key in TENANT_KEYS:
        for leak in (key, credential_hash(key), credential_hash(key).removeprefix("sha256:")):
            assert leak.encode() not in stored


async def test_with_redact_outside_nothing_secret_or_personal_reaches_the_cache_file(tmp_path: Path) -> None:
    """redact -> cache(tools=True) on SQLite: the file holds no e-mail, card number or API key, raw or escaped."""
    secrets = ["alice@example.com", "4111 1111 1111 1111", "sk-ant-api03-abcdefghijklmnopqrstuvwxyz"]
    runs: list[str] = []

    @tool
    def customer(name: str) -> str:
        """A customer's record."""
        runs.append(name)
        return f"{name}: mail {secrets[0]},\ncard {secrets[1]}\tkey\n{secrets[2]}"

    def step(request: ModelCall) -> Any:
        answers = {1: [call("customer", name="alice"), call("add", a=1, b=2)], 4: [call("add", a=2, b=2)]}
        return answers.get(len(request.messages), f"Done; I wrote to {secrets[0]}.")

    path = tmp_path / "cache.db"
    with SQLiteStore(path) as store:
        layer = cache(store=store, tools=True)
        for _ in range(2):
            result = await Agent(FunctionModel(step), tools=[customer, add]).use(redact(), layer).run("who is alice?")
            assert result.output == f"Done; I wrote to {secrets[0]}."
    assert runs == ["alice", "alice"], "a result holding secrets is not cached"
    assert layer.hits == 4, "the two model requests without secrets and both add results were"
    stored = b"".join(file.read_bytes() for file in tmp_path.iterdir())
    assert b"customer" in stored
    for secret in secrets:
        for form in {secret, secret.replace(" ", ""), json.dumps(secret)[1:-1]}:
            assert form.encode() not in stored


async def test_a_message_with_an_image_is_served_from_the_cache_and_its_key_hashes_the_bytes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The same image hits; another image misses; the key's input holds the bytes' SHA-256, not the bytes."""
    model = counting_model()
    agent = Agent(model).use(cache)
    png = b"\x89PNG" + b"\x01" * 4096
    first = await agent.run(Message.user("what?", Image(data=png, media_type="image/png")))
    again = await agent.run(Message.user("what?", Image(data=png, media_type="image/png")))
    other = await agent.run(Message.user("what?", Image(data=png + b"\x02", media_type="image/png")))
    assert (first.usage.requests, again.usage.requests, other.usage.requests) == (1, 0, 1)
    assert len(model.requests) == 2
    assert again.messages[0].parts == first.messages[0].parts
    hashed: list[str] = []
    canonical = cache_entries._canonical
    monkeypatch.setattr(cache_entries, "_canonical", lambda value: hashed.append(canonical(value)) or canonical(value))
    request_key(model.requests[0])
    assert hashlib.sha256(png).hexdigest() in hashed[0]
    assert len(hashed[0]) < 1000


def refunds_model() -> ScriptedModel:
    return ScriptedModel([[call("refund", order="o-1")], "refunded"])


async def test_a_cached_response_that_asks_for_tools_runs_them_again_in_a_new_run() -> None:
    """What docs/middleware-library.md warns about: the second run asks the model nothing, and refunds again
    (under a key of its own: `idempotency_key` names a call of one run, and this is another run's call)."""
    keys: list[str] = []

    @tool
    def refund(order: str, call: ToolCall) -> str:
        """Refund an order."""
        keys.append(call.idempotency_key)
        return "ok"

    shared = MemoryStore()
    await Agent(refunds_model(), tools=[refund]).use(cache(store=shared)).run("refund o-1")
    again = ScriptedModel([])
    assert (await Agent(again, tools=[refund]).use(cache(store=shared)).run("refund o-1")).output == "refunded"
    assert again.requests == [] and len(keys) == 2 and keys[0] != keys[1]


async def test_tool_calls_false_caches_only_answers_without_tool_calls() -> None:
    """The second run asks the model again for the response that calls tools; its final answer comes from the cache."""
    ran: list[str] = []

    @tool
    def refund(order: str) -> str:
        """Refund an order."""
        ran.append(order)
        return "ok"

    shared = MemoryStore()
    await Agent(refunds_model(), tools=[refund]).use(cache(store=shared, tool_calls=False)).run("refund o-1")
    model, layer = ScriptedModel([[call("refund", order="o-1")]]), cache(store=shared, tool_calls=False)
    result = await Agent(model, tools=[refund]).use(layer).run("refund o-1")
    assert result.output == "refunded" and len(model.requests) == 1
    assert (layer.hits, layer.misses) == (1, 1)


async def test_tool_calls_false_does_not_serve_an_entry_with_tool_calls_stored_before() -> None:
    @tool
    def refund(order: str) -> str:
        """Refund an order."""
        return "ok"

    shared = MemoryStore()
    await Agent(refunds_model(), tools=[refund]).use(cache(store=shared)).run("go")
    model = ScriptedModel([[call("refund", order="o-1")], "refunded"])
    layer = cache(store=shared, tool_calls=False)
    await Agent(model, tools=[refund]).use(layer).run("go")
    assert len(model.requests) == 1 and layer.hits == 1  # the final answer only
