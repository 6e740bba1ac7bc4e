"""Messages, tool requests and token usage: the conversation's plain data."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Literal

from ._content import MEDIA, Part, as_parts, joined_text, part_dict, part_from, valid_text_parts

Role = Literal["system", "user", "assistant", "tool"]
ROLES = ("system", "user", "assistant", "tool")


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
    content: list[Part] | None = None
    """The parts (text, `Image`, `Document`) of a message that holds more than text; None for text only.

    `text` is then its text parts joined with a line break. Build such a
    message with `Message.user(text, image)` or `Message.tool(call_id, parts)`.
    """
    untrusted: bool = False
    """True for outside content: the result of a tool marked `@tool(untrusted=True)` (an MCP tool's, unless its
    server says `untrusted=False`), or a message an application marks so. Never sent to a model; kept through a
    pause, the journal, a cassette and Temporal (`docs/security.md`, "Prompt injection")."""

    @property
    def parts(self) -> list[Part]:
        """The message's content as parts: `content`, or its text as the one part."""
        if self.content is not None:
            return list(self.content)
        return [self.text] if self.text else []

    @classmethod
    def user(cls, *parts: Part) -> Message:
        """A user message of text and `Image` / `Document` parts: `Message.user("what is this?", image)`."""
        if len(parts) == 1 and isinstance(parts[0], str):
            return cls("user", parts[0])
        return cls.of_parts("user", as_parts(parts, "Message.user"))

    @classmethod
    def of_parts(cls, role: Role, parts: list[Part]) -> Message:
        """A message with `parts`; text only (no `content`) when every part is a str."""
        if not any(isinstance(part, MEDIA) for part in parts):
            return cls(role, joined_text(parts))
        return cls(role, joined_text(parts), content=parts)

    @classmethod
    def system(cls, text: str) -> Message:
        return cls("system", text)

    @classmethod
    def assistant(cls, text: str = "", tool_calls: list[ToolRequest] | None = None) -> Message:
        return cls("assistant", text, tool_calls if tool_calls is not None else [])

    @classmethod
    def tool(cls, call_id: str, text: str | list[Part], is_error: bool = False, *, untrusted: bool = False) -> Message:
        """A tool result: text, or a list of parts (a tool that returned an image); `untrusted` for outside content."""
        if isinstance(text, str):
            return cls("tool", text, [], call_id, is_error, untrusted=untrusted)
        parts = valid_text_parts(as_parts(text, f"the result of tool call {call_id}"))
        message = cls.of_parts("tool", parts)
        message.tool_call_id, message.is_error, message.untrusted = call_id, is_error, untrusted
        return message

    def to_dict(self) -> dict[str, Any]:
        """Every field as plain JSON-able data; `Message.from_dict` reads it back.

        Fields at their default are left out; `meta` (provider metadata such
        as thinking blocks and reasoning items) is copied as is.
        """
        data: dict[str, Any] = {"role": self.role, "text": self.text}
        if self.tool_calls:
            data["tool_calls"] = [_request_dict(request) for request in self.tool_calls]
        if self.tool_call_id is not None:
            data["tool_call_id"] = self.tool_call_id
        if self.is_error:
            data["is_error"] = True
        if self.meta is not None:
            data["meta"] = copy.deepcopy(self.meta)
        if self.content is not None:
            data["content"] = [part_dict(part) for part in self.content]
        if self.untrusted:
            data["untrusted"] = True
        return data

    @classmethod
    def from_dict(cls, data: Any) -> Message:
        """The message `to_dict` produced; raises `ValueError` naming the field that is wrong."""
        if not isinstance(data, dict):
            raise ValueError(f"a message must be a dict as Message.to_dict() makes, not {type(data).__name__}")
        role = data.get("role")
        if role not in ROLES:
            raise ValueError(f"message role {role!r} is not one of {', '.join(ROLES)}")
        text = _typed(data, "text", str, "")
        calls = _typed(data, "tool_calls", list, [])
        meta = _typed(data, "meta", dict, None)
        content = _typed(data, "content", list, None)
        return cls(
            role,
            text,
            [_request_from(item) for item in calls],
            _typed(data, "tool_call_id", str, None),
            _typed(data, "is_error", bool, False),
            copy.deepcopy(meta),
            None if content is None else [part_from(item) for item in content],
            _typed(data, "untrusted", bool, False),
        )


_SCALARS = frozenset((str, int, float, bool, type(None)))


def _request_dict(request: ToolRequest) -> dict[str, Any]:
    args = request.args
    copied = dict(args) if _SCALARS.issuperset(map(type, args.values())) else copy.deepcopy(args)
    data = {"id": request.id, "name": request.name, "args": copied}
    if request.raw_args is not None:
        data["raw_args"] = request.raw_args
    return data


def _request_from(data: Any) -> ToolRequest:
    if not isinstance(data, dict):
        raise ValueError(f"a tool call must be a dict with id, name and args, not {type(data).__name__}")
    return ToolRequest(
        _typed(data, "id", str),
        _typed(data, "name", str),
        copy.deepcopy(_typed(data, "args", dict, {})),
        _typed(data, "raw_args", str, None),
    )


_REQUIRED: Any = object()


def _typed(data: dict[str, Any], key: str, kind: type, default: Any = _REQUIRED) -> Any:
    """`data[key]`, checked to be a `kind` (or None where the default is None)."""
    if key not in data:
        if default is _REQUIRED:
            raise ValueError(f"{key!r} is missing")
        return default
    value = data[key]
    if isinstance(value, kind) or (value is None and default is None):
        return value
    raise ValueError(f"{key!r} must be {kind.__name__}, not {type(value).__name__} {value!r:.60}")


@dataclass(slots=True)
class Usage:
    """Tokens and requests consumed. Adds up with `+`.

    `input_tokens` counts every input token, cached ones included;
    `cached_input_tokens` says how many of them were read from the
    provider's prompt cache, `cache_write_tokens` how many were written to it.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    requests: int = 0
    cached_input_tokens: int = 0
    cache_write_tokens: int = 0
    """Input tokens written to the provider's prompt cache (Anthropic reports them; 0 when unknown)."""

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.requests + other.requests,
            self.cached_input_tokens + other.cached_input_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
        )

    def to_dict(self) -> dict[str, int]:
        """The counters as a dict; `Usage(**d)` builds it back."""
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "requests": self.requests,
            "cached_input_tokens": self.cached_input_tokens,
            "cache_write_tokens": self.cache_write_tokens,
        }

    def add(self, other: Usage) -> None:
        """Add `other` into this usage in place."""
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.requests += other.requests
        self.cached_input_tokens += other.cached_input_tokens
        self.cache_write_tokens += other.cache_write_tokens
