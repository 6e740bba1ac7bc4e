"""Every store knows which tenant a run and a session belong to: listing is filtered in the store, and a session
keeps the tenant of its first run given a principal."""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from onion.stores import MemoryStore, RedisStore, RunRecord, SessionTenants, SQLiteStore, Store


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        self.now += 1.0  # every operation a second later: "most recently updated" is never a tie
        return self.now


@pytest.fixture(params=["memory", "sqlite", "redis"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    if request.param == "memory":
        yield MemoryStore(clock=Clock())
    elif request.param == "sqlite":
        async with SQLiteStore(tmp_path / "onion.db", clock=Clock()) as sqlite:
            yield sqlite
    else:
        namespace = f"t{uuid.uuid4().hex[:12]}"
        async with RedisStore(request.getfixturevalue("redis_url"), namespace=namespace, clock=Clock()) as redis:
            yield redis


async def start(store: Store, run_id: str, tenant: str | None) -> None:
    """A run as the journal starts it: `tenant=` only for a run whose principal has one."""
    given = {} if tenant is None else {"tenant": tenant}
    await store.start_run(run_id, agent="a", owner="w", lease=30, entries=["e"], **given)


def ids(records: list[RunRecord]) -> list[str]:
    return [record.run_id for record in records]


async def test_runs_lists_one_tenants_runs_the_runs_of_none_or_every_run_newest_first(store: Store) -> None:
    """`tenant="acme"`: acme's runs only; `tenant=None`: the runs without a tenant; no argument: all of them; each
    most recently updated first, `limit` counting within the tenant."""
    for run_id, tenant in [("a1", "acme"), ("g1", "globex"), ("n1", None), ("a2", "acme"), ("g2", "globex")]:
        await start(store, run_id, tenant)
    await store.append_journal("a1", "w", ["e2"], lease=30)  # a1 updated last of acme's
    assert ids(await store.runs(tenant="acme")) == ["a1", "a2"]
    assert ids(await store.runs(tenant="globex")) == ["g2", "g1"]
    assert ids(await store.runs(tenant=None)) == ["n1"]
    assert ids(await store.runs()) == ["a1", "g2", "a2", "n1", "g1"]
    assert ids(await store.runs(tenant="acme", limit=1)) == ["a1"]
    assert await store.runs(tenant="initech") == []
    record = await store.run_record("a1")
    assert record is not None and record.tenant == "acme"
    untenanted = await store.run_record("n1")
    assert untenanted is not None and untenanted.tenant is None


async def test_a_tenants_listing_follows_claims_releases_and_deletes(store: Store) -> None:
    """Claiming and releasing a run move it to the front of its tenant's listing; a deleted run leaves it."""
    await start(store, "a1", "acme")
    await start(store, "a2", "acme")
    await store.release_run("a1", "w", "paused", state="{}", pending=1)
    await store.release_run("a2", "w", "failed")
    assert ids(await store.runs(tenant="acme")) == ["a2", "a1"]
    await store.claim_run("a1", "w2", lease=30)
    assert ids(await store.runs(tenant="acme")) == ["a1", "a2"]
    await store.delete_run("a1")
    assert ids(await store.runs(tenant="acme")) == ["a2"]
    assert ids(await store.runs()) == ["a2"]


async def test_a_session_keeps_the_tenant_of_its_first_claim_even_once_cleared(store: Store) -> None:
    """The first claim records its tenant; a later claim by another gets the one on record; clearing the messages
    leaves it the first tenant's."""
    assert isinstance(store, SessionTenants)
    assert await store.claim_session("s1", "acme") == "acme"
    assert await store.claim_session("s1", "globex") == "acme"
    assert await store.claim_session("s1", None) == "acme"
    await store.session_append("s1", ['{"role": "user", "content": "hi"}'])
    await store.session("s1").clear()
    assert await store.claim_session("s1", "globex") == "acme"
    assert await store.claim_session("s2", None) is None
    assert await store.claim_session("s2", "acme") is None


async def test_a_session_with_messages_and_no_tenant_on_record_is_of_no_tenant(store: Store) -> None:
    """Messages kept before stores knew tenants (or appended without a run) make the session no tenant's: the first
    tenant to claim it does not get it."""
    assert isinstance(store, SessionTenants)
    await store.session_append("old", ['{"role": "user", "content": "from before"}'])
    assert await store.claim_session("old", "acme") is None
    assert await store.claim_session("old", "acme") is None


OLD_SCHEMA = """
CREATE TABLE onion_runs (
    run_id TEXT PRIMARY KEY, agent TEXT NOT NULL, status TEXT NOT NULL, created REAL NOT NULL,
    updated REAL NOT NULL, owner TEXT, lease_expires REAL, state TEXT, session TEXT, pending INTEGER NOT NULL
);
CREATE TABLE onion_journal (
    run_id TEXT NOT NULL, seq INTEGER NOT NULL, entry TEXT NOT NULL, PRIMARY KEY (run_id, seq)
);
CREATE TABLE onion_sessions (
    session_id TEXT NOT NULL, seq INTEGER NOT NULL, message TEXT NOT NULL, PRIMARY KEY (session_id, seq)
);
CREATE TABLE onion_session_locks (session_id TEXT PRIMARY KEY, owner TEXT NOT NULL, expires REAL NOT NULL);
CREATE TABLE onion_cache (key TEXT PRIMARY KEY, value TEXT NOT NULL, expires REAL);
CREATE TABLE onion_rates (
    key TEXT PRIMARY KEY, requests REAL, tokens REAL, updated REAL NOT NULL, paused_until REAL NOT NULL
);
INSERT INTO onion_runs VALUES ('old', 'a', 'completed', 1.0, 2.0, NULL, NULL, NULL, 'talk', 0);
INSERT INTO onion_journal VALUES ('old', 1, 'e');
INSERT INTO onion_sessions VALUES ('talk', 1, '{"role": "user", "content": "from before"}');
"""


async def test_an_sqlite_file_of_an_older_onion_gets_the_tenant_column_and_its_runs_are_of_no_tenant(
    tmp_path: Path,
) -> None:
    """A file made with the schema before tenants opens: its runs read as tenant None and list under
    `tenant=None`, its session is no tenant's; new runs keep their tenant; opening it again changes nothing."""
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as db:
        db.executescript(OLD_SCHEMA)
    async with SQLiteStore(path) as store:
        old = await store.run_record("old")
        assert old is not None and (old.tenant, old.session, old.status) == (None, "talk", "completed")
        await start(store, "new", "acme")
        assert ids(await store.runs(tenant=None)) == ["old"]
        assert ids(await store.runs(tenant="acme")) == ["new"]
        assert await store.claim_session("talk", "acme") is None
        assert await store.journal("old") == ["e"]
    async with SQLiteStore(path) as store:
        assert ids(await store.runs()) == ["new", "old"]
    with sqlite3.connect(path) as db:
        columns = [row[1] for row in db.execute("PRAGMA table_info(onion_runs)")]
    assert columns.count("tenant") == 1


def test_an_sqlite_tenants_listing_reads_its_index_not_the_table(tmp_path: Path) -> None:
    """`runs(tenant=...)` is a WHERE on an index of (tenant, updated): SQLite searches the index, in order, and
    neither scans the table nor sorts."""
    SQLiteStore(tmp_path / "onion.db").close()
    with sqlite3.connect(tmp_path / "onion.db") as db:
        for where, parameters in [("tenant = ?", ("acme",)), ("tenant IS NULL", ())]:
            statement = f"SELECT * FROM onion_runs WHERE {where} ORDER BY updated DESC LIMIT 100"
            plan = " ".join(row[-1] for row in db.execute(f"EXPLAIN QUERY PLAN {statement}", parameters))
            assert "SEARCH onion_runs USING INDEX onion_runs_by_tenant (tenant=?)" in plan, plan
            assert "TEMP B-TREE" not in plan, plan


async def test_a_redis_tenants_listing_reads_none_of_another_tenants_runs(redis_url: str) -> None:
    """Listing acme's runs reads acme's sorted set and acme's run hashes only: globex's runs are not scanned."""
    async with RedisStore(redis_url, namespace=f"t{uuid.uuid4().hex[:12]}") as store:
        for n in range(3):
            await start(store, f"acme-{n}", "acme")
            await start(store, f"globex-{n}", "globex")
        read: list[tuple[Any, ...]] = []
        command = store._command

        async def recorded(doing: str, *words: Any) -> Any:
            read.append(words)
            return await command(doing, *words)

        store._command = recorded  # type: ignore[method-assign]
        assert sorted(ids(await store.runs(tenant="acme"))) == ["acme-0", "acme-1", "acme-2"]
        assert not any("globex" in str(word) for words in read for word in words), read
        assert read[0] == ("ZREVRANGE", store._tenant_index("acme"), 0, 99)


async def test_redis_runs_an_older_onion_kept_read_as_of_no_tenant_and_list_under_none(redis_url: str) -> None:
    """A run hash without a tenant field, in the index of every run only (as an older onion wrote it), reads as
    tenant None, lists under `tenant=None` beside new runs without one, and under no tenant's."""
    namespace = f"t{uuid.uuid4().hex[:12]}"
    async with RedisStore(redis_url, namespace=namespace) as store:
        fields = ("agent", "a", "status", "completed", "created", "1", "updated", "2", "session", "", "pending", "0")
        await store._command("writing an old run", "HSET", f"{namespace}:run:old", *fields)
        await store._command("indexing it", "ZADD", f"{namespace}:runs", 2, "old")
        await start(store, "new", None)
        await start(store, "acme-1", "acme")
        old = await store.run_record("old")
        assert old is not None and old.tenant is None
        assert sorted(ids(await store.runs(tenant=None))) == ["new", "old"]
        assert ids(await store.runs(tenant="acme")) == ["acme-1"]
    async with RedisStore(redis_url, namespace=namespace) as again:  # another worker: the index is whole already
        assert sorted(ids(await again.runs(tenant=None))) == ["new", "old"]
        await again.delete_run("old")
        assert ids(await again.runs(tenant=None)) == ["new"]
