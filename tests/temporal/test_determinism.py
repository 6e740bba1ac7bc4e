"""Which layers may run in workflow code: a layer says so itself (`nondeterministic = "why"`), not its class name,
and one whose own code reads the process's clock or draws random numbers or ids is refused naming what it read;
onion's own workflow code reads neither.

No Temporal server: `refuse_nondeterministic` is what the workflow's first model call runs.
"""

from __future__ import annotations

import ast
import datetime
import inspect
import random
import time
import uuid
from pathlib import Path
from typing import Any

import audit_flows
import pytest

import middleware
from middleware import cache, rate_limit, retry
from onion import Agent, ModelCall, ModelNext, ModelResponse, ToolCall, ToolNext, ToolResult, clock
from onion.temporal import NotDeterministic
from onion.temporal._determinism import refuse_nondeterministic
from onion.testing import FunctionModel


def agent_with(*layers: Any) -> Agent[str]:
    return Agent(FunctionModel(lambda call: "hi"), name="support").use(*layers)


class house_rate_limit(rate_limit):
    """A team's own rate limit, built on the built-in one."""


class wall_clock:
    """A layer of the user's that reads the time itself."""

    nondeterministic = "it stamps each request with the wall clock"

    async def wrap_model(self, ctx: ModelCall, call_next: Any) -> Any:
        return await call_next(ctx)


async def sampled(ctx: ModelCall, call_next: Any) -> Any:
    return await call_next(ctx)


sampled.nondeterministic = "it samples with random.random()"  # type: ignore[attr-defined]


@pytest.mark.parametrize("layer", [wall_clock(), sampled, house_rate_limit(rpm=60)])
def test_a_layer_that_declares_itself_nondeterministic_is_refused_naming_it_and_why(layer: Any) -> None:
    """A user's class or function, or a subclass of a built-in under its own name: what it declares decides."""
    why = layer.nondeterministic
    with pytest.raises(NotDeterministic, match=r"agent support: layer .* cannot run inside a Temporal workflow"):
        refuse_nondeterministic(agent_with(layer))
    with pytest.raises(NotDeterministic) as refused:
        refuse_nondeterministic(agent_with(layer))
    assert why in str(refused.value)


def test_the_built_in_families_refused_on_temporal_are_those_that_declare_it() -> None:
    """Every built-in layer class declaring `nondeterministic` is refused; the audited same-result ones are not."""
    declaring = {
        name
        for name, value in vars(middleware).items()
        if inspect.isclass(value) and isinstance(getattr(value, "nondeterministic", None), str)
    }
    assert declaring == set(audit_flows.REFUSED) == {"rate_limit", "cache", "concurrency"}
    for agent in audit_flows.REFUSED.values():
        with pytest.raises(NotDeterministic):
            refuse_nondeterministic(agent)
    for agent in audit_flows.SAME.values():
        refuse_nondeterministic(agent)


def test_a_layer_named_like_a_built_in_but_declaring_nothing_runs() -> None:
    """A user's own class called `cache` that keeps nothing across runs is not refused for its name."""

    class cache_of_mine:
        async def wrap_model(self, ctx: ModelCall, call_next: Any) -> Any:
            return await call_next(ctx)

    cache_of_mine.__name__ = cache.__name__
    refuse_nondeterministic(agent_with(cache_of_mine()))


class stamps_requests:
    """Stamps each request with the wall clock itself."""

    async def wrap_model(self, ctx: ModelCall, call_next: ModelNext) -> ModelResponse:
        ctx.settings["stamp"] = time.time()
        return await call_next(ctx)


async def rolls_dice(ctx: ToolCall, call_next: ToolNext) -> ToolResult:
    ctx.run.state["roll"] = random.random()
    return await call_next(ctx)


def _fresh_key() -> str:
    return uuid.uuid4().hex


class keys_each_call:
    """Keys each tool call through a function of its module that draws an id."""

    async def wrap_tool(self, ctx: ToolCall, call_next: ToolNext) -> ToolResult:
        ctx.run.state["key"] = _fresh_key()
        return await call_next(ctx)


class dates_each_call:
    async def wrap_tool(self, ctx: ToolCall, call_next: ToolNext) -> ToolResult:
        ctx.run.state["day"] = [str(datetime.datetime.now()) for _ in range(1)]
        return await call_next(ctx)


@pytest.mark.parametrize(
    ("layer", "read"),
    [
        (stamps_requests(), "time.time"),
        (rolls_dice, "random.random"),
        (keys_each_call(), "uuid.uuid4"),
        (dates_each_call(), "datetime.datetime.now"),
        (retry(clock=time.monotonic), "time.monotonic"),
    ],
)
def test_a_layer_that_reads_the_clock_or_draws_at_random_itself_is_refused_naming_it_and_what(
    layer: Any, read: str
) -> None:
    """A layer's own methods, a function of its module they call, a comprehension inside, or a setting it was
    given (a real clock): refused before the run's first model call leaves the workflow."""
    with pytest.raises(NotDeterministic, match=r"agent support: layer .* cannot run inside a Temporal workflow") as no:
        refuse_nondeterministic(agent_with(layer))
    assert f"it reads {read}" in str(no.value) and "onion.clock" in str(no.value)


