"""`onion.audit.verify`: a run's journal is tamper-evident; any entry altered, removed or inserted is named."""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from middleware import approve
from onion import Agent, Principal, ToolCall, tool
from onion._durable.chain import digest
from onion.audit import AuditReport, verify
from onion.errors import LeaseLost, RunNotFound, StoreUnavailable
from onion.stores import MemoryStore, RedisStore, SQLiteStore
from onion.testing import FunctionModel, ScriptedModel, call

KEY = b"a key of 32 bytes, kept secret.."
OLD_KEY = b"the key before it, 32 bytes long"


@tool
def add(x: int) -> int:
    return x + 1


class Crash(BaseException):
    """The worker dies: nothing in the run catches it."""


def adding(model_call: Any) -> Any:
    """One `add` call, then the answer."""
    return [call("add", x=1)] if model_call.messages[-1].role == "user" else "done"


def rows(path: Path, run_id: str) -> list[str]:
    """The run's journal entries as the SQLite file holds them."""
    with sqlite3.connect(path) as db:
        found = db.execute("SELECT entry FROM onion_journal WHERE run_id = ? ORDER BY seq", (run_id,)).fetchall()
    return [entry for (entry,) in found]


def rewrite(path: Path, run_id: str, entries: list[str]) -> None:
    """Put `entries` in the SQLite file as the run's journal, behind onion's back."""
    with sqlite3.connect(path) as db:
        db.execute("DELETE FROM onion_journal WHERE run_id = ?", (run_id,))
        db.executemany(
            "INSERT INTO onion_journal VALUES (?, ?, ?)", [(run_id, seq, e) for seq, e in enumerate(entries, 1)]
        )


def kinds(entries: list[str]) -> list[str]:
    return [json.loads(entry)["k"] for entry in entries]


async def test_a_thousand_journaled_runs_on_sqlite_verify_intact(tmp_path: Path) -> None:
    """1,000 runs (a tool call, then the answer), half of them signed: each journal verifies, with the key and
    without, and names what it checked."""
    async with SQLiteStore(tmp_path / "onion.db") as store:
        plain = Agent(FunctionModel(adding), tools=[add], store=store)
        signed = Agent(FunctionModel(adding), tools=[add], store=store, state_key=KEY, name="signed")
        results = []
        for _ in range(10):
            results += await asyncio.gather(*(a.run("go") for a in [plain, signed] * 50))
        assert len({r.run_id for r in results}) == 1000
        for result in results:
            report = await verify(store, result.run_id)
            assert report == AuditReport(True, 6, None, "6 entries, chained (HMACs not checked: no key)"), report
        for result in results[1::2]:  # the signed agent's
            report = await verify(store, result.run_id, key=KEY)
            assert report == AuditReport(True, 6, None, "6 entries, chained and signed"), report
        assert kinds(await store.journal(results[0].run_id)) == ["start", "model", "tool", "result", "model", "end"]


def altered(entries: list[str]) -> tuple[list[str], int]:
    entries[3] = entries[3].replace('"content":"2"', '"content":"20"')  # the tool's result
    return entries, 3


def removed(entries: list[str]) -> tuple[list[str], int]:
    del entries[2]  # the tool's start
    return entries, 2


def removed_at_the_end(entries: list[str]) -> tuple[list[str], int]:
    return entries[:-2], 4  # the final answer and the run's end


def inserted(entries: list[str]) -> tuple[list[str], int]:
    entries.insert(3, '{"k":"result","id":"call_1","content":"41","error":false}')
    return entries, 3


def copied(entries: list[str]) -> tuple[list[str], int]:
    entries.insert(3, entries[2])  # a real entry twice
    return entries, 3


CHANGES = [altered, removed, removed_at_the_end, inserted, copied]


@pytest.mark.parametrize("key", [None, KEY], ids=["chained", "signed"])
@pytest.mark.parametrize("change", CHANGES, ids=[change.__name__ for change in CHANGES])
async def test_an_entry_changed_behind_the_stores_back_is_named(
    tmp_path: Path, change: Callable[[list[str]], tuple[list[str], int]], key: bytes | None
) -> None:
    """An entry's text changed, an entry removed (in the middle or at the end), one inserted, one copied: written
    straight into the SQLite file; verify is not ok and names the first entry that is not as written."""
    path = tmp_path / "onion.db"
    async with SQLiteStore(path) as store:
        run_id = (await Agent(FunctionModel(adding), tools=[add], store=store, state_key=key).run("go")).run_id
        entries, first_bad = change(rows(path, run_id))
        rewrite(path, run_id, entries)
        report = await verify(store, run_id, key=key)
    assert not report.ok and report.first_bad == first_bad and report.entries == len(entries), report
    assert f"entry {first_bad}" in report.reason, report.reason


