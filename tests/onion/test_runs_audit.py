"""`python -m onion runs verify` and `runs export`: an operator checks journals, and takes one out of the store."""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest
from forker import Forker

from middleware import approve
from onion import Agent, Principal, tool
from onion.stores import RedisStore, SQLiteStore, Store
from onion.testing import FunctionModel, ScriptedModel, call

KEY = "a key of 32 bytes, kept secret.."


@tool
def add(x: int) -> int:
    return x + 1


def adding(model_call: Any) -> Any:
    return [call("add", x=1)] if model_call.messages[-1].role == "user" else "done"


async def journaled(store: Store, count: int, key: str | None = KEY) -> list[str]:
    """`count` runs (a tool call, then the answer) journaled in `store`, signed with `key`."""
    agent = Agent(FunctionModel(adding), tools=[add], store=store, state_key=key)
    ids: list[str] = []
    for start in range(0, count, 100):
        ids += [r.run_id for r in await asyncio.gather(*(agent.run("go") for _ in range(min(100, count - start))))]
    return ids


def runs(forker: Forker, *args: str, key: str | None = KEY) -> subprocess.CompletedProcess[str]:
    """`python -m onion runs ARGS`, the agents' key in the environment variable AUDIT_KEY (when given)."""
    env = {name: value for name, value in os.environ.items() if name != "AUDIT_KEY"}
    if key is not None:
        env["AUDIT_KEY"] = key
    return forker.run("-m", "onion", "runs", *args, env=env, timeout=120)


def rows(path: Path, run_id: str) -> list[str]:
    with sqlite3.connect(path) as db:
        return [e for (e,) in db.execute("SELECT entry FROM onion_journal WHERE run_id = ? ORDER BY seq", (run_id,))]


def rewrite(path: Path, run_id: str, entries: list[str]) -> None:
    """The run's journal replaced in the SQLite file, behind onion's back."""
    with sqlite3.connect(path) as db:
        db.execute("DELETE FROM onion_journal WHERE run_id = ?", (run_id,))
        db.executemany("INSERT INTO onion_journal VALUES (?, ?, ?)", [(run_id, n, e) for n, e in enumerate(entries, 1)])


@pytest.fixture(params=["sqlite", "redis"])
def store_flags(request: pytest.FixtureRequest, tmp_path: Path) -> list[str]:
    """The flags naming a real store: an SQLite file, or a real redis-server under a namespace of this test's."""
    if request.param == "sqlite":
        return ["--db", str(tmp_path / "onion.db")]
    return ["--redis", request.getfixturevalue("redis_url"), "--namespace", f"audit-{uuid.uuid4().hex[:8]}"]


def store_for(flags: list[str]) -> SQLiteStore | RedisStore:
    return SQLiteStore(flags[1]) if flags[0] == "--db" else RedisStore(flags[1], namespace=flags[3])


async def test_verify_all_passes_a_thousand_journaled_runs_in_one_line(store_flags: list[str], forker: Forker) -> None:
    """1,000 journaled runs: `runs verify --all --key-env NAME` exits 0 with one line counting runs and entries;
    without --key-env it says the HMACs were not checked."""
    async with store_for(store_flags) as store:
        await journaled(store, 1000)
    checked = runs(forker, "verify", "--all", "--key-env", "AUDIT_KEY", *store_flags)
    assert checked.returncode == 0, checked.stderr
    assert checked.stdout.endswith(": 6000 entries, chained and signed\n") and checked.stdout.count("\n") == 1
    assert checked.stdout.startswith("1000 runs intact in ")
    unkeyed = runs(forker, "verify", "--all", *store_flags, key=None)
    assert unkeyed.returncode == 0 and "HMACs not checked: give --key-env NAME" in unkeyed.stdout, unkeyed.stderr


async def test_verify_exits_1_naming_the_first_bad_entry_of_each_bad_run(tmp_path: Path, forker: Forker) -> None:
    """Of three runs, one has an entry altered and one an entry removed (written to the SQLite file directly):
    `verify --all` exits 1 with a line per bad run naming its first bad entry, then a count; `verify RUN` of the
    intact one exits 0."""
    path = tmp_path / "onion.db"
    async with SQLiteStore(path) as store:
        altered, removed, intact = await journaled(store, 3)
    entries = rows(path, altered)
    entries[3] = entries[3].replace('"content":"2"', '"content":"3"')
    rewrite(path, altered, entries)
    rewrite(path, removed, [e for n, e in enumerate(rows(path, removed)) if n != 2])
    found = runs(forker, "verify", "--all", "--key-env", "AUDIT_KEY", "--db", str(path))
    assert found.returncode == 1, found.stderr
    lines = sorted(found.stdout.splitlines())
    assert lines[0] == "2 of 3 runs not intact"
    said = {line.split(":")[0]: line for line in lines[1:]}
    assert said.keys() == {f"run {altered}", f"run {removed}"}
    assert said[f"run {altered}"].startswith(f"run {altered}: entry 3's HMAC does not match its text")
    assert said[f"run {removed}"].startswith(f"run {removed}: 1 entry before entry 2 was removed")
    one = runs(forker, "verify", altered, "--key-env", "AUDIT_KEY", "--db", str(path))
    assert (one.returncode, one.stdout.count("\n")) == (1, 1) and "entry 3" in one.stdout
    fine = runs(forker, "verify", intact, "--key-env", "AUDIT_KEY", "--db", str(path))
    assert (fine.returncode, fine.stdout) == (0, f"run {intact} intact: 6 entries, chained and signed\n"), fine.stderr


