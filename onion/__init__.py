"""onion: LLM agents built as an onion of middleware.

Every run, model call, tool batch and tool call flows through an ordered
stack of `async def middleware(ctx, call_next)` layers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import errors
from ._agent import Agent
from ._calls import ModelCall, ToolBatch, ToolCall
from ._content import Document, Image, Part
from ._durable.decisions import Decisions
from ._durable.state import PendingCall, RunState
from ._events import (
    Event,
    ModelCallFinished,
    PartialOutput,
    RunFinished,
    RunPaused,
    StreamReset,
    TextDelta,
    ToolCallStarted,
    ToolResultEvent,
)
from ._exports import export
from ._handlers import Handler, ModelNext, RunNext, ToolNext, ToolsNext
from ._history import check_history
from ._layers import Layer
from ._messages import Message, Role, ToolRequest, Usage
from ._model import Model, resolve_model
from ._output import OutputSchema, output_schema
from ._principal import DecisionRecord, Principal
from ._results import ModelResponse, ToolResult
from ._run import Call, Run, RunResult
from ._stack import Stack
from ._stream_edits import StreamEdit
from ._streaming import EventStream
from ._threads import ToolThreads
from ._tools import Tool, tool
from ._untrusted import UntrustedSource, untrusted_sources
from .errors import (
    MaxStepsExceeded,
    MessageOrderError,
    MiddlewareError,
    ModelError,
    OnionError,
    OutputValidationError,
    RunStateError,
)

__all__ = [
    "Agent",
    "Call",
    "DecisionRecord",
    "Decisions",
    "Document",
    "Event",
    "EventStream",
    "Handler",
    "Image",
    "Layer",
    "MaxStepsExceeded",
    "Message",
    "MessageOrderError",
    "MiddlewareError",
    "Model",
    "ModelCall",
    "ModelCallFinished",
    "ModelError",
    "ModelNext",
    "ModelResponse",
    "OnionError",
    "OutputSchema",
    "OutputValidationError",
    "Part",
    "PartialOutput",
    "PendingCall",
    "Principal",
    "Role",
    "Run",
    "RunFinished",
    "RunNext",
    "RunPaused",
    "RunResult",
    "RunState",
    "RunStateError",
    "Stack",
    "StreamEdit",
    "StreamReset",
    "TextDelta",
    "Tool",
    "ToolBatch",
    "ToolCall",
    "ToolCallStarted",
    "ToolNext",
    "ToolRequest",
    "ToolResult",
    "ToolResultEvent",
    "ToolThreads",
    "ToolsNext",
    "UntrustedSource",
    "Usage",
    "check_history",
    "errors",
    "output_schema",
    "resolve_model",
    "tool",
    "tracing",
    "untrusted_sources",
]

if TYPE_CHECKING:
    from . import tracing


def __getattr__(name: str) -> Any:
    """`onion.tracing` (and the subpackages) load when first used: `import onion` stays light."""
    if name in _LAZY:
        import importlib

        return importlib.import_module(f"onion.{name}")
    raise AttributeError(f"module 'onion' has no attribute {name!r}")


_LAZY = frozenset(
    ("audit", "evals", "mcp", "prices", "providers", "scrub", "stores", "temporal", "testing", "tracing", "types")
)

export(globals())
