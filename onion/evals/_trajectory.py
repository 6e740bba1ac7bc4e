"""`Case` (one question to evaluate) and `Trajectory` (what an agent did with it: the checks' input)."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from .._messages import Message, Usage
from .._run import RunResult


@dataclass(frozen=True)
class Verdict:
    """A check's answer: `passed`, and `detail` saying why it failed (or anything worth showing)."""

    passed: bool
    detail: str = ""


Outcome = Literal["ok", "error", "blocked", "paused", "unanswered"]

_SLUG = re.compile(r"[^a-z0-9]+")


@dataclass
class Case:
    """One input to run through the agent, with what its run must show.

    `expected` (when not None) adds the check `output_equals(expected)`
    before `checks`. `name` names the case in the report and its cassette
    file (default: made from the input text). `state` starts the run's
    `run.state`; `output_type` overrides the agent's.
    """

    input: str | Message | Sequence[Message]
    expected: Any = None
    checks: Sequence[Check] = ()
    name: str | None = None
    state: dict[str, Any] | None = None
    output_type: Any = None

    def all_checks(self) -> list[Check]:
        from ._checks import output_equals

        return ([output_equals(self.expected)] if self.expected is not None else []) + list(self.checks)


def input_messages(value: str | Message | Sequence[Message]) -> list[Message]:
    if isinstance(value, str):
        return [Message.user(value)]
    if isinstance(value, Message):
        return [value]
    return list(value)


def input_text(value: str | Message | Sequence[Message]) -> str:
    """The case's input as one line of text: its last user message."""
    users = [m.text for m in input_messages(value) if m.role == "user"]
    return users[-1] if users else ""


def slug(text: str) -> str:
    return _SLUG.sub("-", text.lower()).strip("-")[:48].rstrip("-") or "case"


@dataclass
class ToolStep:
    """One tool call the model asked for, and what became of it.

    `outcome`: `"ok"`, `"error"` (an error result), `"blocked"` (a layer
    refused it with `ToolCall.block`; `reason` says why), `"paused"`
    (waiting for approval; `reason`), `"unanswered"` (the run ended first).
    """

    name: str
    args: dict[str, Any]
    id: str
    outcome: Outcome = "unanswered"
    result: str = ""
    reason: str | None = None


@dataclass
class Trajectory:
    """What the agent did with one case: its result (or error), every tool call in order, the usage.

    `steps` lists the tool calls of this run (not those in the case's input
    history). `model` is the agent's model name (for prices).
    """

    case: Case
    result: RunResult[Any] | None
    error: BaseException | None = None
    steps: list[ToolStep] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    model: str = ""

    @property
    def output(self) -> Any:
        """The run's output (None when the run raised)."""
        return None if self.result is None else self.result.output

    @property
    def paused(self) -> bool:
        return self.result is not None and self.result.paused

    def calls(self, name: str | None = None) -> list[ToolStep]:
        """The tool calls asked for, of tool `name` only when given."""
        return [step for step in self.steps if name is None or step.name == name]


Check: TypeAlias = Callable[[Trajectory], bool | Verdict | Awaitable[bool | Verdict]]
"""A function of the trajectory answering `bool` or `Verdict`, or an awaitable of one."""


def trajectory(case: Case, result: RunResult[Any], model: str) -> Trajectory:
    """The trajectory of a finished (or paused) run, read from its history and pending calls."""
    known = {request.id for message in input_messages(case.input) for request in message.tool_calls}
    steps: dict[str, ToolStep] = {}
    answered = result.to_state().answered if result.paused else []
    for message in [*result.messages, *answered]:
        for request in message.tool_calls:
            if request.id not in known:
                steps[request.id] = ToolStep(request.name, dict(request.args), request.id)
        step = steps.get(message.tool_call_id or "") if message.role == "tool" else None
        if step is not None:
            step.result = message.text
            step.outcome, step.reason = _outcome(step.name, message)
    for pending in result.pending:
        step = steps.get(pending.id)
        if step is not None:
            step.outcome, step.reason = "paused", pending.reason
    return Trajectory(case, result, None, list(steps.values()), result.usage, model)


def _outcome(name: str, message: Message) -> tuple[Outcome, str | None]:
    blocked = f"Tool call {name} was blocked: "
    if message.is_error and message.text.startswith(blocked):
        return "blocked", message.text[len(blocked) :]
    return ("error" if message.is_error else "ok"), None
