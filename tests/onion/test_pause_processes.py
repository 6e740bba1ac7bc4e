"""A run paused in one process is decided and finished in another (real subprocesses, real Anthropic SDK)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from forker import Forker

from onion import Message, ModelResponse, ToolRequest
from onion.testing import FakeProviderServer

pytestmark = pytest.mark.slow  # several processes in real time

ROOT = Path(__file__).parents[2]
WORKER = Path(__file__).with_name("pause_worker.py")
ASKED = [
    ToolRequest("toolu_a", "read", {"path": "a.txt"}),
    ToolRequest("toolu_b", "delete", {"path": "b.txt"}),
    ToolRequest("toolu_c", "delete", {"path": "c.txt"}),
    ToolRequest("toolu_d", "delete", {"path": "d.txt"}),
]


def worker(forker: Forker, mode: str, server: FakeProviderServer, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """`python pause_worker.py MODE ...`, forked from the session's fork server (see tests/forker.py)."""
    arguments = [mode, server.url, str(tmp_path / "state.json"), str(tmp_path / "effects")]
    done = forker.run(WORKER, *arguments, timeout=60, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    return done


def assert_valid_anthropic_history(messages: list[dict[str, Any]]) -> None:
    """Roles alternate, and every tool_use is answered first thing in the next user message, in order."""
    assert messages[0]["role"] == "user"
    for index, message in enumerate(messages):
        if index:
            assert message["role"] != messages[index - 1]["role"], f"message {index} repeats a role"
        uses = [b["id"] for b in message["content"] if message["role"] == "assistant" and b["type"] == "tool_use"]
        if uses:
            answer = messages[index + 1]["content"]
            assert [b.get("tool_use_id") for b in answer[: len(uses)]] == uses, f"message {index + 1}"


def test_a_run_paused_in_one_process_is_approved_rejected_and_edited_in_another(
    server: FakeProviderServer, tmp_path: Path, forker: Forker
) -> None:
    """Process A pauses and exits; process B approves one delete, rejects one, edits one, and finishes.

    The approved call ran exactly once, the rejected one never, the edited one with its new arguments;
    every history sent was valid and the model read the rejection reason.
    """
    server.script([ModelResponse(Message.assistant("", ASKED)), "tidied"])
    effects = tmp_path / "effects"
    worker(forker, "start", server, tmp_path)
    assert effects.read_text().splitlines() == ["read a.txt"]
    saved = json.loads((tmp_path / "state.json").read_text())
    assert [call["id"] for call in saved["pending"]] == ["toolu_b", "toolu_c", "toolu_d"]

    done = json.loads(worker(forker, "resume", server, tmp_path).stdout)
    assert done == {"status": "completed", "output": "tidied", "state": {"user": "ann"}}
    lines = effects.read_text().splitlines()  # the approved and the edited call run in parallel: either order
    assert lines[0] == "read a.txt" and sorted(lines[1:]) == ["delete b.txt", "delete d.tmp"]
    bodies = [request.body for request in server.requests]
    assert len(bodies) == 2
    for body in bodies:
        assert_valid_anthropic_history(body["messages"])
    answers = {b["tool_use_id"]: b for b in bodies[1]["messages"][-1]["content"]}
    assert answers["toolu_c"]["is_error"] and "c.txt is the only copy" in answers["toolu_c"]["content"]
    assert answers["toolu_d"]["content"] == "deleted d.tmp" and not answers["toolu_b"]["is_error"]
