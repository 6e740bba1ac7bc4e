"""`python -m onion runs`: operators list a store's runs and look into one, secrets redacted."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from onion import Agent, ToolCall, tool
from onion._runs_cli import list_runs, show_run
from onion.stores import SQLiteStore
from onion.testing import ScriptedModel, call

KEY = "sk-ant-abcdefghijklmnop1234"


class Crash(BaseException):
    """The worker dies."""


@tool
def send(to: str, api_key: str) -> str:
    return "sent"


async def crash(call_: ToolCall, call_next: Any) -> Any:
    await call_next(call_)
    raise Crash


@pytest.fixture
async def db(tmp_path: Path) -> Path:
    """A store with a completed run on a session and a run whose worker died inside a tool."""
    path = tmp_path / "onion.db"
    async with SQLiteStore(path) as store:
        await Agent(ScriptedModel(["hello"]), store=store).run(f"my key is {KEY}", session="user-42")
        worker = Agent(ScriptedModel([[call("send", to="bob", api_key=KEY)]]), tools=[send], store=store)
        with pytest.raises(Crash):
            await worker.use(crash).run("send it")
    return path


async def test_runs_lists_id_status_pending_calls_and_age(db: Path) -> None:
    """One line per run, newest first: the failed run shows its one call without a result."""
    lines = (await list_runs(db)).splitlines()
    assert lines[0].split() == ["RUN", "STATUS", "PENDING", "AGE", "AGENT", "SESSION"]
    failed, completed = (line.split() for line in lines[1:])
    assert failed[1:3] == ["failed", "1"] and completed[1:3] == ["completed", "0"] and completed[-1] == "user-42"


async def test_runs_show_prints_history_and_pending_calls_with_secrets_redacted(db: Path) -> None:
    """The history and the call in doubt are shown; the API key in the input and in the arguments is not."""
    failed_id = (await list_runs(db)).splitlines()[1].split()[0]
    shown = await show_run(db, failed_id)
    assert KEY not in shown and "[REDACTED]" in shown
    assert "pending calls (1)" in shown and "send(" in shown and "in doubt" in shown
    completed_id = (await list_runs(db)).splitlines()[2].split()[0]
    shown = await show_run(db, completed_id)
    assert KEY not in shown and "my key is [REDACTED]" in shown and "session  user-42" in shown


async def test_a_missing_store_is_named() -> None:
    """A --db path with no file is an error naming it (no empty store is created)."""
    with pytest.raises(SystemExit, match=r"no store at nope\.db"):
        await list_runs(Path("nope.db"))
    assert not Path("nope.db").exists()


def test_the_cli_runs_as_a_module(db: Path) -> None:
    """`python -m onion runs --db PATH` prints the table; `runs show ID --db PATH` one run."""
    listed = subprocess.run(
        [sys.executable, "-m", "onion", "runs", "--db", str(db)], capture_output=True, text=True, timeout=60
    )
    assert listed.returncode == 0 and "completed" in listed.stdout, listed.stderr
    run_id = listed.stdout.splitlines()[1].split()[0]
    shown = subprocess.run(
        [sys.executable, "-m", "onion", "runs", "show", run_id, "--db", str(db)], capture_output=True, text=True
    )
    assert shown.returncode == 0 and f"run      {run_id}" in shown.stdout and KEY not in shown.stdout


async def test_runs_show_a_paused_runs_pending_calls_with_their_reasons(tmp_path: Path) -> None:
    """A paused run lists its calls waiting for a decision, with why they paused; its row counts them."""
    from middleware import approve

    path = tmp_path / "paused.db"
    async with SQLiteStore(path) as store:
        agent = Agent(ScriptedModel([[call("send", to="bob", api_key=KEY)]]), tools=[send], store=store)
        paused = await agent.use(approve("send", reason="sends mail")).run("send it")
    row = (await list_runs(path)).splitlines()[1].split()
    assert row[:3] == [paused.run_id, "paused", "1"]
    shown = await show_run(path, paused.run_id)
    assert "pending calls (1)" in shown and "paused: sends mail" in shown and KEY not in shown


@tool
def sign_in(login: dict[str, Any], secrets: list[str]) -> dict[str, Any]:
    return {
        "session": {"password": {"value": "hunter3"}},
        "keys": [{"api_key": "hunter4"}, "fine"],
        "passwords": ["hunter5"],
    }


async def test_runs_show_hides_secrets_nested_in_arguments_and_results_as_data(tmp_path: Path) -> None:
    """A value under a secret's name is hidden whole at any depth (dicts, lists), in a call's arguments and in a
    tool's JSON result; what is not secret still shows."""
    path = tmp_path / "nested.db"
    login = {"user": "bob", "password": {"value": "hunter2"}}
    async with SQLiteStore(path) as store:
        agent = Agent(
            ScriptedModel([[call("sign_in", login=login, secrets=["x", "hunter6"])], "done"]),
            tools=[sign_in],
            store=store,
        )
        run_id = (await agent.run("sign in")).run_id
    shown = await show_run(path, run_id)
    assert not any(f"hunter{n}" in shown for n in range(2, 7)), shown
    assert '"user": "bob"' in shown and "[REDACTED]" in shown and "fine" in shown


