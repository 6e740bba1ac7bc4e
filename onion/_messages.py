"""Messages, tool requests and token usage: the conversation's plain data."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Role = Literal["system", "user", "assistant", "tool"]


@dataclass(slots=True)
class ToolRequest:
    """One tool call asked for by the model."""

    id: str
    name: str
    args: dict[str, Any] = field(default_factory=dict)
    raw_args: str | None = None
    """The arguments as the provider sent them, when they were not valid JSON."""


@dataclass(slots=True)
class Message:
    """One message of a conversation.

    Build them with `Message.user(...)`, `Message.assistant(...)`,
    `Message.system(...)` and `Message.tool(...)`.
    """

    role: Role
    text: str = ""
    tool_calls: list[ToolRequest] = field(default_factory=list)
    tool_call_id: str | None = None
    is_error: bool = False
    meta: dict[str, Any] | None = None
    """Provider-specific extras that must survive a round trip (e.g. thinking blocks)."""

    @classmethod
    def user(cls, text: str) -> Message:
        return cls("user", text)

    @classmethod
    def system(cls, text: str) -> Message:
        return cls("system", text)

    @classmethod
    def assistant(cls, text: str = "", tool_calls: list[ToolRequest] | None = None) -> Message:
        return cls("assistant", text, tool_calls if tool_calls is not None else [])

    @classmethod
    def tool(cls, call_id: str, text: str, is_error: bool = False) -> Message:
        return cls("tool", text, [], call_id, is_error)


@dataclass(slots=True)
class Usage:
    """Tokens and requests consumed. Adds up with `+`.

    `input_tokens` counts every input token, cached ones included;
    `cached_input_tokens` says how many of them were read from the
    provider's prompt cache.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    requests: int = 0
    cached_input_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.requests + other.requests,
            self.cached_input_tokens + other.cached_input_tokens,
        )

    def add(self, other: Usage) -> None:
        """Add `other` into this usage in place."""
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.requests += other.requests
        self.cached_input_tokens += other.cached_input_tokens
