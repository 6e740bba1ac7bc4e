"""`evaluate`: run many cases through an agent at once (each in its own cassette, or live), check them, report."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

from .._agent import Agent
from ..testing import CassetteMode, cassette
from ._checks import check_name, verdict
from ._report import CaseResult, CheckResult, Report
from ._trajectory import Case, input_text, slug, trajectory

AgentSource = Agent[Any] | Callable[[], Agent[Any]]


async def evaluate(
    agent: AgentSource,
    cases: Sequence[Case],
    *,
    cassettes: str | os.PathLike[str] | None = None,
    mode: CassetteMode = "once",
    tools: bool = False,
    concurrency: int = 8,
    progress: bool | None = None,
    name: str = "eval",
) -> Report:
    """Run every case through `agent`, `concurrency` at a time, and check each; the report keeps the cases' order.

    `agent` is an `Agent`, or a function making one per case (for layers
    whose state must not pass from one case to another, like `cache`).
    With `cassettes` (a folder), each case runs inside
    `cassette(<folder>/<case name>.json, mode=mode, tools=tools)`, its
    checks too (a `judge`'s model call is recorded with the case); without,
    live. A run that raises fails its case with the error; cancellation
    stops the eval. `progress` draws a progress bar on stderr (default: when
    stderr is a terminal).
    """
    if concurrency < 1:
        raise ValueError(f"evaluate(concurrency={concurrency}): at least one case must run at a time")
    names = case_names(cases)
    folder = None if cassettes is None else Path(cassettes)
    bar = Progress(len(cases), sys.stderr, sys.stderr.isatty() if progress is None else progress)
    gate = asyncio.Semaphore(concurrency)

    async def one(case: Case, case_name: str) -> CaseResult:
        async with gate:
            path = None if folder is None else folder / f"{case_name}.json"
            block = contextlib.nullcontext() if path is None else cassette(path, mode=mode, tools=tools)
            try:
                with block:
                    result = await run_case(agent if isinstance(agent, Agent) else agent(), case, case_name)
            except Exception as error:  # the cassette: missing in replay mode, unreadable, or not saved
                result = CaseResult(case_name, input_text(case.input), "", error=failure(error))
            bar.advance(result.passed)
            return result

    try:
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(one(case, case_name)) for case, case_name in zip(cases, names, strict=True)]
    finally:
        bar.close()
    return Report(name, [task.result() for task in tasks])


def evaluate_sync(agent: AgentSource, cases: Sequence[Case], **options: Any) -> Report:
    """`evaluate` for code without an event loop."""
    return asyncio.run(evaluate(agent, cases, **options))


async def run_case(agent: Agent[Any], case: Case, name: str) -> CaseResult:
    """One case: the run, then each check on its trajectory."""
    text = input_text(case.input)
    try:
        result = await agent.run(case.input, state=case.state, output_type=case.output_type)
    except Exception as error:
        return CaseResult(name, text, "", error=failure(error))
    model = str(getattr(agent.model, "name", agent.model))
    path = trajectory(case, result, model)
    checks = []
    for check in case.all_checks():
        answer = await verdict(check, path)
        checks.append(CheckResult(check_name(check), answer.passed, answer.detail))
    output = result.output if isinstance(result.output, str) else repr(result.output)
    if result.paused:
        output = f"(paused: {', '.join(call.name for call in result.pending)})"
    return CaseResult(name, text, output, checks, result.usage)


def failure(error: Exception) -> str:
    """A case's error as its report shows it: `CassetteMismatch: cassette cassettes/x.json ...`, paths under the
    working directory relative to it (the same report on every machine)."""
    return f"{type(error).__name__}: {error}".replace(f"{Path.cwd()}{os.sep}", "")


def case_names(cases: Sequence[Case]) -> list[str]:
    """Each case's name: its own, else one made from its input (numbered when two inputs read alike)."""
    given = [case.name for case in cases if case.name is not None]
    twice = {name for name in given if given.count(name) > 1}
    if twice:
        raise ValueError(f"case names must differ (each names its cassette file): {sorted(twice)} given twice")
    taken, names = set(given), []
    for case in cases:
        if case.name is not None:
            names.append(case.name)
            continue
        base = slug(input_text(case.input))
        made, n = base, 1
        while made in taken:
            n += 1
            made = f"{base}-{n}"
        taken.add(made)
        names.append(made)
    return names


class Progress:
    """A one-line progress bar (`[#####.....] 10/20 cases, 1 failed`) redrawn as cases finish; silent when off."""

    __slots__ = ("done", "enabled", "failed", "stream", "total")

    def __init__(self, total: int, stream: IO[str], enabled: bool) -> None:
        self.total, self.stream, self.enabled = total, stream, enabled
        self.done = self.failed = 0
        self._draw()

    def advance(self, passed: bool) -> None:
        self.done += 1
        self.failed += not passed
        self._draw()

    def close(self) -> None:
        if self.enabled:
            self.stream.write("\n")
            self.stream.flush()

    def _draw(self) -> None:
        if not self.enabled:
            return
        filled = 30 * self.done // max(self.total, 1)
        failed = f", {self.failed} failed" if self.failed else ""
        self.stream.write(f"\r[{'#' * filled}{'.' * (30 - filled)}] {self.done}/{self.total} cases{failed}")
        self.stream.flush()
