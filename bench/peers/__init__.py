"""Peers: the workload on other frameworks, each in its own process, against onion there.

The interpreter is `--peers-python`, else `$ONION_BENCH_PYTHON`, else
`.bench-venv/bin/python` when it exists (`pip install -e '.[bench]'` there),
else this one. A peer that does not import is skipped with a note.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from ..table import Row
from ..timing import Scale

SECTION = "peers"
PEERS = {"langchain": "LangChain create_agent", "pydantic_ai": "pydantic-ai", "openai_agents": "OpenAI Agents"}
ROOT = Path(__file__).resolve().parent.parent.parent
TIMEOUT_S = 300


def interpreter(explicit: str | None = None) -> str:
    """The Python that runs the peers (see the module docstring)."""
    local = ROOT / ".bench-venv" / "bin" / "python"
    return explicit or os.environ.get("ONION_BENCH_PYTHON") or (str(local) if local.exists() else sys.executable)


def worker(python: str, name: str, scale: Scale) -> dict[str, Any]:
    """What the worker for peer `name` printed, or `{"skipped": reason}`."""
    command = [python, "-m", "bench.peers.worker", name, str(scale.peer_rounds), str(scale.peer_target_s)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    try:
        done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, env=env, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return {"skipped": f"timed out after {TIMEOUT_S} s"}
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return {"skipped": f"failed: {last[:100]}"}
    return json.loads(lines[-1])  # type: ignore[no-any-return]


def rows(scale: Scale, python: str) -> list[Row]:
    found: list[Row] = []
    for name, label in PEERS.items():
        answer = worker(python, name, scale)
        if "skipped" in answer:
            found.append(Row(SECTION, label, skipped=answer["skipped"]))
            continue
        seconds = answer["seconds"]
        for layers in (0, 10):
            peer, onion = seconds[f"peer {layers}"] * 1e6, seconds[f"onion {layers}"] * 1e6
            found.append(Row(SECTION, f"{label} {answer['version']}, {layers} layers", peer, "µs", onion, "onion"))
    return found
