"""What a model call and a tool call return: `ModelResponse` and `ToolResult`."""

from __future__ import annotations

from typing import Any

from ._content import Part, content_text
from ._messages import Message, ToolRequest, Usage


class ModelResponse:
    """What a model answered: one assistant message, its usage and why it stopped.

    `cached` is true when a layer served it without reaching a model;
    `model` names the model that produced it, when known.
    """

    __slots__ = ("cached", "message", "model", "raw", "stop_reason", "usage")

    def __init__(
        self,
        message: Message,
        usage: Usage | None = None,
        stop_reason: str | None = None,
        *,
        model: str | None = None,
        cached: bool = False,
        raw: Any = None,
    ) -> None:
        self.message = message
        self.usage = Usage() if usage is None else usage
        self.stop_reason = stop_reason if stop_reason is not None else ("tool_use" if message.tool_calls else "end")
        self.model = model
        self.cached = cached
        self.raw = raw

    @property
    def text(self) -> str:
        return self.message.text

    @property
    def tool_calls(self) -> list[ToolRequest]:
        return self.message.tool_calls

    def replace(self, **changes: Any) -> ModelResponse:
        """A copy with `changes` (`message=`, `usage=`, `stop_reason=`, `model=`, `cached=`, `raw=`), the rest kept.

        A layer that rewrites a response returns `response.replace(message=...)`.
        """
        fields = {name: getattr(self, name) for name in self.__slots__}
        unknown = changes.keys() - fields.keys()
        if unknown:
            raise TypeError(f"ModelResponse.replace() got unknown fields {sorted(unknown)}; it has {sorted(fields)}")
        fields.update(changes)
        message, usage, stop_reason = fields.pop("message"), fields.pop("usage"), fields.pop("stop_reason")
        return ModelResponse(message, usage, stop_reason, **fields)

    def __repr__(self) -> str:
        return f"<ModelResponse text={self.text!r:.40} tool_calls={[c.name for c in self.tool_calls]}>"


class ToolResult:
    """The answer to one tool call. `content` is what the model will read.

    `content` is text, or a list of parts (`str`, `Image`, `Document`) when
    the tool returned an image or a document. `untrusted` is true for outside
    content: every answer to a call of a tool marked `@tool(untrusted=True)`
    is, whoever made it (the tool, a cache, a layer); a tool may also mark one
    result so itself.
    """

    __slots__ = ("call_id", "content", "is_error", "untrusted", "value")

    def __init__(
        self,
        content: str | list[Part] = "",
        *,
        is_error: bool = False,
        call_id: str = "",
        value: Any = None,
        untrusted: bool = False,
    ) -> None:
        self.content = content
        self.is_error = is_error
        self.call_id = call_id
        self.value = value
        """What the tool returned, before it was turned into text."""
        self.untrusted = untrusted

    @property
    def text(self) -> str:
        """`content` as text: itself, or its text parts with images and documents described (for logs)."""
        return content_text(self.content)

    def replace(self, **changes: Any) -> ToolResult:
        """A copy with `changes` (`content=`, `is_error=`, `call_id=`, `value=`, `untrusted=`), the rest kept."""
        fields = {name: getattr(self, name) for name in self.__slots__}
        unknown = changes.keys() - fields.keys()
        if unknown:
            raise TypeError(f"ToolResult.replace() got unknown fields {sorted(unknown)}; it has {sorted(fields)}")
        fields.update(changes)
        return ToolResult(fields.pop("content"), **fields)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ToolResult) and (self.content, self.is_error, self.call_id) == (
            other.content,
            other.is_error,
            other.call_id,
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        flag = (" error" if self.is_error else "") + (" untrusted" if self.untrusted else "")
        return f"<ToolResult{flag} {self.call_id} {self.content!r:.60}>"
