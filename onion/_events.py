"""Events yielded by `agent.stream(...)`, and by `Model.stream` before its response."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._calls import ModelResponse, RunResult, ToolResult
    from ._messages import Usage
    from ._state import RunState


@dataclass(slots=True)
class TextDelta:
    """A piece of the assistant's text as it arrives."""

    text: str


@dataclass(slots=True)
class ToolCallStarted:
    """The model asked for a tool call; emitted when its arguments are complete, before the call runs."""

    id: str
    name: str
    args: dict[str, Any] = field(default_factory=dict)
    """The arguments the model sent (empty when they were not valid JSON)."""


@dataclass(slots=True)
class ToolResultEvent:
    """A tool call of the run finished (after every tool layer)."""

    call_id: str
    name: str
    result: ToolResult


@dataclass(slots=True)
class StreamReset:
    """A model call that had started streaming is being tried again (a retry, a fallback).

    Discard the `TextDelta`s and `ToolCallStarted`s received since the last
    `ModelCallFinished`: the new attempt streams its answer from the start.
    """


@dataclass(slots=True)
class ModelCallFinished:
    """A model call finished (after every model layer); `cached` if no model was reached."""

    response: ModelResponse
    usage: Usage
    cached: bool


@dataclass(slots=True)
class RunFinished:
    """The run ended; always the last event (a `RunPaused` when the run paused)."""

    result: RunResult


@dataclass(slots=True)
class RunPaused(RunFinished):
    """The run paused for approval; the last event of its stream.

    `result` is the paused `RunResult` (`result.pending` lists the calls
    waiting); `state` is `result.to_state()`, ready for `state.to_json()`.
    """

    state: RunState


Event = TextDelta | ToolCallStarted | StreamReset | ToolResultEvent | ModelCallFinished | RunFinished | RunPaused
