"""The Makefile: `make demo` installs onion's dependencies alone, `make test` the rest and says what it runs."""

from __future__ import annotations

import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


def planned(target: str) -> list[str]:
    """The commands `make TARGET` runs from a fresh clone (`-n`: shown, not run; `-B`: as if nothing was built)."""
    command = ["make", "--no-print-directory", "-n", "-B", target]  # run inside `make test` too (make[1]: ...)
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_make_demo_installs_only_onions_dependencies_before_the_demo() -> None:
    """No `.[dev]` (SDKs, Temporal, mkdocs, MCP): pyproject's `dependencies`, quoted, then `python -m onion demo`."""
    plan = planned("demo")
    installs = [line for line in plan if " install " in line]
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert installs and all(f"'{dependency}'" in line for line in installs for dependency in dependencies)
    assert not any("[dev]" in line or "-e ." in line for line in plan)
    assert plan[-1] == ".venv/bin/python -m onion demo"


def test_make_test_installs_the_rest_and_says_what_it_runs_before_lint_type_check_and_pytest() -> None:
    """A line saying what comes precedes the install of `.[dev]`, ruff, mypy and pytest (mypy alone takes a
    minute on a fresh clone)."""
    plan = planned("test")
    for step in ("pip install -q -e '.[dev]'", ".venv/bin/ruff check", ".venv/bin/mypy", ".venv/bin/python -m pytest"):
        at = next(index for index, line in enumerate(plan) if line.startswith(step) or f" {step}" in line)
        assert any(line.startswith('echo "make: ') for line in plan[max(at - 3, 0) : at]), f"nothing said: {step}"
