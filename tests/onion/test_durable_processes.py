"""Paused runs across real processes: decided in another process from SQLiteStore; claimed by exactly one worker."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from middleware import approve
from onion import Agent, ModelCall, ToolRequest, tool
from onion.stores import SQLiteStore
from onion.testing import FunctionModel

pytestmark = pytest.mark.slow  # several processes in real time

WORKER = """
import asyncio, sys
from pathlib import Path
from onion import Agent, check_history, tool
from onion.errors import RunBusy
from onion.stores import SQLiteStore
from onion.testing import FunctionModel

db, effects, mode = sys.argv[1], Path(sys.argv[2]), sys.argv[3]

@tool
def pay(amount: int) -> str:
    with open(effects, "a") as f:
        f.write(f"{amount}\\n")
    return f"paid {amount}"

def answer(call):
    check_history(call.messages)
    return " / ".join(m.text for m in call.messages if m.role == "tool")

async def main():
    async with SQLiteStore(db) as store:
        agent = Agent(FunctionModel(answer), tools=[pay], store=store)
        if mode == "decide":
            state = await store.load(sys.argv[4])
            state.approve("a")
            state.reject("b", reason="too much")
            state.edit("c", {"amount": 30})
            print((await agent.resume(state)).output, flush=True)
            return
        for line in sys.stdin:
            state = await store.load(line.strip())
            state.approve_all()
            print("ready", flush=True)
            sys.stdin.readline()  # "go": both workers hold the paused state now
            try:
                await agent.resume(state)
            except RunBusy:
                print("busy", flush=True)
            else:
                print("won", flush=True)

asyncio.run(main())
"""


def pay_tool(effects: Path) -> Any:
    @tool
    def pay(amount: int) -> str:
        with open(effects, "a") as f:
            f.write(f"{amount}\n")
        return f"paid {amount}"

    return pay


def tell(workers: list[subprocess.Popen[str]], line: str) -> None:
    for worker in workers:
        assert worker.stdin is not None
        worker.stdin.write(line + "\n")
        worker.stdin.flush()


def asks_for(*requests: ToolRequest) -> FunctionModel:
    return FunctionModel(lambda call: list(requests) if call.messages[-1].role == "user" else "unused")


async def test_another_process_loads_the_paused_run_from_sqlite_approves_rejects_edits_and_finishes(
    tmp_path: Path,
) -> None:
    """Process B approves a, rejects b, edits c: a ran once, b never, c with the new amount; the model read why."""
    db, effects = tmp_path / "onion.db", tmp_path / "effects"
    batch = [ToolRequest(call_id, "pay", {"amount": n}) for call_id, n in (("a", 1), ("b", 2), ("c", 3))]
    async with SQLiteStore(db) as store:
        agent = Agent(asks_for(*batch), tools=[pay_tool(effects)], store=store).use(approve("pay"))
        paused = await agent.run("pay them")
    assert paused.paused and not effects.exists()
    done = subprocess.run(
        [sys.executable, "-c", WORKER, str(db), str(effects), "decide", paused.run_id],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "paid 1 / Tool call pay was rejected: too much / paid 30"
    assert sorted(effects.read_text().split()) == ["1", "30"]
    async with SQLiteStore(db) as store:
        assert (await store.run_record(paused.run_id)).status == "completed"  # type: ignore[union-attr]


async def test_two_processes_resume_the_same_paused_run_twenty_times_one_wins_each_time(tmp_path: Path) -> None:
    """Both workers load and approve each paused run, then resume at once: one wins, the other gets RunBusy.

    The approved tool ran 20 times in all, once per run.
    """
    db, effects = tmp_path / "onion.db", tmp_path / "effects"

    def amount_of_the_run(call: ModelCall) -> Any:
        return [ToolRequest("a", "pay", {"amount": int(call.messages[-1].text)})]

    workers = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(db), str(effects), "race"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    outcomes = []
    try:
        async with SQLiteStore(db) as store:
            agent = Agent(FunctionModel(amount_of_the_run), tools=[pay_tool(effects)], store=store)
            agent.use(approve("pay"))
            for n in range(20):
                paused = await agent.run(str(n))
                tell(workers, paused.run_id)
                assert [worker.stdout.readline() for worker in workers if worker.stdout] == ["ready\n"] * 2
                tell(workers, "go")
                outcomes.append(sorted(worker.stdout.readline().strip() for worker in workers if worker.stdout))
                assert (await store.run_record(paused.run_id)).status == "completed"  # type: ignore[union-attr]
    finally:
        for worker in workers:
            if worker.stdin:
                worker.stdin.close()
            worker.wait(timeout=60)
            if worker.stdout:
                worker.stdout.close()
    assert outcomes == [["busy", "won"]] * 20
    assert sorted(int(n) for n in effects.read_text().split()) == list(range(20))
