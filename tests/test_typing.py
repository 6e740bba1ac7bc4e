"""What users type-check under mypy --strict: the examples, the docs' typed snippets, the test doubles' scripts."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from mypy import api

ROOT = Path(__file__).parents[1]

SERVER_SCRIPT = '''
from pydantic import BaseModel
from onion.testing import FakeProviderServer, HTTPError, call

class City(BaseModel):
    name: str

with FakeProviderServer([City(name="Paris"), [City(name="Oslo")], [call("add", a=1)], HTTPError(429)]) as server:
    server.script([City(name="Rome"), "done"])
'''
"""A fake server scripted with what its docs allow: pydantic objects (and lists of them) among the rest."""


TYPED_STREAM = """
from typing import Any, assert_type

from pydantic import BaseModel

from onion import Agent, EventStream, PartialOutput, RunFinished, RunPaused, RunState
from onion.stores import SQLiteStore


class City(BaseModel):
    name: str


async def main(state: RunState) -> None:
    store = SQLiteStore("onion.db")
    agent = Agent("anthropic:claude-sonnet-5-5", output_type=City, store=store)
    events = agent.stream("Largest city in France?")
    async for event in events:
        if isinstance(event, PartialOutput):
            assert_type(event.output, City)
        elif isinstance(event, RunPaused):
            assert_type(event.state, RunState)
        elif isinstance(event, RunFinished):
            assert_type(event.result.output, City)
    await events.aclose()
    async with agent.stream("How many live there?", output_type=int) as numbers:
        async for number in numbers:
            if isinstance(number, RunFinished):
                assert_type(number.result.output, int)
    async for told in Agent("openai:gpt-5.5").stream("hi"):
        if isinstance(told, RunFinished):
            assert_type(told.result.output, str)
    resumed: EventStream[City] = agent.resume_stream(state)
    await resumed.aclose()
    paused = await store.load("run-1")
    assert_type(paused, RunState)
    any_stream: EventStream[Any] = agent.resume_stream("run-1", output_type=City | int)
    await any_stream.aclose()
"""
"""A typed stream as the docs show it: its events carry the output type; the stream has `aclose()` and `async
with`; the store kept in a variable is a `Store`, so `store.load(...)` type-checks."""


def own_retry_snippet() -> str:
    """The docs' own-retry layer (middleware-library.md), as a module: the layer without the line using it."""
    page = (ROOT / "docs" / "middleware-library.md").read_text()
    section = page.split("### Your own retry layer", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code is not None
    return code[1].replace("# fragment\n", "").replace("agent.use(my_retry)\n", "")


def strict(tmp_path: Path, name: str, code: str) -> str:
    """mypy --strict's report on `code`, run from the repository (its cache and config)."""
    program = tmp_path / f"{name}.py"
    program.write_text(code)
    report, errors, status = api.run(["--strict", "--no-error-summary", str(program)])
    return report + errors if status else ""


def test_a_fake_server_script_of_pydantic_objects_type_checks(tmp_path: Path) -> None:
    """`FakeProviderServer([City(...)])` and `server.script([...])` pass mypy --strict, as the docs allow them."""
    assert strict(tmp_path, "server_script", SERVER_SCRIPT) == ""


def test_a_typed_stream_carries_its_output_type_and_can_be_closed(tmp_path: Path) -> None:
    """Under mypy --strict, `RunFinished.result.output` of `agent.stream(...)` is the run's output type, not `str`;
    `PartialOutput.output` too; the stream has `aclose()` and is an async context manager."""
    assert strict(tmp_path, "typed_stream", TYPED_STREAM) == ""


def test_the_docs_own_retry_layer_type_checks(tmp_path: Path) -> None:
    """The hand-written tenacity retry layer of the docs has no "Missing return statement" under mypy --strict."""
    assert strict(tmp_path, "own_retry", own_retry_snippet()) == ""


def test_make_test_type_checks_every_example() -> None:
    """`mypy` (run by `make lint`, so `make test`) checks examples/ with onion and middleware, strictly."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    assert config["strict"] is True
    assert {"onion", "middleware", "examples"} <= set(config["files"])
    assert "$(BIN)/mypy\n" in (ROOT / "Makefile").read_text()
