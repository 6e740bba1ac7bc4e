"""A worker killed (SIGKILL) inside a tool marked `in_doubt="ask"`: the recovered run waits for a person, on SQLite
and on Redis, and each decision does what it says; the refund never happens twice without a person's approval."""

from __future__ import annotations

import asyncio
import os
import sys
import time
import uuid
from pathlib import Path

import pytest
from forker import Forker

from onion import Agent, Decisions
from onion.errors import RunStateError
from onion.testing import FunctionModel

sys.path.insert(0, str(Path(__file__).parent))
from in_doubt_worker import LEASE, answer, open_store, refund_tool

pytestmark = pytest.mark.slow  # several processes in real time

ROOT = Path(__file__).resolve().parents[2]
WORKER = Path(__file__).with_name("in_doubt_worker.py")


def killed_inside_the_refund(forker: Forker, where: str, namespace: str, effects: Path) -> list[str]:
    """Start the worker, SIGKILL it once the refund happened, wait for its lease to lapse; the effects so far."""
    worker = forker.popen(WORKER, where, namespace, str(effects), env={**os.environ, "PYTHONPATH": str(ROOT)})
    deadline = time.monotonic() + 60
    while not (effects.exists() and effects.read_text().endswith("\n")):
        assert worker.poll() is None, worker.communicate()[1]
        assert time.monotonic() < deadline, "the worker never reached the refund"
        time.sleep(0.02)
    worker.kill()
    worker.wait(timeout=30)
    time.sleep(LEASE + 0.2)
    return effects.read_text().splitlines()


@pytest.fixture(params=["sqlite", "redis"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return str(tmp_path / "onion.db") if request.param == "sqlite" else str(request.getfixturevalue("redis_url"))


@pytest.mark.parametrize("decision", ["approve", "reject", "resolve"])
def test_a_refund_in_doubt_after_sigkill_waits_for_a_person_and_each_decision_does_what_it_says(
    forker: Forker, where: str, decision: str, tmp_path: Path
) -> None:
    namespace, effects = f"t{uuid.uuid4().hex[:12]}", tmp_path / "payments.log"
    (first,) = killed_inside_the_refund(forker, where, namespace, effects)
    _, run_id, key = first.split()

    async def recover_and_decide() -> tuple[str, str, str]:
        store = open_store(where, namespace)
        agent = Agent(FunctionModel(answer), tools=[refund_tool(effects, hang=False)], store=store)
        paused = await agent.recover(run_id)
        (pending,) = paused.pending
        shown = f"{pending.kind} {pending.name}"
        assert len(effects.read_text().splitlines()) == 1  # recovering ran nothing
        with pytest.raises(RunStateError, match="is paused, waiting for decisions"):
            await agent.recover(run_id)  # nor does recovering it again
        decisions = {
            "approve": Decisions(approve=[pending.id]),
            "reject": Decisions(reject={pending.id: "refunded already"}),
            "resolve": Decisions(resolve={pending.id: "refunded o-1 at 10:02 (checked)"}),
        }[decision]
        result = await agent.resume(await agent.decide(run_id, decisions))
        await store.aclose()
        return shown, pending.reason, result.output

    shown, reason, output = asyncio.run(recover_and_decide())
    assert shown == "in_doubt refund" and "before its result was recorded" in reason
    lines = effects.read_text().splitlines()
    if decision == "approve":
        assert output == "read: refunded o-1"
        assert lines == [first, first]  # run again, under the same idempotency key
    elif decision == "reject":
        assert output == "read: Tool call refund was rejected: refunded already" and lines == [first]
    else:
        assert output == "read: refunded o-1 at 10:02 (checked)" and lines == [first]
    assert key.startswith("onion-")


def test_an_operator_resolves_a_refund_in_doubt_from_the_command_line(forker: Forker, tmp_path: Path) -> None:
    """`runs resume` brings the killed run to its in-doubt call, `runs show` says it may have run, `runs resolve
    RUN CALL --result TEXT` records what the operator checked: the model reads it, the refund never runs again."""
    where, effects = str(tmp_path / "onion.db"), tmp_path / "payments.log"
    (first,) = killed_inside_the_refund(forker, where, "onion", effects)
    run_id = first.split()[1]
    env = {**os.environ, "PYTHONPATH": str(WORKER.parent), "EFFECTS": str(effects)}

    def runs(*args: str) -> tuple[int, str, str]:
        process = forker.popen("-m", "onion", "runs", *args, "--db", where, env=env, cwd=tmp_path)
        out, err = process.communicate(timeout=60)
        return process.returncode, out, err

    code, out, err = runs("resume", run_id, "--agent", "in_doubt_worker:agent")
    assert code == 0 and f"run {run_id} paused again: " in out and " refund wait for a decision" in out, err
    call_id = out.split("paused again: ")[1].split()[0]
    code, out, err = runs("show", run_id)
    assert code == 0 and f'{call_id}  refund("order": "o-1")  may have run' in out, err
    code, out, err = runs(
        "resolve",
        run_id,
        call_id,
        "--result",
        "refunded o-1 (dashboard)",
        "--agent",
        "in_doubt_worker:agent",
        "--as",
        "ana",
    )
    assert (code, out) == (0, f"run {run_id} completed: read: refunded o-1 (dashboard)\n"), err
    assert effects.read_text().splitlines() == [first]
    code, out, err = runs("export", run_id)
    decided = [line for line in out.splitlines() if '"resolved"' in line]
    assert code == 0 and len(decided) == 1 and '"ana"' in decided[0] and "refunded o-1 (dashboard)" in decided[0]