async def test_verify_with_the_wrong_key_names_entry_0_of_every_run(tmp_path: Path, forker: Forker) -> None:
    """Verified with a key the runs were not written with: exit 1, each run's line says entry 0's HMAC does not
    match the key."""
    path = tmp_path / "onion.db"
    async with SQLiteStore(path) as store:
        ids = await journaled(store, 2)
    found = runs(
        forker, "verify", "--all", "--key-env", "AUDIT_KEY", "--db", str(path), key="another key, 32 bytes long...."
    )
    assert found.returncode == 1
    for run_id in ids:
        assert f"run {run_id}: entry 0's HMAC does not match the key" in found.stdout


def test_verify_with_a_key_variable_not_set_or_no_run_named_is_one_line(tmp_path: Path, forker: Forker) -> None:
    """`--key-env NAME` of a variable that is not set, and an unknown run: one line on stderr, exit 1; neither a
    run nor --all: exit 2 saying one is needed."""
    path = tmp_path / "onion.db"
    asyncio.run(_one_run(path))
    unset = runs(forker, "verify", "--all", "--key-env", "AUDIT_KEY", "--db", str(path), key=None)
    assert unset.returncode == 1 and unset.stdout == "" and len(unset.stderr.splitlines()) == 1
    assert "--key-env AUDIT_KEY: the environment variable AUDIT_KEY is not set" in unset.stderr
    unknown = runs(forker, "verify", "run-nope", "--db", str(path))
    assert unknown.returncode == 1 and "no run 'run-nope'" in unknown.stderr and "Traceback" not in unknown.stderr
    neither = runs(forker, "verify", "--db", str(path))
    assert neither.returncode == 2 and "RUN_ID --all" in neither.stderr


async def _one_run(path: Path) -> str:
    async with SQLiteStore(path) as store:
        (run_id,) = await journaled(store, 1)
    return run_id


async def test_export_writes_the_journal_as_json_lines_decisions_with_who_and_when(
    tmp_path: Path, forker: Forker
) -> None:
    """A run paused for approval and decided by u-17: `runs export RUN` writes one JSON object a line, the store's
    entries as they are, its decision among them with who decided and when."""
    path = tmp_path / "onion.db"
    async with SQLiteStore(path) as store:
        first = Agent(ScriptedModel([[call("add", x=1)]]), tools=[add], store=store).use(approve("add"))
        paused = await first.run("go")
        state = await store.load(paused.run_id)
        state.approve_all()
        later = Agent(ScriptedModel(["done"]), tools=[add], store=store).use(approve("add"))
        await later.resume(state, principal=Principal("u-17"))
        stored = await store.journal(paused.run_id)
    exported = runs(forker, "export", paused.run_id, "--db", str(path))
    assert exported.returncode == 0, exported.stderr
    assert exported.stdout.splitlines() == stored
    (decision,) = [json.loads(line) for line in exported.stdout.splitlines() if '"k":"decision"' in line]
    assert decision["record"]["by"]["id"] == "u-17" and decision["record"]["decision"] == "approved"
    assert decision["record"]["at"].startswith("20")


@tool
def fetch_page() -> str:
    return "\x1b]52;c;aGk=\x07\x9b31m\u202eevil\u2028line"


async def test_export_escapes_what_is_not_printable_and_keeps_the_values(tmp_path: Path, forker: Forker) -> None:
    """A tool result with C1 controls, a bidi mark and a line separator (which JSON text may hold raw): exported
    as JSON escapes, so each line is printable and reads back as the same value."""
    path = tmp_path / "onion.db"
    async with SQLiteStore(path) as store:
        agent = Agent(ScriptedModel([[call("fetch_page")], "ok"]), tools=[fetch_page], store=store)
        run_id = (await agent.run("read it")).run_id
        stored = await store.journal(run_id)
    exported = runs(forker, "export", run_id, "--db", str(path))
    lines = exported.stdout.splitlines()
    assert exported.returncode == 0 and len(lines) == len(stored), exported.stderr
    assert all(line.isprintable() for line in lines)
    assert [json.loads(line) for line in lines] == [json.loads(entry) for entry in stored]
    assert any("\\u009b31m\\u202eevil\\u2028line" in line for line in lines)