@pytest.mark.parametrize("key", [None, KEY], ids=["chained", "signed"])
async def test_two_runs_entries_swapped_are_named(tmp_path: Path, key: bytes | None) -> None:
    """Two runs of the same shape: their entry 3 swapped (each is a real entry, of the other run), or their whole
    journals swapped; each run's verify names the entry that came from the other (without a key, from the entry
    before it: nothing vouches for that one either)."""
    path = tmp_path / "onion.db"
    async with SQLiteStore(path) as store:
        agent = Agent(FunctionModel(adding), tools=[add], store=store, state_key=key)
        first, second = [(await agent.run("go")).run_id for _ in range(2)]
        a, b = rows(path, first), rows(path, second)
        rewrite(path, first, [*a[:3], b[3], *a[4:]])
        rewrite(path, second, [*b[:3], a[3], *b[4:]])
        one, other = await verify(store, first, key=key), await verify(store, second, key=key)
        named = 3 if key else 2  # unsigned, nothing vouches for entry 2 once entry 3 does not follow it
        assert (one.ok, one.first_bad, other.ok, other.first_bad) == (False, named, False, named), (one, other)
        assert "entry 3" in one.reason and "replaced (another run's entry, say)" in one.reason, one
        rewrite(path, first, b)
        rewrite(path, second, a)
        swapped = await verify(store, first, key=key)
    assert not swapped.ok and swapped.first_bad == 0 and "another run's" in swapped.reason, swapped


async def test_a_wrong_key_or_no_key_at_all_is_said_so(tmp_path: Path) -> None:
    """Verified with another key than the runs were signed with: not ok, entry 0, saying the key is not theirs; a
    run written without a key, verified with one, says it carries no HMAC."""
    async with SQLiteStore(tmp_path / "onion.db") as store:
        signed = (await Agent(FunctionModel(adding), tools=[add], store=store, state_key=KEY).run("go")).run_id
        plain = (await Agent(FunctionModel(adding), tools=[add], store=store).run("go")).run_id
        wrong = await verify(store, signed, key=OLD_KEY)
        unsigned = await verify(store, plain, key=KEY)
    assert (wrong.ok, wrong.first_bad) == (False, 0) and "not the state_key the run was written with" in wrong.reason
    assert (unsigned.ok, unsigned.first_bad) == (False, 0) and "carries no HMAC" in unsigned.reason


@pytest.mark.parametrize(
    ("altered", "first_bad", "said"),
    [(3, 3, "entry 3's HMAC does not match its text"), (1, 1, "one of entries 1 to 2 (written together)")],
    ids=["signed-entry", "entry-of-a-signed-write"],
)
async def test_an_entry_rewritten_with_the_digests_after_it_recomputed_is_caught_by_the_hmac(
    tmp_path: Path, altered: int, first_bad: int, said: str
) -> None:
    """Whoever edits an entry and recomputes every digest after it fools the chain alone (anyone can compute a
    SHA-256), not the HMAC on the last entry of each write: with the key, verify names the entry (the result,
    written alone) or the write (the model's response, written with the tool's start)."""
    path = tmp_path / "onion.db"
    async with SQLiteStore(path) as store:
        run_id = (await Agent(FunctionModel(adding), tools=[add], store=store, state_key=KEY).run("go")).run_id
        entries = rows(path, run_id)
        assert kinds(entries)[1:4] == ["model", "tool", "result"]
        entries[altered] = entries[altered].replace('"x":1', '"x":9').replace('"content":"2"', '"content":"20"')
        for index in range(altered + 1, len(entries)):
            entries[index] = re.sub(r'^\{"p":"[0-9a-f]{64}"', f'{{"p":"{digest(entries[index - 1])}"', entries[index])
        rewrite(path, run_id, entries)
        assert (await verify(store, run_id)).ok  # the chain alone is consistent again
        report = await verify(store, run_id, key=KEY)
    assert (report.ok, report.first_bad) == (False, first_bad) and said in report.reason, report