def test_a_layer_that_reads_onion_clock_runs() -> None:
    """`onion.clock` is the workflow's inside a workflow: a layer reading it is not refused."""

    class stamps_with_onion_clock:
        async def wrap_model(self, ctx: ModelCall, call_next: ModelNext) -> ModelResponse:
            ctx.settings["stamp"] = (clock.time(), clock.uuid4().hex, clock.random())
            return await call_next(ctx)

    refuse_nondeterministic(agent_with(stamps_with_onion_clock(), retry(jitter=0.5)))


ROOT = Path(__file__).resolve().parents[2]

FORBIDDEN = {
    "time": {"time", "time_ns", "monotonic", "monotonic_ns", "perf_counter", "perf_counter_ns", "sleep"},
    "random": None,
    "secrets": None,
    "uuid": {"uuid1", "uuid4", "uuid7"},
    "os": {"urandom", "getrandom"},
    "datetime": {"now", "utcnow", "today"},
}
"""What onion's workflow code must not read (None: anything of the module): onion.clock's are the workflow's."""

OUTSIDE_WORKFLOWS = {
    "onion.providers": "models are asked in the model activity",
    "onion.stores": "a run in a workflow keeps no store (Temporal's history is its journal)",
    "onion._durable.journal": "journals a run in a store",
    "onion._durable.runs": "runs journaled in a store",
    "onion.serve": "an HTTP server",
    "onion.mcp": "MCP servers' tools have no activity",
    "onion.testing": "test doubles; the fake provider server",
    "onion.evals": "evaluations run agents outside workflows",
    "onion._runs_cli": "the CLI",
    "onion._runs_actions": "the CLI",
    "onion.temporal._activities": "activities run in the worker's ordinary Python",
    "onion.tracing": "observes and never decides (its spans time themselves; exported once, not on replay)",
    "middleware.cache": "declares nondeterministic",
    "middleware.rate_limit": "declares nondeterministic",
    "middleware.concurrency": "declares nondeterministic",
    "middleware._shared_slots": "concurrency's slots, which declares nondeterministic",
}
"""Modules that never run in workflow code, and why."""

ALLOWED = {
    ("onion._run", "", "os.urandom"): "the process's run-id prefix; inside an engine a run's id is onion.clock's",
    ("onion._run", "_forked", "os.urandom"): "the same, after a fork",
    ("onion._durable.trust", "_check_fresh", "time.time"): "state_ttl, which a workflow's resume is exempt from",
    ("onion._durable.trust", "take", "time.time"): "consumed-once, which a workflow's resume is exempt from",
    ("middleware.budget", "__init__", "time.time"): "the clock of a shared allowance, which declares nondeterministic",
    ("middleware._vault", "_scope_of", "uuid.uuid4"): "names a store object onion cannot read the server of",
}
"""(module, function, what) read in workflow code on purpose, and why it cannot decide differently on replay."""


def _reads(path: Path) -> list[tuple[str, str, int]]:
    """`(function, what, line)` for each forbidden read in `path`."""
    found = []

    def visit(node: ast.AST, function: str) -> None:
        for child in ast.iter_child_nodes(node):
            inner = child.name if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef) else function
            if isinstance(child, ast.Attribute):
                root: ast.AST = child
                while isinstance(root, ast.Attribute):
                    root = root.value
                if isinstance(root, ast.Name) and root.id in FORBIDDEN:
                    names = FORBIDDEN[root.id]
                    if names is None or child.attr in names:
                        found.append((function, f"{root.id}.{child.attr}", child.lineno))
            elif isinstance(child, ast.ImportFrom) and child.module in FORBIDDEN and not child.level:
                names = FORBIDDEN[child.module]
                found.extend(
                    (function, f"{child.module}.{a.name}", child.lineno)
                    for a in child.names
                    if names is None or a.name in names
                )
            visit(child, inner)

    visit(ast.parse(path.read_text()), "")
    return found


def test_onions_workflow_code_reads_no_clock_and_draws_nothing_but_through_onion_clock() -> None:
    """onion and middleware are passed through Temporal's sandbox, which so checks none of their code: this
    reads all of it instead. Outside the modules that never run in workflow code, nothing reads `time`,
    `random`, `uuid4`, `datetime.now`, `os.urandom` or `secrets` but the reads allowed here, each with why."""
    found = []
    for package in ("onion", "middleware"):
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            if module == "onion.clock" or any(module.startswith(out) for out in OUTSIDE_WORKFLOWS):
                continue
            found += [
                f"{module}:{line} {function or '<module>'}: {what}"
                for function, what, line in _reads(path)
                if (module, function, what) not in ALLOWED
            ]
    assert found == []
