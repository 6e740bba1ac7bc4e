"""RedisStore on a real redis-server: key TTLs, namespaces, shared concurrency slots, Redis going away."""

from __future__ import annotations

import asyncio
import logging
import threading
import uuid
from typing import Any

import pytest

from middleware import cache, concurrency, rate_limit
from onion import Agent, tool
from onion.errors import LeaseLost, RunBusy, StoreUnavailable
from onion.stores import RedisStore
from onion.stores import _redis as redis_module
from onion.testing import RedisServer, ScriptedModel, call


def namespace() -> str:
    return f"t{uuid.uuid4().hex[:12]}"


async def test_cache_entries_and_rate_counters_carry_a_ttl(redis_url: str) -> None:
    """A cache entry expires after its TTL (none without one); every rate-limit key has a TTL."""
    async with RedisStore(redis_url, namespace=(ns := namespace())) as store:
        await store.set("k", "v", 5)
        await store.set("forever", "f", None)
        await store.acquire("m", 10, rpm=10, tpm=100, window=60)
        await store.pause("m", 3)
        client = store._client()
        assert 0 < await client.pttl(f"{ns}:cache:k") <= 5000
        assert await client.pttl(f"{ns}:cache:forever") == -1
        for key in await client.keys(f"{ns}:rate*"):
            assert 0 < await client.pttl(key) <= 64_001
        await store.set("short", "s", 0.01)
        while await store.get("short") is not None:  # Redis expires it on its own clock
            await asyncio.sleep(0.01)


async def test_a_correction_arriving_after_its_reservation_left_the_window_leaves_the_token_count_true(
    redis_url: str,
) -> None:
    """tpm=100: 60 reserved at t=0 and corrected at t=1.5 (gone from the 1 s window by then); at t=1.6 and 1.7
    60 + 40 tokens fit. (The count kept the forgotten 60: the second call waited, and other calls got through over
    the limit.)"""
    now = [0.0]
    async with RedisStore(redis_url, namespace=namespace(), clock=lambda: now[0]) as store:
        assert await store.acquire("m", 60, rpm=None, tpm=100, window=1.0) == 0
        now[0] = 1.5
        await store.reconcile("m", 60, 50)
        now[0] = 1.6
        assert await store.acquire("m", 60, rpm=None, tpm=100, window=1.0) == 0
        now[0] = 1.7
        assert await store.acquire("m", 40, rpm=None, tpm=100, window=1.0) == 0
        assert await store.acquire("m", 1, rpm=None, tpm=100, window=1.0) == pytest.approx(0.9)


async def test_reservations_of_keys_no_longer_used_are_forgotten(redis_url: str) -> None:
    """3,000 keys reserve once each, 0.1 s apart, under a 60 s window: the store keeps its record of open
    reservations only for the last window's keys; a corrected reservation leaves nothing behind. (It kept a
    record for every key ever used.)"""
    now = [0.0]
    async with RedisStore(redis_url, namespace=namespace(), clock=lambda: now[0]) as store:
        for n in range(3000):
            assert await store.acquire(f"user {n}", 0, rpm=1, tpm=None, window=60) == 0
            now[0] += 0.1
        assert len(store._reservations) < 2048
        assert {f"user {n}" for n in range(2401, 3000)} <= store._reservations.keys()
        await store.acquire("corrected", 10, rpm=None, tpm=100, window=60)
        await store.reconcile("corrected", 10, 5)
        assert "corrected" not in store._reservations


async def test_two_namespaces_never_see_each_others_entries(redis_url: str) -> None:
    """Cache entries, sessions and runs of one namespace are invisible in another on the same Redis."""
    async with RedisStore(redis_url, namespace=namespace()) as a, RedisStore(redis_url, namespace=namespace()) as b:
        await a.set("k", "a's", None)
        await a.session_append("s", ["m"])
        await a.start_run("r", agent="x", owner="o", lease=30, entries=["e"])
        assert await b.get("k") is None and await b.session_messages("s") == [] and await b.run_record("r") is None