async def test_a_paused_then_resumed_run_verifies_intact(tmp_path: Path) -> None:
    """Paused for approval, decided by a person, resumed in another agent: the journal goes on from its last stored
    entry and verifies, its decision on record (who, when) among its entries."""
    async with SQLiteStore(tmp_path / "onion.db") as store:
        first = Agent(ScriptedModel([[call("add", x=1)]]), tools=[add], store=store, state_key=KEY)
        paused = await first.use(approve("add")).run("go")
        assert paused.paused and (await verify(store, paused.run_id, key=KEY)).ok
        state = await store.load(paused.run_id)
        state.approve_all()
        later = Agent(ScriptedModel(["done"]), tools=[add], store=store, state_key=KEY).use(approve("add"))
        done = await later.resume(state, principal=Principal("u-17"))
        assert done.output == "done"
        report = await verify(store, paused.run_id, key=KEY)
        entries = await store.journal(paused.run_id)
    assert report.ok, report
    assert kinds(entries) == ["start", "model", "end", "decision", "decided", "tool", "result", "model", "end"]
    record = json.loads(entries[3])["record"]
    assert record["by"]["id"] == "u-17" and record["at"]


async def test_a_run_that_crashed_in_a_tool_and_was_recovered_verifies_intact(tmp_path: Path) -> None:
    """The worker dies inside a tool (the run failed, its call in doubt); another agent recovers it: one journal,
    its entries chained across both workers."""

    async def crash(call_: ToolCall, call_next: Any) -> Any:
        await call_next(call_)
        raise Crash

    async with SQLiteStore(tmp_path / "onion.db") as store:
        with pytest.raises(Crash):
            await (
                Agent(ScriptedModel([[call("add", x=1)]]), tools=[add], store=store, state_key=KEY).use(crash).run("go")
            )
        (record,) = await store.runs()
        assert (await verify(store, record.run_id, key=KEY)).ok
        later = Agent(ScriptedModel(["recovered"]), tools=[add], store=store, state_key=KEY)
        assert (await later.recover(record.run_id)).output == "recovered"
        report = await verify(store, record.run_id, key=KEY)
        entries = await store.journal(record.run_id)
    assert report.ok, report
    assert kinds(entries) == ["start", "model", "tool", "end", "result", "model", "end"]


async def test_a_run_taken_over_from_a_stalled_worker_verifies_intact(tmp_path: Path) -> None:
    """Worker A stalls in a tool past its lease (a dead worker); worker B (its clock past the lease) recovers the
    run and finishes it; A then finds it lost and writes nothing. The journal verifies: B went on from A's last
    stored entry."""
    ahead = lambda: time.time() + 3600  # noqa: E731
    stalled, release = asyncio.Event(), asyncio.Event()

    @tool
    async def slow() -> str:
        stalled.set()
        await release.wait()
        return "late"

    async with SQLiteStore(tmp_path / "r.db") as store_a, SQLiteStore(tmp_path / "r.db", clock=ahead) as store_b:
        model = ScriptedModel([[call("slow")], "A's answer"])
        running = asyncio.create_task(Agent(model, tools=[slow], store=store_a, state_key=KEY, lease=0.3).run("go"))
        await stalled.wait()
        (record,) = await store_a.runs()
        taken = await Agent(ScriptedModel(["B's answer"]), tools=[slow], store=store_b, state_key=KEY).recover(
            record.run_id
        )
        release.set()
        with pytest.raises(LeaseLost):
            await asyncio.wait_for(running, 10)
        report = await verify(store_a, record.run_id, key=KEY)
    assert taken.output == "B's answer" and report.ok, report


class Flaky(MemoryStore):
    """A MemoryStore whose first `fails` write (append_journal or release_run) raises, after writing when `lands`:
    a write that may or may not have landed."""

    def __init__(self, fails: str, *, lands: bool) -> None:
        super().__init__()
        self.fails, self.lands = fails, lands

    async def append_journal(self, run_id: str, owner: str, entries: Any, lease: float) -> None:
        await self._maybe("append_journal", super().append_journal(run_id, owner, entries, lease))

    async def release_run(self, run_id: str, owner: str, status: Any, **options: Any) -> None:
        await self._maybe("release_run", super().release_run(run_id, owner, status, **options))

    async def _maybe(self, name: str, write: Any) -> None:
        if self.fails != name:
            return await write
        self.fails = ""
        if self.lands:
            await write
        else:
            write.close()
        raise StoreUnavailable("the store went away for a moment")


