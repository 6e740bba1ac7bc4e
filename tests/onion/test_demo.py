"""`python -m onion demo` runs offline and shows what the layers did."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from forker import Forker

from onion import check_history
from onion._demo import main
from onion.testing import FakeProviderServer, ServerItem, call


async def test_demo_runs_twice_and_the_second_run_is_served_from_the_cache() -> None:
    lines: list[str] = []
    first, second = await main(out=lines.append)
    assert first.usage.requests == 3 and first.usage.input_tokens == 590
    assert second.usage.requests == 0 and second.usage.total_tokens == 0
    assert second.output == first.output == "Paris is warmer: 64.4°F against 39.2°F in Oslo."
    text = "\n".join(lines)
    assert "served from the cache" in text
    assert "retried 1x after RateLimitedError, waited 0.05 s" in text
    assert "delete_files was blocked" in text and "before_each_tool(no_deletes)" in text
    assert "│  └─ cache" in text and "  hit" in text
    for result in (first, second):
        check_history(result.messages)


def test_python_m_onion_demo_prints_a_run_and_writes_the_trace_page_with_html(tmp_path: Path, forker: Forker) -> None:
    """`python -m onion demo --html trace.html` prints both runs' trees and writes one page with both runs."""
    page = tmp_path / "trace.html"
    done = forker.run("-m", "onion", "demo", "--html", str(page), timeout=60)
    assert done.returncode == 0, done.stderr
    assert "== run 2" in done.stdout and "model:  log -> rate_limit -> cache -> retry" in done.stdout
    assert f"the trace page: {page}" in done.stdout
    assert page.read_text().count('<section class="run">') == 2


def demo(forker: Forker, *arguments: str, **env: str) -> subprocess.CompletedProcess[str]:
    """`python -m onion demo ...` in a fresh process, with no provider key or URL but those in `env`."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_"))}
    return forker.run("-m", "onion", "demo", *arguments, timeout=120, env={**clean, **env})


def test_demo_on_a_real_model_says_so_and_labels_only_the_log_layers_records_as_log(forker: Forker) -> None:
    """`--model` through the anthropic SDK: not "offline", and the SDK's HTTP lines are not shown as `log:` lines."""
    script: list[ServerItem] = [
        [call("get_weather", city="Paris"), call("get_weather", city="Oslo")],
        [call("to_fahrenheit", celsius=18), call("to_fahrenheit", celsius=4)],
        "Paris is warmer.",
    ]
    with FakeProviderServer(script) as server:
        done = demo(
            forker, "--model", "anthropic:claude-x", ANTHROPIC_BASE_URL=server.url, ANTHROPIC_API_KEY="test-key"
        )
    assert done.returncode == 0, done.stderr
    assert "offline" not in done.stdout
    assert "on claude-x (anthropic:claude-x), live: real requests" in done.stdout
    log_lines = [line.strip() for line in done.stdout.splitlines() if line.strip().startswith("log:")]
    assert log_lines and all(line.split()[1] in ("run", "model", "tools", "tool") for line in log_lines), log_lines
    assert "HTTP Request" not in done.stdout + done.stderr
    assert "run 2 was served from the cache" in done.stdout and len(server.requests) == 3


def test_demo_on_a_model_that_never_answers_ends_in_one_line_and_a_non_zero_exit(forker: Forker) -> None:
    """A model that calls tools for ever: the run stops at the demo's max_steps, said in one line, no traceback."""
    with FakeProviderServer(respond=lambda request: [call("get_weather", city="Paris")]) as server:
        done = demo(
            forker, "--model", "anthropic:claude-x", ANTHROPIC_BASE_URL=server.url, ANTHROPIC_API_KEY="test-key"
        )
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        "python -m onion demo: weather made 10 model calls without a final answer (max_steps=10)"
    ]


@pytest.mark.parametrize(
    ("arguments", "says"),
    [
        (["--model", "X"], "unknown model string 'X'; use one of"),
        (["--model", "anthropic:claude-x"], "no Anthropic credentials: set ANTHROPIC_API_KEY"),
        (["--html", "/nonexistent/folder/trace.html"], "cannot write the trace page to /nonexistent/folder/trace.html"),
    ],
    ids=["unknown model", "no API key", "html path that cannot be written"],
)
def test_every_demo_error_is_one_clear_line_and_a_non_zero_exit(
    arguments: list[str], says: str, forker: Forker
) -> None:
    """What the user must fix, on one line of stderr (no traceback), and exit status 1."""
    done = demo(forker, *arguments)
    assert done.returncode == 1
    (line,) = done.stderr.splitlines()
    assert line.startswith("python -m onion demo: ") and says in line, line


BLOCK_ALL_BUT = """
import importlib.abc, importlib.machinery, runpy, sys, sysconfig

allowed = set(sys.argv[1].split(","))
site = tuple(sysconfig.get_paths()[key] for key in ("purelib", "platlib"))

class OnlyDependencies(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if "." in name or name in allowed or name in sys.stdlib_module_names:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is not None and (spec.origin or "").startswith(site):
            raise ModuleNotFoundError(f"No module named {name!r} (installed, but not a dependency of onion)", name=name)
        return None

sys.meta_path.insert(0, OnlyDependencies())
sys.argv = ["python -m onion", *sys.argv[2:]]
runpy.run_module("onion", run_name="__main__", alter_sys=True)
"""
"""`python -m onion ARGS` in an interpreter that can import only the modules named (and the standard library):
what a virtualenv holding onion's dependencies alone has."""


def dependencies_modules() -> list[str]:
    """The top-level modules of onion's dependencies (pyproject's `dependencies`, and theirs), extras left out."""
    import importlib.metadata
    import re
    import tomllib

    def name_of(requirement: str) -> str:
        return re.split(r"[\s<>=!~;\[(]", requirement, maxsplit=1)[0].lower().replace("_", "-")

    project = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())["project"]
    wanted, seen = [name_of(r) for r in project["dependencies"]], set()
    while wanted:
        name = wanted.pop()
        if name not in seen:
            seen.add(name)
            requires = importlib.metadata.requires(name) or []
            wanted += [name_of(r) for r in requires if "extra ==" not in r]
    modules = importlib.metadata.packages_distributions()
    return sorted(m for m, dists in modules.items() if any(d.lower().replace("_", "-") in seen for d in dists))


def test_the_demo_and_the_cli_need_only_onions_own_dependencies() -> None:
    """`make demo` installs pydantic and tenacity alone: `python -m onion demo` (and `-h`) runs with nothing else
    importable, no SDK, no Starlette; `serve` says which extra it needs."""
    import sys

    allowed = dependencies_modules()
    assert {"pydantic", "tenacity"} <= set(allowed) and "starlette" not in allowed

    def onion(*arguments: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-c", BLOCK_ALL_BUT, ",".join(allowed), *arguments]
        return subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=Path(__file__).parents[2])

    done = onion("demo")
    assert done.returncode == 0, done.stderr
    assert "run 2 was served from the cache" in done.stdout
    assert onion("-h").returncode == 0
    refused = onion("serve", "myapp:agent")
    assert refused.returncode == 1
    assert refused.stderr.strip().startswith("python -m onion serve needs the serve extra: pip install 'onion[serve]'")