def test_a_namespace_must_be_a_plain_name() -> None:
    """A namespace with ':' (the key separator) or empty is refused, naming it."""
    with pytest.raises(ValueError, match="namespace"):
        RedisStore("redis://x", namespace="a:b")


async def test_concurrency_with_a_store_caps_calls_across_stores_and_a_dead_holders_slot_lapses(
    redis_url: str,
) -> None:
    """Two agents on two RedisStore objects (as two workers) share concurrency(1): one tool call at a time.

    A slot taken by a worker that never gives it back frees itself when its lease lapses.
    """
    ns = namespace()
    running, most = 0, 0

    @tool
    async def work(n: int) -> str:
        """Work a while."""
        nonlocal running, most
        running += 1
        most = max(most, running)
        await asyncio.sleep(0.01)
        running -= 1
        return "done"

    async with RedisStore(redis_url, namespace=ns) as first, RedisStore(redis_url, namespace=ns) as second:
        agents = [
            Agent(ScriptedModel([[call("work", n=1)], "ok"] * 3), tools=[work]).use(concurrency(1, store=store))
            for store in (first, second)
        ]
        await asyncio.gather(*(agent.run("go") for agent in agents for _ in range(3)))
        assert most == 1
        assert await first.take_slot("dead", "gone", 1, lease=0.05)
        assert not await second.take_slot("dead", "alive", 1, lease=5)
        while not await second.take_slot("dead", "alive", 1, lease=5):
            await asyncio.sleep(0.01)


async def test_redis_down_at_start_rate_limit_fails_closed_or_open_cache_misses_journal_refuses(
    redis_bin: str, caplog: pytest.LogCaptureFixture
) -> None:
    """With nothing listening: rate_limit raises StoreUnavailable (or lets calls through with fail_open=True),
    the cache misses with one warning, and a journaled run fails before it starts, naming Redis."""
    url = RedisServer(redis_bin).url  # never started
    async with RedisStore(url, connect_timeout=0.5) as store, RedisStore(url, fail_open=True) as open_store:
        closed = Agent(ScriptedModel(["a"])).use(rate_limit(rpm=10, store=store))
        with pytest.raises(StoreUnavailable, match=r"Redis at redis://127\.0\.0\.1:\d+/0 failed while reserving"):
            await closed.run("hi")
        assert (await Agent(ScriptedModel(["b"])).use(rate_limit(rpm=10, store=open_store)).run("hi")).output == "b"
        with caplog.at_level(logging.WARNING, logger="onion.stores"):
            cached = Agent(ScriptedModel(["c", "d"])).use(cache(store=store))
            assert [(await cached.run("hi")).output for _ in range(2)] == ["c", "d"]
        assert sum("every lookup is a miss" in r.message for r in caplog.records) == 1
        with pytest.raises(StoreUnavailable, match="starting run") as write:
            await Agent(ScriptedModel(["e"]), store=store).run("hi")
        with pytest.raises(StoreUnavailable, match="reading session") as read:
            await store.session_messages("s")
        assert "it may have happened" in str(write.value) and "it may have happened" not in str(read.value)


