"""onion's pytest plugin, used as a user would: a throwaway project run by pytest in a subprocess.

It records with `--onion-record` against the fake provider server, then
passes with the server gone; a changed question fails under `--onion-replay`
naming the field.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from forker import Forker

from onion import Message, ModelResponse, Usage
from onion.testing import FakeProviderServer, RecordedRequest, call

PROJECT_TESTS = '''
import os

import pytest

from onion import Agent, tool
from onion.providers import AnthropicModel, OpenAIChatModel


@tool
def get_weather(city: str) -> str:
    """Current weather for a city."""
    return f"18 degrees in {city}"


def model(api):
    url = os.environ["FAKE_URL"]
    if api == "anthropic":
        return AnthropicModel("claude-test", base_url=url, api_key="sk-ant-api03-NOTINANYFILE0123456789")
    return OpenAIChatModel("gpt-test", base_url=url + "/v1", api_key="sk-proj-NOTINANYFILE0123456789")


async def test_paris(onion_cassette):
    """An async test: the cassette is active for the whole test."""
    agent = Agent(model("anthropic"), tools=[get_weather])
    result = await agent.run(QUESTION)
    assert result.output == "18 degrees in Paris"
    assert result.usage.input_tokens == 30


def test_sync_run(onion_cassette):
    """A plain test calling run_sync."""
    assert Agent(model("openai")).run_sync("hello?").output == "hello back"


@pytest.mark.parametrize("n", [1, 2])
def test_numbers(onion_cassette, n):
    assert Agent(model("openai")).run_sync(f"number {n}?").output == f"n={n}"


@pytest.mark.onion_cassette("shared/custom.json")
def test_named_file(onion_cassette):
    assert onion_cassette.path.name == "custom.json"
    assert Agent(model("openai")).run_sync("custom?").output == "custom answer"
'''

ANSWERS = {
    "weather in Paris?": ModelResponse(Message.assistant("", [call("get_weather", city="Paris")]), Usage(12, 4, 1)),
    "hello?": "hello back",
    "number 1?": "n=1",
    "number 2?": "n=2",
    "custom?": "custom answer",
}


def respond(request: RecordedRequest) -> Any:
    """Answer by the conversation: the question, or (after the tool ran) the final text."""
    messages = request.body["messages"]
    last = messages[-1]
    if last["role"] == "user" and isinstance(last["content"], list) and last["content"][0]["type"] == "tool_result":
        return ModelResponse(Message.assistant("18 degrees in Paris"), Usage(18, 6, 1))
    first = messages[0]["content"]
    question = first if isinstance(first, str) else first[0]["text"]
    return ANSWERS[question]


def run_pytest(forker: Forker, project: Path, url: str, *options: str) -> subprocess.CompletedProcess[str]:
    """`python -m pytest -q OPTIONS` in `project`, forked from the session's fork server (see tests/forker.py)."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "ANTHROPIC_", "OPENAI_"))}
    command = ["-m", "pytest", "-q", "-p", "no:cacheprovider", *options]
    return forker.run(*command, cwd=project, env={**environment, "FAKE_URL": url}, timeout=300)


def make_project(root: Path, question: str) -> Path:
    (root / "tests").mkdir(parents=True)
    (root / "pyproject.toml").write_text('[tool.pytest.ini_options]\nasyncio_mode = "auto"\n')
    (root / "tests" / "test_weather.py").write_text(f"QUESTION = {question!r}\n" + PROJECT_TESTS)
    return root


def test_a_project_records_with_onion_record_then_passes_with_the_server_gone(tmp_path: Path, forker: Forker) -> None:
    """`pytest --onion-record` records each test's cassette under tests/cassettes/; later runs need no server."""
    project = make_project(tmp_path / "project", "weather in Paris?")
    with FakeProviderServer(respond=respond) as server:
        url = server.url
        recorded = run_pytest(forker, project, url, "--onion-record")
        assert recorded.returncode == 0, recorded.stdout + recorded.stderr
        seen = len(server.requests)
    assert seen == 6
    folder = project / "tests" / "cassettes"
    names = sorted(str(p.relative_to(folder)) for p in folder.rglob("*.json"))
    assert names == [
        "shared/custom.json",
        "test_weather/test_numbers[1].json",
        "test_weather/test_numbers[2].json",
        "test_weather/test_paris.json",
        "test_weather/test_sync_run.json",
    ]
    paris = json.loads((folder / "test_weather" / "test_paris.json").read_text())
    assert len(paris["model_calls"]) == 2
    assert not any(b"NOTINANYFILE" in p.read_bytes() for p in folder.rglob("*.json"))

    replayed = run_pytest(forker, project, url)
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert "5 passed" in replayed.stdout


def test_a_changed_question_fails_under_onion_replay_naming_the_field(tmp_path: Path, forker: Forker) -> None:
    """The failing test's report carries the CassetteMismatch: field, recorded and new values."""
    project = make_project(tmp_path / "project", "weather in Paris?")
    with FakeProviderServer(respond=respond) as server:
        url = server.url
        assert run_pytest(forker, project, url, "--onion-record", "-k", "paris").returncode == 0
    test_file = project / "tests" / "test_weather.py"
    test_file.write_text(test_file.read_text().replace("weather in Paris?", "weather in Rome?", 1))
    failed = run_pytest(forker, project, url, "--onion-replay", "-k", "paris")
    assert failed.returncode == 1
    assert "CassetteMismatch" in failed.stdout and "messages[0].text" in failed.stdout
    assert "weather in Rome?" in failed.stdout
    missing = run_pytest(forker, project, url, "--onion-replay", "-k", "sync_run")
    assert missing.returncode == 1 and "does not exist" in missing.stdout
