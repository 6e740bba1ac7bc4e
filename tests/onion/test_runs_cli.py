"""`python -m onion runs`: operators list a store's runs and look into one, secrets redacted."""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import os
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from forker import Forked, Forker

from middleware import approve
from onion import Agent, Decisions, ToolCall, tool
from onion._runs_actions import decide, purge, recover
from onion._runs_cli import Refused, duration, list_runs, show_run
from onion.stores import RedisStore, SQLiteStore
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


async def test_runs_lists_the_runs_in_one_status(db: Path) -> None:
    """`runs --status failed` lists the failed run only; a status no run has says so."""
    (failed,) = (await list_runs(db, status="failed")).splitlines()[1:]
    assert failed.split()[1] == "failed"
    assert (await list_runs(db, status="paused")).startswith("no paused runs in ")


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
    with pytest.raises(Refused, match=r"no store at nope\.db"):
        await list_runs(Path("nope.db"))
    assert not Path("nope.db").exists()


def test_the_cli_runs_as_a_module(db: Path, forker: Forker) -> None:
    """`python -m onion runs --db PATH` prints the table; `runs show ID --db PATH` one run."""
    listed = forker.run("-m", "onion", "runs", "--db", str(db), timeout=60)
    assert listed.returncode == 0 and "completed" in listed.stdout, listed.stderr
    run_id = listed.stdout.splitlines()[1].split()[0]
    shown = forker.run("-m", "onion", "runs", "show", run_id, "--db", str(db), timeout=60)
    assert shown.returncode == 0 and f"run      {run_id}" in shown.stdout and KEY not in shown.stdout


async def test_runs_show_a_paused_runs_pending_calls_with_their_reasons(tmp_path: Path) -> None:
    """A paused run lists its calls waiting for a decision, with why they paused; its row counts them."""
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


def test_a_damaged_store_is_named_in_one_line_not_a_traceback(tmp_path: Path, forker: Forker) -> None:
    """`runs --db FILE` on a file that is not an SQLite database exits with the store's message naming the file."""
    path = tmp_path / "notes.db"
    path.write_text("not a database\n" * 300)
    listed = forker.run("-m", "onion", "runs", "--db", str(path), timeout=60)
    assert listed.returncode == 1 and "Traceback" not in listed.stderr
    assert f"SQLiteStore('{path}')" in listed.stderr and "not an intact SQLite database" in listed.stderr


# -- deciding, recovering and deleting runs from the command line ----------------------------------------------------

HERE = Path(__file__).parent
AGENT = "runs_agent:agent"
_spec = importlib.util.spec_from_file_location("runs_agent", HERE / "runs_agent.py")
assert _spec is not None and _spec.loader is not None
runs_agent = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(runs_agent)


def runs(forker: Forker, *args: str, effects: Path, start_at: float = 0) -> Forked:
    """`python -m onion runs ARGS` in a process of its own, the test agent importable (tests/onion/runs_agent.py);
    `start_at`: the agent's import waits until then (processes that race start at one moment)."""
    env = {**os.environ, "PYTHONPATH": str(HERE), "EFFECTS": str(effects), "START_AT": str(start_at)}
    return forker.popen("-m", "onion", "runs", *args, env=env, cwd=effects.parent)


def finished(process: Forked) -> tuple[int, str, str]:
    out, err = process.communicate(timeout=60)
    return process.returncode, out, err


async def paused_run(store: Any, words: str = "a.txt") -> str:
    """A run of the test agent paused at its `delete` calls (one per word), in `store`."""
    agent = runs_agent.build()
    agent.store = store
    result = await agent.run(f"tidy {words}")
    assert result.paused
    return result.run_id