async def test_redis_dropping_mid_run_fails_the_run_cleanly_and_it_resumes_once_redis_is_back(
    redis_server: object,
) -> None:
    """Redis stops while a tool runs: the run raises StoreUnavailable and its journal holds whole entries only.

    Redis comes back (frozen, then thawed, keeping its data): the same store reconnects and the run is resumed
    to completion without running the tool again (its result landed whole when Redis thawed, or it is answered
    as interrupted).
    """
    import os
    import signal

    server = redis_server
    pid = server._process.pid  # type: ignore[attr-defined]

    frozen = []

    @tool
    async def freeze() -> str:
        """Stop Redis (as a network partition would)."""
        frozen.append(True)
        os.kill(pid, signal.SIGSTOP)
        return "frozen"

    async with RedisStore(server.url, timeout=0.3, namespace=namespace()) as store:  # type: ignore[attr-defined]
        model = ScriptedModel([[call("freeze")], "finished"])
        agent = Agent(model, tools=[freeze], store=store, lease=0.5)
        try:
            with pytest.raises(StoreUnavailable, match="failed while"):
                await agent.run("go")
        finally:
            os.kill(pid, signal.SIGCONT)
        (record,) = await store.runs()
        journal = await store.journal(record.run_id)
        assert all(entry.startswith("{") and entry.endswith("}") for entry in journal)
        while True:  # its lease lapses
            try:
                result = await agent.resume(record.run_id)
                break
            except RunBusy:
                await asyncio.sleep(0.05)
    assert result.output == "finished" and frozen == [True]
    assert result.messages[-2].text == "frozen" or "interrupted" in result.messages[-2].text


async def test_after_redis_restarts_every_kind_of_call_succeeds_at_once(redis_server: RedisServer) -> None:
    """Redis restarts (empty) between calls: the next session append, rate reservation, cache read and run start
    each succeed on a fresh connection. (The pooled connection Redis had closed failed the first call.)"""
    async with RedisStore(redis_server.url, namespace=namespace()) as store:
        await store.session_append("s", ["before"])
        for attempt in range(2):
            redis_server.stop()
            redis_server.start()
            await store.session_append("s", [f"after {attempt}"])
            assert await store.session_messages("s") == [f"after {attempt}"]
            assert await store.acquire("m", 10, rpm=10, tpm=100, window=60) == 0
            assert await store.get("k") is None
            await store.start_run(f"r{attempt}", agent="a", owner="me", lease=5.0, entries=["start"])


