"""examples/structured.py: a typed answer offline, a failed answer fed back, and a user module under mypy --strict."""

from __future__ import annotations

import os
import runpy
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "structured.py"


async def test_structured_example_returns_typed_cities_and_feeds_back_a_wrong_answer() -> None:
    lines = await runpy.run_path(str(EXAMPLE), run_name="example_structured")["main"]()
    assert lines == [
        "Paris, France: 2,102,650 people",
        "fed back after the first answer: - population: Input should be a valid integer, "
        "unable to parse string as an integer",
        "two largest: Paris, Lyon",
        "OutputValidationError: json_invalid in 'Paris, I think.'",
    ]


USER_MODULE = """
from __future__ import annotations

from pydantic import BaseModel

from onion import Agent, RunResult
from onion.testing import ScriptedModel


class City(BaseModel):
    name: str
    population: int


class Country(BaseModel):
    name: str


async def typed() -> int:
    agent = Agent(ScriptedModel([]), output_type=City)
    result = await agent.run("largest city in France?")
    return result.output.population


async def per_run() -> list[str]:
    result = await Agent(ScriptedModel([])).run("cities?", output_type=list[City])
    return [city.name for city in result.output]


def sync() -> int:
    return Agent(ScriptedModel([])).run_sync("q", output_type=City).output.population


async def text() -> str:
    plain: RunResult = await Agent(ScriptedModel([])).run("hi")
    return plain.output.upper()
"""


def test_a_user_module_reading_result_output_population_passes_mypy_strict(tmp_path: Path) -> None:
    """`result.output` is typed as the output type (`RunResult[City]`), and as `str` without one."""
    (tmp_path / "user_output.py").write_text(USER_MODULE)
    shutil.copy(EXAMPLE, tmp_path / "user_structured.py")
    wrong = tmp_path / "user_wrong.py"
    wrong.write_text(
        USER_MODULE
        + "\n\nasync def wrong() -> str:\n"
        + "    return (await Agent(ScriptedModel([]), output_type=City).run('q')).output\n"
    )
    env = {**os.environ, "MYPYPATH": str(ROOT)}  # this checkout's onion, not another editable install
    command = [sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(tmp_path / ".mypy")]
    done = subprocess.run(
        [*command, "user_output.py", "user_structured.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    refused = subprocess.run(
        [*command, "user_wrong.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env
    )
    assert 'Incompatible return value type (got "City", expected "str")' in refused.stdout