def effects_of(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


@pytest.fixture
def effects(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The file each run of the test agent's tool appends a line to (in this process and the CLI's)."""
    path = tmp_path / "effects.txt"
    monkeypatch.setenv("EFFECTS", str(path))
    return path


@pytest.fixture(params=["sqlite", "redis"])
def store_flags(request: pytest.FixtureRequest, tmp_path: Path) -> list[str]:
    """The flags naming a real store: an SQLite file, or a real redis-server under a namespace of this test's."""
    if request.param == "sqlite":
        return ["--db", str(tmp_path / "onion.db")]
    url = request.getfixturevalue("redis_url")
    return ["--redis", url, "--namespace", f"cli-{uuid.uuid4().hex[:8]}"]


def store_for(flags: list[str]) -> SQLiteStore | RedisStore:
    return SQLiteStore(flags[1]) if flags[0] == "--db" else RedisStore(flags[1], namespace=flags[3])


async def test_two_concurrent_approve_processes_decide_once_and_the_tool_runs_once(
    store_flags: list[str], effects: Path, forker: Forker
) -> None:
    """Two operators approve one paused run at the same moment: one process completes it (exit 0), the other
    exits 1 with one line saying the run was decided or is held, and the tool ran once."""
    async with store_for(store_flags) as store:
        run_id = await paused_run(store)
    at = time.time() + 1.5
    racing = [
        runs(forker, "approve", run_id, "--agent", AGENT, *store_flags, effects=effects, start_at=at) for _ in range(2)
    ]
    (won, won_out, won_err), (lost, lost_out, lost_err) = sorted(map(finished, racing))
    assert (won, lost) == (0, 1), (won_err, lost_err)
    assert won_out == f"run {run_id} completed: done: deleted a.txt\n"
    assert lost_out == "" and len(lost_err.splitlines()) == 1 and run_id in lost_err and "Traceback" not in lost_err
    assert "(nothing ran here)" in lost_err or "nothing waits for a decision" in lost_err, lost_err
    assert effects_of(effects) == ["delete a.txt"]


async def test_of_two_decisions_racing_past_the_load_the_claim_lets_one_run(tmp_path: Path, effects: Path) -> None:
    """Two deciders that both loaded the paused state: `agent.resume(state)` claims the run for one; the other
    ends with one line from the claim (`BatchDecided` or `RunBusy`) saying nothing ran, and the tool ran once."""
    async with SQLiteStore(tmp_path / "onion.db") as store:
        run_id = await paused_run(store)
        agents = [runs_agent.build(), runs_agent.build()]
        for agent in agents:
            agent.store = store
        every = Decisions(approve_rest=True)
        outcomes = await asyncio.gather(*(decide(agent, run_id, every) for agent in agents), return_exceptions=True)
    lost = [o for o in outcomes if isinstance(o, Refused)]
    assert f"run {run_id} completed: done: deleted a.txt" in outcomes and len(lost) == 1, outcomes
    assert str(lost[0]).endswith("(nothing ran here)") and "\n" not in str(lost[0])
    assert effects_of(effects) == ["delete a.txt"]


async def test_runs_lists_shows_and_deletes_on_a_redis_store(redis_url: str, effects: Path, forker: Forker) -> None:
    """`--redis URL --namespace N` works as `--db`: the table, one run, delete; another namespace sees nothing."""
    namespace = f"cli-{uuid.uuid4().hex[:8]}"
    async with RedisStore(redis_url, namespace=namespace) as store:
        run_id = await paused_run(store)
    flags = ["--redis", redis_url, "--namespace", namespace]
    asked = [runs(forker, *flags, effects=effects), runs(forker, "show", run_id, *flags, effects=effects)]
    asked.append(runs(forker, "--redis", redis_url, "--namespace", "elsewhere", effects=effects))
    (code, listed, err), (shown_code, shown, _), (_, elsewhere, _) = map(finished, asked)
    assert code == 0 and listed.splitlines()[1].split()[:3] == [run_id, "paused", "1"], err
    assert shown_code == 0 and "pending calls (1)" in shown and "paused: deleting" in shown
    assert elsewhere.startswith("no runs in RedisStore")
    code, out, err = finished(runs(forker, "delete", run_id, *flags, effects=effects))
    assert (code, out) == (0, f"deleted run {run_id} (paused)\n"), err
    async with RedisStore(redis_url, namespace=namespace) as store:
        assert await store.run_record(run_id) is None


async def test_reject_gives_the_model_the_reason_and_edit_runs_the_tool_with_the_new_arguments(
    tmp_path: Path, effects: Path, forker: Forker
) -> None:
    """`reject RUN CALL --reason R` and `edit RUN CALL --args JSON --approve-rest`: the model reads the reason,
    the edited call runs with its new arguments, the rest are approved; nothing else runs."""
    async with SQLiteStore(tmp_path / "onion.db") as store:
        first, second = await paused_run(store, "a.txt b.txt"), await paused_run(store, "c.txt d.txt")
    flags = ["--agent", AGENT, "--db", str(tmp_path / "onion.db")]
    code, out, err = finished(
        runs(forker, "reject", first, "del-a.txt", "--reason", "only copy", "--approve-rest", *flags, effects=effects)
    )
    assert code == 0 and "Tool call delete was rejected: only copy; deleted b.txt" in out, err
    code, out, err = finished(
        runs(
            forker,
            "edit",
            second,
            "del-c.txt",
            "--args",
            '{"path": "c.tmp"}',
            "--approve-rest",
            *flags,
            effects=effects,
        )
    )
    assert code == 0 and out == f"run {second} completed: done: deleted c.tmp; deleted d.txt\n", err
    assert sorted(effects_of(effects)) == ["delete b.txt", "delete c.tmp", "delete d.txt"]


async def test_a_batch_with_a_call_left_undecided_runs_nothing_and_names_the_call(
    tmp_path: Path, effects: Path
) -> None:
    """Approving one of two pending calls is refused (a batch resumes once, every call decided): the message
    names the other call and --approve-rest; the run still waits, nothing ran."""
    async with SQLiteStore(tmp_path / "onion.db") as store:
        run_id = await paused_run(store, "a.txt b.txt")
        agent = runs_agent.build()
        agent.store = store
        with pytest.raises(Refused, match=r"calls del-b\.txt have no decision: .* --approve-rest"):
            await decide(agent, run_id, Decisions(["del-a.txt"]))
        assert (await store.run_record(run_id)).status == "paused"  # type: ignore[union-attr]
    assert effects_of(effects) == []


async def test_resume_recovers_a_failed_run_and_sends_a_paused_one_to_its_decisions(
    tmp_path: Path, effects: Path
) -> None:
    """`resume` goes on with a run that failed inside its tool (the call in doubt is answered as interrupted,
    not run again); on a paused run it says to decide first; on a completed one that nothing is left."""
    async with SQLiteStore(tmp_path / "onion.db") as store:
        crashing = Agent(runs_agent.build().model, tools=[runs_agent.delete], store=store, name="tidy").use(crash)
        with pytest.raises(Crash):
            await crashing.run("tidy a")
        failed = (await store.runs())[0].run_id
        paused = await paused_run(store)
        agent = runs_agent.build()
        agent.store = store
        assert (await recover(agent, failed)).startswith(f"run {failed} completed: done: ")
        with pytest.raises(Refused, match=rf"run {paused} is paused: decide its pending calls first"):
            await recover(agent, paused)
        with pytest.raises(Refused, match=rf"run {failed} has completed: there is nothing to resume"):
            await recover(agent, failed)
    assert effects_of(effects) == ["delete a"]


async def test_deciding_with_another_agent_than_the_runs_is_refused(tmp_path: Path, effects: Path) -> None:
    """A run goes on only with the agent that ran it: `--agent` naming another agent is an error naming both."""
    async with SQLiteStore(tmp_path / "onion.db") as store:
        run_id = await paused_run(store)
        other = Agent(ScriptedModel(["x"]), name="other", store=store)
        with pytest.raises(Refused, match=r"belongs to agent 'tidy', not 'other': .* pass its --agent"):
            await decide(other, run_id, Decisions(approve_rest=True))
    assert effects_of(effects) == []


async def test_purge_deletes_ended_runs_older_than_the_duration_and_every_status_with_all(tmp_path: Path) -> None:
    """`purge --older-than 7d` deletes completed and failed runs not updated for 7 days, never paused ones
    (unless --all) nor recent ones."""
    async with SQLiteStore(tmp_path / "onion.db") as store:
        completed = (await Agent(ScriptedModel(["hi"]), store=store).run("hello")).run_id
        paused = await paused_run(store)
        week = duration("7d")
        later = time.time() + week + 60
        assert await purge(store, duration("8d"), now=later) == (
            f"deleted 0 completed and failed runs not updated for 8d from SQLiteStore {tmp_path / 'onion.db'}"
        )
        assert (await purge(store, week, now=later)).startswith("deleted 1 completed and failed runs")
        assert await store.run_record(completed) is None and await store.run_record(paused) is not None
        assert (await purge(store, week, every_status=True, now=later)).startswith("deleted 1 runs")
        assert await store.runs() == []


def test_a_duration_is_a_number_and_a_unit() -> None:
    """7d, 12h, 30m, 45s and plain seconds are read; anything else says how to write one."""
    assert [duration(d) for d in ("7d", "12h", "30m", "45s", "90", "1.5h")] == [604800, 43200, 1800, 45, 90, 5400]
    with pytest.raises(argparse.ArgumentTypeError, match=r"'7 days': give a number and a unit, e\.g\. 7d"):
        duration("7 days")


async def test_a_decided_runs_answer_is_printed_escaped_and_scrubbed(tmp_path: Path) -> None:
    """The output a resumed run ends with reaches the terminal with its control characters escaped and its
    secrets hidden, as `runs show` prints the journal."""
    async with SQLiteStore(tmp_path / "onion.db") as store:
        model = ScriptedModel([[call("send", to="bob", api_key=KEY)], f"key \x1b]52;c;aGk=\x07{KEY}"])
        agent = Agent(model, tools=[send], name="tidy", store=store).use(approve("send"))
        run_id = (await agent.run("send")).run_id
        printed = await decide(agent, run_id, Decisions(approve_rest=True))
    assert printed.isprintable() and KEY not in printed and "\\x1b]52;c;aGk=\\x07[REDACTED]" in printed


def test_every_error_is_one_line_and_a_non_zero_exit(tmp_path: Path, effects: Path, forker: Forker) -> None:
    """An unknown run, a call that is not pending, arguments that are not JSON, an agent that cannot be imported,
    both stores at once, a Redis that is down (its password hidden): one line on stderr, exit 1 or 2, no traceback."""
    db = tmp_path / "onion.db"
    run_id = asyncio.run(_paused_in(db))
    attempts = [
        ("approve", "run-nope", "--agent", AGENT, "--db", str(db)),
        ("approve", run_id, "del-zzz", "--agent", AGENT, "--db", str(db)),
        ("edit", run_id, "del-a.txt", "--args", "{path", "--agent", AGENT, "--db", str(db)),
        ("approve", run_id, "--agent", "nowhere:agent", "--db", str(db)),
        ("--db", str(db), "--redis", "redis://127.0.0.1:1/0"),
        ("--redis", "redis://:hunter2@127.0.0.1:1/0"),
    ]
    said = list(map(finished, [runs(forker, *attempt, effects=effects) for attempt in attempts]))
    for attempt, (code, out, err) in zip(attempts, said, strict=True):
        assert code in (1, 2) and out == "" and len(err.splitlines()) == 1 and "Traceback" not in err, (attempt, err)
    messages = [err for _, _, err in said]
    assert "no run 'run-nope'" in messages[0] and "no pending call 'del-zzz'" in messages[1]
    assert "argument --args" in messages[2] and "cannot import 'nowhere'" in messages[3]
    assert "not both" in messages[4] and "hunter2" not in messages[5] and "Redis at redis://***@" in messages[5]
    assert effects_of(effects) == []


async def _paused_in(db: Path) -> str:
    async with SQLiteStore(db) as store:
        return await paused_run(store)