@tool
def read_config() -> str:
    return 'config: {"password": {"value": "hunter2"}, "user": "bob"} and [{"api_key": "hunter3"}] end'


async def test_runs_show_hides_secrets_in_json_that_follows_other_text(tmp_path: Path) -> None:
    """JSON inside a result, after a prefix, is scrubbed as data too; the text around it still shows."""
    path = tmp_path / "prefixed.db"
    async with SQLiteStore(path) as store:
        agent = Agent(ScriptedModel([[call("read_config")], "done"]), tools=[read_config], store=store)
        run_id = (await agent.run("read it")).run_id
    shown = await show_run(path, run_id)
    assert "hunter" not in shown and "config: {" in shown and '"user": "bob"' in shown and "end" in shown, shown


async def test_runs_show_scrubs_a_key_before_cutting_a_long_line(tmp_path: Path) -> None:
    """A key that straddles the 200-character cut of a line is hidden, not printed in part."""
    key = "sk-proj-" + "Ab1" * 16
    path = tmp_path / "long.db"
    async with SQLiteStore(path) as store:
        run_id = (await Agent(ScriptedModel(["ok"]), store=store).run("x" * 184 + " " + key)).run_id
    shown = await show_run(path, run_id)
    assert key[:12] not in shown and "x" * 184 + " [REDACTED]" in shown


@tool
def fetch_page() -> str:
    return "\x1b]52;c;cm0gLXJmIH4=\x07tool\x1b[2K\rstatus   completed\x1b[8mhidden\x1b[0m\x9b31m\x00\x7f\u202eevil"


async def test_runs_and_runs_show_escape_every_control_character_from_the_journal(tmp_path: Path) -> None:
    """Session ids, agent names, model text and tool results reach the terminal with every C0/C1 control
    (ESC, CR, BEL, NUL, DEL, CSI) escaped as text, so no OSC 52 clipboard write, erased line or hidden text;
    only the layout's own line breaks remain."""
    path = tmp_path / "escapes.db"
    session = "user\x1b]52;c;aGk=\x07-42"
    async with SQLiteStore(path) as store:
        agent = Agent(
            ScriptedModel([[call("fetch_page")], "a\rb\x1b[2Jc"]), tools=[fetch_page], store=store, name="bot\x1b[31m"
        )
        run_id = (await agent.run("hi\x1b[8m", session=session)).run_id
    for printed in (await list_runs(path), await show_run(path, run_id)):
        assert all(line.isprintable() for line in printed.split("\n")), printed
        assert "\\x1b]52;c;aGk=\\x07" in printed
    shown = await show_run(path, run_id)
    assert "tool\\x1b[2K\\rstatus   completed\\x1b[8mhidden" in shown and "\\x9b31m\\x00\\x7f\\u202eevil" in shown


def test_a_damaged_store_is_named_in_one_line_not_a_traceback(tmp_path: Path) -> None:
    """`runs --db FILE` on a file that is not an SQLite database exits with the store's message naming the file."""
    path = tmp_path / "notes.db"
    path.write_text("not a database\n" * 300)
    listed = subprocess.run(
        [sys.executable, "-m", "onion", "runs", "--db", str(path)], capture_output=True, text=True, timeout=60
    )
    assert listed.returncode == 1 and "Traceback" not in listed.stderr
    assert f"SQLiteStore('{path}')" in listed.stderr and "not an intact SQLite database" in listed.stderr