class DroppingProxy:
    """A TCP proxy to Redis that, when `drop_next_reply` is set, passes on the next script call and closes the
    client's connection instead of passing on its reply: Redis has applied it, the client never hears so."""

    def __init__(self, port: int) -> None:
        self.port, self.drop_next_reply = port, False
        self.connections: set[asyncio.Task[None]] = set()

    async def __aenter__(self) -> DroppingProxy:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.url = f"redis://127.0.0.1:{self.server.sockets[0].getsockname()[1]}/0"
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self.server.close()
        for connection in self.connections:
            connection.cancel()
        await asyncio.gather(*self.connections, return_exceptions=True)

    async def _serve(self, client_in: asyncio.StreamReader, client_out: asyncio.StreamWriter) -> None:
        self.connections.add(task := asyncio.current_task())  # type: ignore[arg-type]
        redis_in, redis_out = await asyncio.open_connection("127.0.0.1", self.port)
        dropping = asyncio.Event()

        async def requests() -> None:
            while data := await client_in.read(65536):
                if self.drop_next_reply and b"EVALSHA" in data:
                    self.drop_next_reply = False
                    dropping.set()
                redis_out.write(data)

        async def replies() -> None:
            while data := await redis_in.read(65536):
                if dropping.is_set():
                    return
                client_out.write(data)

        parts = {asyncio.ensure_future(requests()), asyncio.ensure_future(replies())}
        try:
            await asyncio.wait(parts, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for part in parts:
                part.cancel()
            client_out.close()
            redis_out.close()
            self.connections.discard(task)  # type: ignore[arg-type]


async def test_a_write_whose_reply_is_lost_is_never_sent_again(redis_server: RedisServer) -> None:
    """The connection drops after Redis applied a session append and a journal append, before their replies: each
    caller gets StoreUnavailable saying the write may have happened, and each is applied once (a client that
    re-sent it would have appended the messages twice); the next calls work."""
    async with DroppingProxy(redis_server.port) as proxy, RedisStore(proxy.url, namespace=namespace()) as store:
        await store.session_append("s", ["one"])
        await store.start_run("r", agent="a", owner="me", lease=5.0, entries=["start"])
        for write in (lambda: store.session_append("s", ["two"]), lambda: store.append_journal("r", "me", ["e"], 5.0)):
            proxy.drop_next_reply = True
            with pytest.raises(StoreUnavailable, match="with its reply lost, it may have happened"):
                await write()
        assert await store.session_messages("s") == ["one", "two"]
        assert await store.journal("r") == ["start", "e"]


@pytest.mark.parametrize("packer", ["hiredis", "redis-py"])
async def test_commands_sent_together_share_one_round_trip_and_each_caller_gets_its_own_outcome(
    redis_url: str, packer: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """50 concurrent reads, one command that fails (a list read of a plain key), one that cannot be encoded (a lone
    surrogate) and one cancelled before it was sent: one round trip; each read its own value, the failing caller
    alone a StoreUnavailable, the unencodable one alone its UnicodeEncodeError, the cancelled write never reaches
    Redis. The same with commands packed by hiredis or by redis-py (hiredis not installed)."""
    from redis.asyncio import BlockingConnectionPool, Connection, Redis

    from onion.stores import _redis_batcher

    if packer == "redis-py":
        monkeypatch.setattr(_redis_batcher, "hiredis_pack", None)

    sent = []

    class Counting(Connection):
        async def send_packed_command(self, command: object, check_health: bool = True) -> None:
            sent.append(command)
            await super().send_packed_command(command, check_health)

    pool = BlockingConnectionPool.from_url(redis_url, decode_responses=True, connection_class=Counting)
    async with RedisStore(redis_url, namespace=namespace(), client=Redis(connection_pool=pool)) as store:
        for n in range(50):
            await store.set(f"k{n}", f"v{n}", None)
        await store.set("plain", "not a list", None)
        sent.clear()
        cancelled = asyncio.ensure_future(store.set("never", "x", None))
        cancelled.cancel()
        reads = [store.get(f"k{n}") for n in range(50)]
        outcomes = await asyncio.gather(
            *reads,
            store._command("reading a list", "LRANGE", store._key("cache", "plain"), 0, -1),
            store.session_append("s", ["\ud800"]),
            return_exceptions=True,
        )
        assert len(sent) == 1
        assert outcomes[:50] == [f"v{n}" for n in range(50)]
        assert isinstance(outcomes[50], StoreUnavailable) and "WRONGTYPE" in str(outcomes[50])
        assert isinstance(outcomes[51], UnicodeEncodeError) and await store.session_messages("s") == []
        assert cancelled.cancelled() and await store.get("never") is None


async def test_a_single_connection_client_of_the_users_serves_every_kind_of_call(redis_url: str) -> None:
    """A `client=` built with `single_connection_client=True` (no pool to take connections from): concurrent calls
    go through redis-py's own pipeline and each gets its own outcome."""
    from redis.asyncio import Redis
    from redis.asyncio.retry import Retry
    from redis.backoff import NoBackoff

    client = Redis.from_url(
        redis_url, decode_responses=True, single_connection_client=True, retry=Retry(NoBackoff(), 0)
    )
    async with RedisStore(redis_url, namespace=namespace(), client=client) as store:
        await store.set("k", "v", None)
        await store.start_run("r", agent="a", owner="me", lease=5.0, entries=["start"])
        outcomes = await asyncio.gather(
            store.get("k"),
            store.append_journal("r", "me", ["e"], 5.0),
            store.acquire("m", 10, rpm=10, tpm=100, window=60),
            store.append_journal("r", "someone else", ["x"], 5.0),
            return_exceptions=True,
        )
        assert outcomes[:3] == ["v", None, 0.0] and isinstance(outcomes[3], LeaseLost)
        assert await store.journal("r") == ["start", "e"]


async def test_a_correction_from_another_thread_during_a_sweep_is_applied_and_fails_neither_call(
    redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One store serves two threads, each with its own event loop. While this thread's reservation sweeps the
    records of open reservations, the other thread corrects "a"'s only one: both calls succeed and nothing is left
    for "a". (Both deleted "a"'s emptied record and the sweep failed with KeyError.)"""
    now = [0.0]
    async with RedisStore(redis_url, namespace=namespace(), clock=lambda: now[0]) as store:
        assert await store.acquire("a", 10, rpm=None, tpm=100, window=60) == 0
        for n in range(1023):
            await store.acquire(f"user {n}", 0, rpm=1, tpm=None, window=60)
        swept, errors = store._reservations["a"], []

        async def correct() -> None:
            try:
                await store.reconcile("a", 10, 5)
            finally:
                await store._client().aclose()

        def correct_in_another_thread() -> None:
            try:
                asyncio.run(correct())
            except BaseException as error:
                errors.append(error)

        other = threading.Thread(target=correct_in_another_thread)
        drop_expired = redis_module._drop_expired

        def correction_during_the_sweep(reservations: Any, at: float) -> bool:
            if reservations is swept and not other.is_alive() and other.ident is None:
                other.start()
                other.join(0.5)  # the other thread's correction goes now, or once the sweep is done
            return drop_expired(reservations, at)

        monkeypatch.setattr(redis_module, "_drop_expired", correction_during_the_sweep)
        assert await store.acquire("new", 0, rpm=1, tpm=None, window=60) == 0
        other.join()
        assert errors == [] and "a" not in store._reservations


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("redis://:hunter2@127.0.0.1:{port}/0", "redis://***@127.0.0.1:{port}/0"),
        ("redis://alice:hunter2@127.0.0.1:{port}/0", "redis://alice:***@127.0.0.1:{port}/0"),
        ("redis://127.0.0.1:{port}/0?password=hunter2", "redis://127.0.0.1:{port}/0?password=***"),
        (
            "rediss://127.0.0.1:{port}/0?db=0&ssl_password=hunter2#x",
            "rediss://127.0.0.1:{port}/0?db=0&ssl_password=***#x",
        ),
        ("unix:///tmp/onion-no-such.sock?db=0&password=hunter2", "unix:///tmp/onion-no-such.sock?db=0&password=***"),
        ("rediss://alice:hunter2@[::1]:{port}/0?password=hunter2", "rediss://alice:***@[::1]:{port}/0?password=***"),
        ("redis://hunter2@127.0.0.1:{port}/0", "redis://***@127.0.0.1:{port}/0"),
    ],
)
async def test_a_redis_password_in_the_url_is_hidden_in_the_repr_and_in_store_unavailable(
    redis_bin: str, url: str, shown: str
) -> None:
    """Whether given as user:password@ or as ?password= (unix:// too), the password never appears in
    `repr(store)` or in a StoreUnavailable message; both still name the host (or socket) the user must check."""
    port = RedisServer(redis_bin).port  # never started
    async with RedisStore(url.format(port=port), connect_timeout=0.5) as store:
        assert repr(store) == f"<RedisStore {shown.format(port=port)} namespace='onion'>"
        with pytest.raises(StoreUnavailable) as refused:
            await store.session_messages("s")
        message = str(refused.value)
        assert "hunter2" not in message and f"Redis at {shown.format(port=port)} failed" in message


def test_a_password_holding_url_delimiters_is_hidden_whole() -> None:
    """A password with '#', '?', '/' or '@' in it, not percent-encoded: everything before the host's '@' is hidden."""
    for url in ("redis://:hun#ter?2@10.0.0.5:6379/0", "redis://alice:hu/nt@er2@10.0.0.5:6379/0"):
        shown = repr(RedisStore(url))  # connects to nothing until used
        assert "hun" not in shown and "er2" not in shown and shown.endswith("@10.0.0.5:6379/0 namespace='onion'>"), (
            shown
        )
