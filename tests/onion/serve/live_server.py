"""A real uvicorn server in a subprocess, on a free port, serving `served_agent.py` against the fake provider."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import pytest

from onion.testing import FakeProviderServer

ROOT = Path(__file__).parents[3]
HERE = Path(__file__).parent
TOKEN = "t0ken-for-tests"


@dataclass
class Served:
    """A running server: its base URL, the fake provider behind it, the file its tools write to."""

    url: str
    fake: FakeProviderServer
    effects: Path
    process: subprocess.Popen[bytes]

    def effects_lines(self) -> list[str]:
        return self.effects.read_text().splitlines() if self.effects.exists() else []

    def client(self, token: str | None = TOKEN) -> httpx2.AsyncClient:
        headers = {"authorization": f"Bearer {token}"} if token else {}
        return httpx2.AsyncClient(base_url=self.url, headers=headers, timeout=20)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_listening(port: int, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the server exited: {process.stderr.read().decode() if process.stderr else ''}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("the server did not listen within 30 s")


def start(command: list[str], env: dict[str, str], port: int) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(
        command, env={**os.environ, "PYTHONPATH": f"{ROOT}:{HERE}", **env}, stderr=subprocess.PIPE
    )
    wait_listening(port, process)
    return process


def stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(10)
    except subprocess.TimeoutExpired:
        process.kill()


def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., Served]]:
    """`served(store=True, token=TOKEN)`: a uvicorn server of `served_agent:app` (one per settings)."""
    running: dict[tuple[bool, str | None], Served] = {}
    fakes: list[FakeProviderServer] = []

    def served(*, store: bool = True, token: str | None = TOKEN) -> Served:
        if (store, token) in running:
            return running[(store, token)]
        fake = FakeProviderServer().__enter__()
        fakes.append(fake)
        folder = tmp_path_factory.mktemp("served")
        port = free_port()
        env = {"FAKE_URL": fake.url, "EFFECTS": str(folder / "effects"), "ONION_TEST_TOKEN": token or ""}
        env["ONION_TEST_DB"] = str(folder / "onion.db") if store else ""
        command = [sys.executable, "-m", "uvicorn", "served_agent:app", "--port", str(port), "--log-level", "warning"]
        running[(store, token)] = Served(
            f"http://127.0.0.1:{port}", fake, folder / "effects", start(command, env, port)
        )
        return running[(store, token)]

    yield served
    for server in running.values():
        stop(server.process)
    for fake in fakes:
        fake.__exit__(None, None, None)


def sse_events(text: str) -> list[dict[str, Any]]:
    """An SSE body as its events: each `{"id", "event", "data"}` (data parsed as JSON); comments left out."""
    events = []
    for block in text.split("\n\n"):
        fields: dict[str, Any] = {}
        for line in block.splitlines():
            if line.startswith(":") or ":" not in line:
                continue
            name, _, value = line.partition(":")
            fields[name] = value.removeprefix(" ")
        if "data" in fields:
            fields["data"] = json.loads(fields["data"])
            events.append(fields)
    return events
