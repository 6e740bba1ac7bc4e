"""Three workers, 30 workflows, workers SIGKILLed at random while they run: every run completes, nothing twice."""

from __future__ import annotations

import asyncio
import random
import signal
import subprocess
import time
import uuid
from collections import Counter
from datetime import timedelta
from pathlib import Path

import soak_flows
from forker import Forker
from temporalio.client import Client
from workers import Workers

from onion.temporal import OnionPlugin

RUNS = 30
WORKERS = 3
KILLS = 8


def _in_flight(effects: Path, pid: int) -> set[str]:
    """The calls worker `pid` has started and not finished, by the side-effects file."""
    lines = effects.read_text().splitlines() if effects.exists() else []
    started = {line.split()[1] for line in lines if line.startswith("start ") and line.endswith(f" {pid}")}
    done = {line.split()[1] for line in lines if line.startswith("done ") and line.endswith(f" {pid}")}
    return started - done


async def _kill_at_random(
    workers: Workers, alive: list[subprocess.Popen[str]], effects: Path, chance: random.Random
) -> int:
    """SIGKILLs `KILLS` random workers at random moments, starting a new one for each; how many were mid-call."""
    mid_call, starting = 0, []
    for _ in range(KILLS):
        await asyncio.sleep(chance.uniform(0.2, 0.8))
        while not alive:
            await asyncio.sleep(0.05)
        victim = alive.pop(chance.randrange(len(alive)))
        mid_call += bool(_in_flight(effects, victim.pid))
        victim.send_signal(signal.SIGKILL)
        starting.append(asyncio.create_task(_replace(workers, victim, alive)))
    await asyncio.gather(*starting)
    return mid_call


async def _replace(workers: Workers, victim: subprocess.Popen[str], alive: list[subprocess.Popen[str]]) -> None:
    await asyncio.to_thread(victim.wait)
    alive.append(await asyncio.to_thread(workers.start))


async def test_thirty_runs_on_three_workers_killed_at_random_all_complete_and_no_charge_runs_twice(
    temporal_address: str, tmp_path: Path, temporal_forker: Forker
) -> None:
    """30 workflows over 3 worker processes, 8 of them SIGKILLed at random moments (a new one started for each):
    all 30 complete; no charge call (not idempotent) started twice, each either done or reported interrupted to
    the model (a kill may land before it starts); every resend (idempotent) finished."""
    effects = tmp_path / "effects.txt"
    workers = Workers(temporal_address, "", effects, flows="soak", forker=temporal_forker)
    client = await Client.connect(temporal_address, plugins=[OnionPlugin(soak_flows.soak)])
    try:
        began = time.monotonic()
        alive: list[subprocess.Popen[str]] = [workers.start() for _ in range(WORKERS)]
        kills = asyncio.create_task(_kill_at_random(workers, alive, effects, random.Random(24)))
        handles = []
        for order in range(RUNS):
            handles.append(
                await client.start_workflow(
                    soak_flows.Soak.run,
                    f"charge and resend order {order}",
                    id=f"soak-{uuid.uuid4().hex}",
                    task_queue=workers.queue,
                    task_timeout=timedelta(seconds=2),  # a workflow task lost with its worker is retried after 2 s
                )
            )
            await asyncio.sleep(0.25)
        results = asyncio.gather(*(handle.result() for handle in handles))
        mid_call = await kills
        killed_at = time.monotonic()
        answers = await asyncio.wait_for(results, 60)
        print(f"soak: kills done at {killed_at - began:.1f} s, all answers at {time.monotonic() - began:.1f} s")
    finally:
        workers.stop_all()
    lines = [line.split() for line in effects.read_text().splitlines()]
    starts = Counter(call_id for event, call_id, _ in lines if event == "start")
    done = {call_id for event, call_id, _ in lines if event == "done"}
    print(f"soak: {KILLS} kills, {mid_call} mid-call; {sum(starts.values()) - 2 * RUNS} calls started again")
    assert len(answers) == RUNS
    assert [call_id for call_id, n in starts.items() if call_id.startswith("charge") and n > 1] == []
    assert all(f"resend-{order}" in done for order in range(RUNS))
    charged = [order for order in range(RUNS) if f"charged order {order}" in answers[order]]
    interrupted = [order for order in range(RUNS) if "Tool charge was interrupted" in answers[order]]
    print(f"soak: {len(charged)} charges done, {len(interrupted)} interrupted (the model read it), none run twice")
    assert sorted(charged + interrupted) == list(range(RUNS))
    assert all(f"charge-{order}" in done for order in charged)
    assert mid_call > 0