@pytest.mark.parametrize("lands", [True, False], ids=["landed", "lost"])
@pytest.mark.parametrize("fails", ["append_journal", "release_run"])
async def test_after_a_write_that_failed_the_chain_goes_on_from_what_the_store_holds(fails: str, lands: bool) -> None:
    """A journal write raises, and whether it landed is not known: the next write goes on from the entries the
    store holds (read once), so the journal verifies whether it had landed or not; a run failed so recovers intact.
    (A tool's start that fails is the tool's error; a release that fails fails the run.)"""
    store = Flaky(fails, lands=lands)
    agent = Agent(FunctionModel(adding), tools=[add], store=store, state_key=KEY)
    try:
        await agent.run("go")
    except StoreUnavailable:
        assert fails == "release_run"
    (record,) = await store.runs()
    assert (await verify(store, record.run_id, key=KEY)).ok, kinds(await store.journal(record.run_id))
    if record.status == "failed":
        assert (await agent.recover(record.run_id)).output == "done"
    report = await verify(store, record.run_id, key=KEY)
    assert report.ok and (await store.run_record(record.run_id)).status == "completed", report  # type: ignore[union-attr]


async def test_keys_being_rolled_verify_a_run_signed_with_either() -> None:
    """A run paused under the old key and resumed by an agent signing with the new one (`state_key=[new, old]`):
    verified with both keys it is intact; with the new key alone, its first entry is not the new key's."""
    store = MemoryStore()
    before = Agent(ScriptedModel([[call("add", x=1)]]), tools=[add], store=store, state_key=OLD_KEY)
    paused = await before.use(approve("add")).run("go")
    state = await store.load(paused.run_id)
    state.approve_all()
    after = Agent(ScriptedModel(["done"]), tools=[add], store=store, state_key=[KEY, OLD_KEY]).use(approve("add"))
    assert (await after.resume(state)).output == "done"
    assert (await verify(store, paused.run_id, key=[KEY, OLD_KEY])).ok
    only_new = await verify(store, paused.run_id, key=KEY)
    assert (only_new.ok, only_new.first_bad) == (False, 0) and "or signed with a key not given" in only_new.reason


async def test_a_journal_written_before_the_chain_is_reported_not_verified() -> None:
    """Entries without chain fields (as onion wrote them before): not ok, entry 0, the reason saying the journal
    predates the chain; the run still replays (its entries are read by kind)."""
    store = MemoryStore()
    run_id = (await Agent(FunctionModel(adding), tools=[add], store=store).run("go")).run_id
    store._journals[run_id] = [re.sub(r'^\{"p":"[0-9a-f]{64}","n":\d+,', "{", e) for e in store._journals[run_id]]
    report = await verify(store, run_id)
    assert (report.ok, report.first_bad) == (False, 0) and "predates the chain" in report.reason, report
    assert (await store.load(run_id)).output == "done"


async def test_an_entry_holding_a_lone_surrogate_is_chained_and_verifies() -> None:
    """`run.state` with a lone surrogate (JSON text may hold one raw; MemoryStore keeps it): the chain hashes it as
    its bytes, and the journal verifies."""
    store = MemoryStore()
    agent = Agent(ScriptedModel(["ok"]), store=store, state_key=KEY)
    run_id = (await agent.run("go", state={"note": "half a pair: \ud800"})).run_id
    assert "\ud800" in (await store.journal(run_id))[0]
    assert (await verify(store, run_id, key=KEY)).ok


async def test_an_unknown_run_raises_run_not_found() -> None:
    """verify of a run the store never held raises RunNotFound, naming it."""
    with pytest.raises(RunNotFound, match="run-nope"):
        await verify(MemoryStore(), "run-nope")


async def test_a_journal_on_redis_verifies_and_an_entry_changed_there_is_named(redis_url: str) -> None:
    """On RedisStore too: a run verifies intact; an entry changed in Redis (LSET on the journal's list) is named."""
    import redis.asyncio

    namespace = f"audit-{uuid.uuid4().hex[:8]}"
    async with RedisStore(redis_url, namespace=namespace) as store:
        run_id = (await Agent(FunctionModel(adding), tools=[add], store=store, state_key=KEY).run("go")).run_id
        assert await verify(store, run_id, key=KEY) == AuditReport(True, 6, None, "6 entries, chained and signed")
        client = redis.asyncio.Redis.from_url(redis_url)
        entries = await store.journal(run_id)
        await client.lset(f"{namespace}:journal:{run_id}", 3, entries[3].replace('"2"', '"20"'))
        await client.aclose()
        report = await verify(store, run_id, key=KEY)
    assert (report.ok, report.first_bad) == (False, 3) and "entry 3's HMAC does not match" in report.reason, report
