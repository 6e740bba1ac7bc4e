"""Checks on a trajectory: which tools were called (with what, in which order), blocked or paused; the output; usage.

A check is any callable taking the `Trajectory` and returning `True` /
`False` or a `Verdict` (sync or async); an `AssertionError` it raises fails
it with its message. The built-ins below say why they failed, and are named
in the report as they were written (`called('get_weather', city='Paris')`).
"""

from __future__ import annotations

import inspect
import re
from typing import Any

import pydantic

from ._trajectory import Check as Check
from ._trajectory import ToolStep, Trajectory
from ._trajectory import Verdict as Verdict


def check_name(check: Check) -> str:
    return str(getattr(check, "name", None) or getattr(check, "__name__", None) or repr(check))


async def verdict(check: Check, trajectory: Trajectory) -> Verdict:
    """What `check` says of `trajectory`; a check that raises fails, its error as the detail."""
    try:
        answer: Any = check(trajectory)
        if inspect.isawaitable(answer):
            answer = await answer
    except AssertionError as error:  # its first line: pytest adds its explanation after
        return Verdict(False, str(error).partition("\n")[0] or "assertion failed")
    except Exception as error:
        return Verdict(False, f"the check raised {type(error).__name__}: {error}")
    if isinstance(answer, Verdict):
        return answer
    if isinstance(answer, bool):
        return Verdict(answer)
    return Verdict(False, f"the check returned {answer!r:.60}, not a bool or a Verdict")


def _arguments(args: dict[str, Any]) -> str:
    return ", ".join(f"{key}={value!r}" for key, value in args.items())


def _steps(steps: list[ToolStep]) -> str:
    return ", ".join(f"{step.name}({_arguments(step.args)})" for step in steps) or "none"


class _Named:
    """A built-in check: `name` is how it was written, which the report shows."""

    name: str

    def __repr__(self) -> str:
        return self.name


class called(_Named):
    """Passes when the model asked for tool `tool` (with these arguments, when given: among its arguments)."""

    def __init__(self, tool: str, /, **args: Any) -> None:
        self.tool, self.args = tool, args
        self.name = f"called({tool!r}{', ' if args else ''}{_arguments(args)})"

    def __call__(self, trajectory: Trajectory) -> Verdict:
        calls = trajectory.calls(self.tool)
        if not calls:
            return Verdict(False, f"{self.tool} was never called (the calls: {_steps(trajectory.steps)})")
        if any(all(step.args.get(k, _MISSING) == v for k, v in self.args.items()) for step in calls):
            return Verdict(True)
        return Verdict(False, f"{self.tool} was called with {', '.join(repr(step.args) for step in calls)}")


_MISSING: Any = object()


class not_called(_Named):
    """Passes when the model never asked for tool `tool` (a call that was blocked still counts as asked)."""

    def __init__(self, tool: str, /) -> None:
        self.tool = tool
        self.name = f"not_called({tool!r})"

    def __call__(self, trajectory: Trajectory) -> Verdict:
        calls = trajectory.calls(self.tool)
        if not calls:
            return Verdict(True)
        return Verdict(False, f"{self.tool} was called {len(calls)} time(s): {_steps(calls)}")


class called_in_order(_Named):
    """Passes when the tools named were called in this order (other calls may come between)."""

    def __init__(self, *tools: str) -> None:
        self.tools = tools
        self.name = f"called_in_order({', '.join(map(repr, tools))})"

    def __call__(self, trajectory: Trajectory) -> Verdict:
        names = iter(step.name for step in trajectory.steps)
        if all(any(name == tool for name in names) for tool in self.tools):
            return Verdict(True)
        return Verdict(False, f"the calls were, in order: {_steps(trajectory.steps)}")


class blocked(_Named):
    """Passes when a call (of tool `tool`, when given) was blocked by a layer (`ToolCall.block`)."""

    def __init__(self, tool: str | None = None, /) -> None:
        self.tool = tool
        self.name = f"blocked({tool!r})" if tool else "blocked()"

    def __call__(self, trajectory: Trajectory) -> Verdict:
        calls = trajectory.calls(self.tool)
        if any(step.outcome == "blocked" for step in calls):
            return Verdict(True)
        outcomes = ", ".join(f"{step.name}: {step.outcome}" for step in calls) or "no such call"
        return Verdict(False, f"nothing was blocked ({outcomes})")


