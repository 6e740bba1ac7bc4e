"""Crash recovery: a worker killed with SIGKILL mid-run; another process resumes the run from the journal.

The model is the real Anthropic SDK talking to the fake provider server, which
counts every request; tool side effects are counted in a file shared by both
processes.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from onion import Agent, tool
from onion.providers import AnthropicModel
from onion.stores import SQLiteStore
from onion.testing import Delay, FakeProviderServer, call

pytestmark = pytest.mark.slow  # several processes in real time

WORKER = """
import asyncio, os, sys, time
from pathlib import Path
from onion import Agent, tool
from onion.providers import AnthropicModel
from onion.stores import SQLiteStore

def worker(scenario, url, work):
    def effect(text):
        with open(work / "effects", "a") as f:
            f.write(text + "\\n")

    def hang(marker):
        (work / marker).write_text("here")
        time.sleep(600)

    @tool(idempotent=True)
    def lookup(key: str) -> str:
        effect("lookup " + key)
        if scenario == "in-idempotent-tool":
            hang("killed-here")
        return "value of " + key

    @tool
    def charge(amount: int) -> str:
        effect(f"charge {amount}")
        if scenario == "in-tool":
            hang("killed-here")
        return f"charged {amount}"

    async def main():
        store = SQLiteStore(work / "onion.db")
        model = AnthropicModel("claude-test", base_url=url, api_key="test-key")
        agent = Agent(model, tools=[lookup, charge], store=store, parallel_tools=False)
        if scenario == "before-model":
            @agent.on("before_llm")
            def stop(call):
                if call.run.steps == 2:
                    hang("killed-here")
        if scenario == "in-model":
            @agent.on("before_llm")
            def mark(call):
                if call.run.steps == 2:
                    (work / "killed-here").write_text("soon")
        await agent.run("look up k, then charge 5")

    asyncio.run(main())

# Imports and the TLS context are paid once: each scenario's worker is a fork of this process.
import anthropic, functools, httpcore2
httpcore2.default_ssl_context = functools.cache(httpcore2.default_ssl_context)
httpcore2.default_ssl_context()
for argument in sys.argv[1:]:
    scenario, url, work = argument.split("|")
    pid = os.fork()
    if pid == 0:
        worker(scenario, url, Path(work))
        os._exit(0)
    print(scenario, pid, flush=True)
for _ in sys.argv[1:]:
    os.wait()
