"""Worker processes (worker_process.py) on one task queue, each SIGKILLable; all of them stopped at the end."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

from forker import Forked, Forker

WORKER = Path(__file__).parent / "worker_process.py"


class Workers:
    """Starts workers for `flows` ("support" or "soak") on a fresh task queue of the server at `address`.

    With a `forker`, each worker is forked from it (temporalio and onion imported once: tests/forker.py).
    """

    def __init__(
        self, address: str, url: str, effects: Path, flows: str = "support", forker: Forker | None = None
    ) -> None:
        self.address, self.url, self.flows, self.queue = address, url, flows, f"q-{uuid.uuid4().hex}"
        self.effects, self.forker = effects, forker
        self.env = {**os.environ, "ONION_EFFECTS": str(effects), "ONION_FAKE_URL": url}
        self.started: list[subprocess.Popen[str] | Forked] = []

    def start(self) -> subprocess.Popen[str] | Forked:
        """A new worker, once it polls its task queue."""
        arguments = [self.address, self.queue, self.flows]
        process: subprocess.Popen[str] | Forked
        if self.forker is not None:
            process = self.forker.popen(WORKER, *arguments, env=self.env, inherit=(0, 2))
        else:
            process = subprocess.Popen(
                [sys.executable, str(WORKER), *arguments], env=self.env, stdout=subprocess.PIPE, text=True
            )
        self.started.append(process)
        assert process.stdout is not None and process.stdout.readline().strip() == "ready"
        return process

    def stop_all(self) -> None:
        for process in self.started:
            process.kill()
            process.wait()
