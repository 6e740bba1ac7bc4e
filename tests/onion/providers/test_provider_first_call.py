"""The first model call of a process: no layer's clock counts the SDK's import or its client, no loop waits on them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from onion import Agent
from onion.testing import FakeProviderServer

SCRIPT = Path(__file__).with_name("first_call_script.py")
ROOT = Path(__file__).parents[3]


def first_call(api: str, where: str) -> dict[str, Any]:
    """What `first_call_script.py` saw in a fresh interpreter."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, str(SCRIPT), api, where], capture_output=True, text=True, timeout=60, env=env, check=False
    )
    assert done.returncode == 0, done.stderr
    seen: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return seen


@pytest.mark.parametrize("api", ["anthropic", "openai", "openai-responses"])
def test_a_timeout_around_the_first_model_call_of_a_fresh_process_never_counts_the_sdk_and_the_loop_never_stalls(
    api: str,
) -> None:
    """An agent made before the loop (at module level): `timeout(0.5)` passes a 50 ms answer; no stall over 100 ms."""
    seen = first_call(api, "before-loop")
    assert seen["error"] is None and seen["output"] == "hello" and seen["requests"] == 1
    assert seen["max_lag_in_run"] < 0.1, seen


@pytest.mark.parametrize("api", ["anthropic", "openai"])
def test_an_agent_made_inside_the_loop_imports_its_sdk_in_a_thread_before_any_layers_clock(api: str) -> None:
    """Made in a running loop, the SDK is imported (1-3 s) in a worker thread before the run's layers: the first
    call under `timeout(0.5)` still succeeds, and the call itself sees no stall over 100 ms."""
    seen = first_call(api, "in-loop")
    assert seen["imported_before_run"] is False
    assert seen["error"] is None and seen["output"] == "hello" and seen["requests"] == 1
    assert seen["max_lag_in_call"] < 0.1, seen


@pytest.mark.parametrize("api", ["anthropic", "openai", "openai-responses"])
def test_run_sync_twice_on_an_agent_made_from_a_model_string_gives_each_event_loop_its_own_client(
    api: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each `run_sync` runs its own event loop: the second one gets a client of its own, not the first's closed one."""
    with FakeProviderServer(["one", "two", "three"]) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        monkeypatch.setenv("OPENAI_BASE_URL", server.openai_url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        agent = Agent("anthropic:claude-test" if api == "anthropic" else f"{api}:gpt-test")
        assert [agent.run_sync("hi").output for _ in range(3)] == ["one", "two", "three"]
        assert len(server.requests) == 3