"""


def effects(work: Path) -> list[str]:
    path = work / "effects"
    return path.read_text().splitlines() if path.exists() else []


SCENARIOS: dict[str, tuple[list[Any], int]] = {
    # scenario: (server script, requests the server must have seen before the kill)
    "in-tool": ([[call("lookup", key="k"), call("charge", amount=5)], "done"], 1),
    "in-idempotent-tool": ([[call("lookup", key="k"), call("charge", amount=5)], "done"], 1),
    "before-model": ([[call("lookup", key="k"), call("charge", amount=5)], "done"], 1),
    "in-model": ([[call("lookup", key="k"), call("charge", amount=5)], Delay(600, "never seen"), "done"], 2),
}


@pytest.fixture(scope="module")
def killed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, tuple[Path, FakeProviderServer]]]:
    """Every scenario's worker, started at once and SIGKILLed where its scenario says.

    Each has its own fake server and directory (its SQLite file, its marker, its effects file).
    """
    places = {}
    for scenario, (script, _) in SCENARIOS.items():
        places[scenario] = (tmp_path_factory.mktemp(scenario), FakeProviderServer(script).start())
    arguments = [f"{scenario}|{server.url}|{work}" for scenario, (work, server) in places.items()]
    forks = subprocess.Popen([sys.executable, "-c", WORKER, *arguments], stdout=subprocess.PIPE, text=True)
    try:
        assert forks.stdout is not None
        pids = dict(forks.stdout.readline().split() for _ in places)
        deadline = time.monotonic() + 60
        for scenario, (work, server) in places.items():
            while not ((work / "killed-here").exists() and len(server.requests) >= SCENARIOS[scenario][1]):
                assert forks.poll() is None, "the workers stopped before they were killed"
                assert time.monotonic() < deadline, f"worker {scenario} never reached the point to kill it at"
                time.sleep(0.01)
            os.kill(int(pids[scenario]), signal.SIGKILL)
        assert forks.wait(timeout=60) == 0
        yield places
    finally:
        if forks.poll() is None:
            forks.kill()
            forks.wait()
        if forks.stdout:
            forks.stdout.close()
        for _, server in places.values():
            server.close()


@pytest.fixture(scope="module", autouse=True)
def _fast_tls(one_ssl_context: None) -> None:
    """The resuming SDK clients build their TLS context once (see tests/conftest.py)."""


@pytest.fixture
async def resume(killed: dict[str, tuple[Path, FakeProviderServer]]) -> AsyncIterator[Any]:
    """`await resume(scenario)`: in this process, an agent with the same tools (counting into the
    scenario's effects file) and a clock past the dead worker's lease resumes the scenario's only run."""
    closing: list[Any] = []

    async def resume_only_run(scenario: str) -> tuple[Any, Path, FakeProviderServer]:
        work, server = killed[scenario]

        @tool(idempotent=True)
        def lookup(key: str) -> str:
            with open(work / "effects", "a") as f:
                f.write(f"lookup {key}\n")
            return f"value of {key}"

        @tool
        def charge(amount: int) -> str:
            with open(work / "effects", "a") as f:
                f.write(f"charge {amount}\n")
            return f"charged {amount}"

        store = SQLiteStore(work / "onion.db", clock=lambda: time.time() + 3600)
        model = AnthropicModel("claude-test", base_url=server.url, api_key="test-key")
        closing.extend([model, store])
        agent = Agent(model, tools=[lookup, charge], store=store)
        (record,) = await store.runs()
        assert record.status == "running" and record.owner is not None
        return await agent.recover(record.run_id), work, server

    yield resume_only_run
    for thing in closing:
        await thing.aclose()


def tool_texts(request_body: dict[str, Any]) -> list[str]:
    return [
        block["content"] if isinstance(block["content"], str) else block["content"][0]["text"]
        for message in request_body["messages"]
        if message["role"] == "user" and isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "tool_result"
    ]


async def test_killed_between_a_tools_start_and_finish_the_call_is_reported_interrupted(resume: Any) -> None:
    """SIGKILL inside charge: lookup (finished) is not run again, charge is answered as interrupted, the run ends."""
    result, work, server = await resume("in-tool")
    assert result.output == "done"
    assert effects(work) == ["lookup k", "charge 5"]
    assert len(server.requests) == 2
    sent = tool_texts(server.requests[1].body)
    assert sent[0] == "value of k" and "charge was interrupted" in sent[1] and "may or may not have run" in sent[1]


async def test_killed_inside_an_idempotent_tool_the_call_runs_again(resume: Any) -> None:
    """SIGKILL inside lookup (idempotent): it runs again on resume, then charge runs once."""
    result, work, server = await resume("in-idempotent-tool")
    assert result.output == "done"
    assert sorted(effects(work)) == ["charge 5", "lookup k", "lookup k"]
    assert len(server.requests) == 2
    assert tool_texts(server.requests[1].body) == ["value of k", "charged 5"]


async def test_killed_after_the_tools_finished_before_the_next_model_call_nothing_runs_again(resume: Any) -> None:
    """SIGKILL before the second model request: no tool runs again; the recorded response is not requested."""
    result, work, server = await resume("before-model")
    assert result.output == "done"
    assert effects(work) == ["lookup k", "charge 5"]
    assert len(server.requests) == 2
    assert tool_texts(server.requests[1].body) == ["value of k", "charged 5"]


async def test_killed_during_a_model_call_only_that_call_is_made_again(resume: Any) -> None:
    """SIGKILL while the second model request hangs: resume asks only that one again, no tool runs again."""
    result, work, server = await resume("in-model")
    assert result.output == "done"
    assert effects(work) == ["lookup k", "charge 5"]
    assert len(server.requests) == 3
    assert server.requests[2].body["messages"] == server.requests[1].body["messages"]