class paused(_Named):
    """Passes when the run paused with a call (of tool `tool`, when given) waiting for approval."""

    def __init__(self, tool: str | None = None, /) -> None:
        self.tool = tool
        self.name = f"paused({tool!r})" if tool else "paused()"

    def __call__(self, trajectory: Trajectory) -> Verdict:
        if trajectory.paused and any(step.outcome == "paused" for step in trajectory.calls(self.tool)):
            return Verdict(True)
        pending = [step for step in trajectory.steps if step.outcome == "paused"]
        state = f"paused on {_steps(pending)}" if pending else "the run did not pause"
        return Verdict(False, state)


class output_equals(_Named):
    """Passes when the run's output equals `expected`."""

    def __init__(self, expected: Any) -> None:
        self.expected = expected
        self.name = f"output_equals({expected!r:.60})"

    def __call__(self, trajectory: Trajectory) -> Verdict:
        output = trajectory.output
        if output == self.expected:
            return Verdict(True)
        return Verdict(False, f"the output was {output!r:.200}")


class output_matches(_Named):
    """Passes when the output (as text) contains a match of the regex `pattern`."""

    def __init__(self, pattern: str | re.Pattern[str]) -> None:
        self.pattern = re.compile(pattern) if isinstance(pattern, str) else pattern
        self.name = f"output_matches({self.pattern.pattern!r})"

    def __call__(self, trajectory: Trajectory) -> Verdict:
        text = str(trajectory.output)
        if self.pattern.search(text):
            return Verdict(True)
        return Verdict(False, f"the output {text!r:.200} has no match")


class output_is(_Named):
    """Passes when the output validates as `output_type` (pydantic; JSON text is parsed first)."""

    def __init__(self, output_type: Any) -> None:
        self.adapter: pydantic.TypeAdapter[Any] = pydantic.TypeAdapter(output_type)
        self.output_type = output_type
        self.name = f"output_is({getattr(output_type, '__name__', repr(output_type))})"

    def __call__(self, trajectory: Trajectory) -> Verdict:
        output = trajectory.output
        try:
            if isinstance(output, str) and self.output_type is not str:
                self.adapter.validate_json(output)
            else:
                self.adapter.validate_python(output)
        except pydantic.ValidationError as error:
            problems = "; ".join(
                f"{'.'.join(map(str, e['loc'])) or 'output'}: {e['msg']}" for e in error.errors(include_url=False)
            )
            return Verdict(False, problems)
        return Verdict(True)


class usage_under(_Named):
    """Passes when the run's usage stays within every bound given (tokens, requests, cost in USD).

    `tokens` bounds input plus output tokens. `cost` is priced on the agent's
    model as `middleware.budget` prices it (`prices` as `budget(prices=...)`).
    """

    def __init__(
        self,
        *,
        tokens: int | None = None,
        input_tokens: int | None = None,
        output_tokens: int | None = None,
        requests: int | None = None,
        cost: float | None = None,
        prices: dict[str, tuple[float, ...]] | None = None,
    ) -> None:
        self.bounds = {
            "tokens": tokens,
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "requests": requests,
            "cost": cost,
        }
        self.prices = prices
        given = {key: value for key, value in self.bounds.items() if value is not None}
        if not given:
            raise TypeError("usage_under needs a bound, e.g. usage_under(tokens=2_000) or usage_under(cost=0.01)")
        self.name = f"usage_under({_arguments(given)})"

    def __call__(self, trajectory: Trajectory) -> Verdict:
        usage = trajectory.usage
        spent: dict[str, float] = {
            "tokens": usage.total_tokens,
            "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens,
            "requests": usage.requests,
        }
        if self.bounds["cost"] is not None:
            from ..prices import PRICES, cost  # priced as the budget layer prices it

            spent["cost"] = cost(trajectory.model, usage, {**PRICES, **(self.prices or {})})
        over = [
            f"{key} {spent[key]:g} > {bound:g}"
            for key, bound in self.bounds.items()
            if bound is not None and spent[key] > bound
        ]
        return Verdict(not over, "; ".join(over))
