"""The official AG-UI client (npm `@ag-ui/client`, pinned in ag_ui_client/package.json) against `/ag-ui` on a real
uvicorn server: what the client holds after text, tools, an interrupt and its resume, a second resume, a stream
reset, a disconnect and reconnect.

The client is installed by `npm ci` into ag_ui_client/node_modules (gitignored) the first time; skipped when node
or npm is missing.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from live_server import TOKEN, Served

from onion import Message, ModelResponse, ToolRequest
from onion.testing import StreamError

CLIENT = Path(__file__).parent / "ag_ui_client"


@pytest.fixture(scope="module")
def node() -> str:
    """The `node` binary, with `@ag-ui/client` installed beside client.mjs (`npm ci`, once per lock file)."""
    found, npm = shutil.which("node"), shutil.which("npm")
    if found is None or npm is None:
        pytest.skip("node and npm are needed to run the official @ag-ui/client (apt-get install nodejs npm)")
    installed = CLIENT / "node_modules" / ".package-lock.json"
    with open(CLIENT / ".install.lock", "w") as lock:  # one install at a time, whoever runs the suite
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not installed.exists() or installed.stat().st_mtime < (CLIENT / "package-lock.json").stat().st_mtime:
            done = subprocess.run(
                [npm, "ci", "--no-audit", "--no-fund"], cwd=CLIENT, capture_output=True, text=True, timeout=300
            )
            if done.returncode != 0:
                pytest.fail(f"npm ci in {CLIENT} failed (it needs the npm registry once):\n{done.stderr[-2000:]}")
    return found


def client(node: str, served: Served, scenario: str) -> dict[str, Any]:
    """What `node client.mjs <scenario>` printed: the client's state once the scenario is done."""
    env = {**os.environ, "ONION_URL": served.url, "ONION_TOKEN": TOKEN}
    done = subprocess.run(
        [node, "client.mjs", scenario], cwd=CLIENT, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, f"client.mjs {scenario} failed:\n{done.stderr[-3000:]}"
    printed: dict[str, Any] = json.loads(done.stdout)
    return printed


def asks(call_id: str, name: str, **args: Any) -> ModelResponse:
    return ModelResponse(Message.assistant("", [ToolRequest(call_id, name, args)]))


def conversation(printed: dict[str, Any]) -> list[tuple[str, Any]]:
    """The client's messages as (role, text or tool calls or tool result)."""
    shown = []
    for message in printed["messages"]:
        calls = [
            (c["function"]["name"], json.loads(c["function"]["arguments"])) for c in message.get("toolCalls") or []
        ]
        shown.append((message["role"], calls or message.get("content")))
    return shown


def test_a_text_answer_is_one_assistant_message(node: str, serving: Callable[..., Served]) -> None:
    """The client ends the run with the output as its result and the answer as one assistant message."""
    served = serving()
    served.fake.script(["Bonjour from the agent."])
    printed = client(node, served, "text")
    assert printed["run"]["error"] is None and printed["run"]["result"] == "Bonjour from the agent."
    assert conversation(printed) == [("user", "hello"), ("assistant", "Bonjour from the agent.")]


def test_a_tool_call_and_its_result_are_in_the_clients_messages(node: str, serving: Callable[..., Served]) -> None:
    """A tool run: the client holds the assistant's tool call, the tool's result after it, then the answer."""
    served = serving()
    served.fake.script([asks("toolu_c1", "lookup", city="Oslo"), "Sunny in Oslo."])
    printed = client(node, served, "tools")
    assert printed["run"]["error"] is None
    assert conversation(printed) == [
        ("user", "weather in Oslo?"),
        ("assistant", [("lookup", {"city": "Oslo"})]),
        ("tool", "sunny in Oslo"),
        ("assistant", "Sunny in Oslo."),
    ]


def test_an_interrupt_is_resumed_once_and_a_second_resume_is_refused(node: str, serving: Callable[..., Served]) -> None:
    """The pause is the client's pending interrupt; resuming it runs the call once and clears it; a second client
    holding the same interrupt resumes it again: RUN_ERROR 409, nothing runs twice."""
    served = serving()
    served.fake.script([asks("toolu_c2", "delete", path="client.txt"), "Deleted client.txt."])
    printed = client(node, served, "approval")
    [interrupt] = printed["interrupts"]
    assert interrupt["toolCallId"] == "toolu_c2" and interrupt["message"] == "deleting needs a person"
    assert printed["paused"]["error"] is None and printed["paused"]["seen"][-1] == "RUN_FINISHED"
    assert printed["resumed"]["error"] is None and printed["resumed"]["result"] == "Deleted client.txt."
    assert printed["again"]["error"]["code"] == "409" and printed["pending"] == []
    assert conversation(printed)[-2:] == [("tool", "deleted client.txt"), ("assistant", "Deleted client.txt.")]
    assert served.effects_lines().count("delete client.txt") == 1


def test_text_a_stream_reset_withdraws_is_not_kept_by_the_client(node: str, serving: Callable[..., Served]) -> None:
    """The model's stream fails after a draft and the call is retried: the client keeps only the answer."""
    served = serving()
    served.fake.script([StreamError(partial_text="A draft the model withdraws."), "The real answer."])
    printed = client(node, served, "reset")
    assert conversation(printed) == [("user", "a flaky question"), ("assistant", "The real answer.")]
    assert "MESSAGES_SNAPSHOT" in printed["run"]["seen"] and printed["run"]["result"] == "The real answer."


def test_a_client_that_leaves_reconnects_to_the_run_it_left(node: str, serving: Callable[..., Served]) -> None:
    """The client aborts once the tool call is sent; the run goes on; connectAgent() at /runs/{run_id}/events
    rebuilds the whole run, each message once, and ends with its result; the tool ran once."""
    served = serving()
    served.fake.script([asks("toolu_c3", "slow", seconds=1.0), "Finished after the wait."])
    printed = client(node, served, "reconnect")
    assert printed["left"]["error"]["code"] == "abort" and printed["left"]["seen"][-1] == "RUN_ERROR"
    assert ("tool", "waited") not in conversation({"messages": printed["partial"]})
    assert printed["reconnected"] == {"result": "Finished after the wait.", "error": None}
    assert conversation(printed) == [
        ("user", "wait"),
        ("assistant", [("slow", {"seconds": 1.0})]),
        ("tool", "waited"),
        ("assistant", "Finished after the wait."),
    ]
    assert served.effects_lines().count("slow 1.0") == 1
