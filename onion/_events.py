"""Events yielded by `agent.stream(...)`, and by `Model.stream` before its response."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic

from typing_extensions import TypeVar

if TYPE_CHECKING:
    from ._durable.state import RunState
    from ._messages import Usage
    from ._results import ModelResponse, ToolResult
    from ._run import RunResult

T = TypeVar("T", default=Any)
"""The run's output type: `agent.stream(..., output_type=City)` yields `Event[City]`; a bare `Event` is `Event[Any]`."""


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
class PartialOutput(Generic[T]):
    """The answer so far, validated partially as the run's `output_type` while its JSON streams in.

    Sent after a `TextDelta` that changes it, for an `output_type` other than `str`. It holds what arrived whole,
    the last string and list as far as they came, never a number still arriving (`docs/output.md`).
    """

    output: T


@dataclass(slots=True)
class StreamReset:
    """The text streamed so far for this model call is not the answer: discard it.

    Sent when a call that started streaming is tried again or its answer replaced: discard the `TextDelta`s
    since the last `ModelCallFinished`; the answer follows (`docs/middleware.md`, "Streaming and deltas").
    """


@dataclass(slots=True)
class ModelCallFinished:
    """A model call finished (after every model layer); `cached` if no model was reached."""

    response: ModelResponse
    usage: Usage
    cached: bool


@dataclass(slots=True)
class RunFinished(Generic[T]):
    """The run ended; always the last event (a `RunPaused` when the run paused)."""

    result: RunResult[T]


@dataclass(slots=True)
class RunPaused(RunFinished[T]):
    """The run paused for approval; the last event of its stream.

    `result` is the paused `RunResult` (`result.pending` lists the calls
    waiting); `state` is `result.to_state()`, ready for `state.to_json()`.
    """

    state: RunState


Event = (
    TextDelta
    | PartialOutput[T]
    | ToolCallStarted
    | StreamReset
    | ToolResultEvent
    | ModelCallFinished
    | RunFinished[T]
    | RunPaused[T]
)
"""One event of `agent.stream`: `Event[City]` in a run typed `City` (a bare `Event` is `Event[Any]`)."""
