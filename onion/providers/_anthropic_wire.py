"""Translation between onion's messages and the Anthropic Messages API.

Requests are plain dicts (the JSON body); responses and stream events are
read by attribute from the SDK's objects. Rules the API imposes, kept here:
system messages go to the top-level `system` parameter; tool results of a
batch travel in the next user message, before any text; consecutive
messages of the same role are merged; `max_tokens` is required.
"""

from __future__ import annotations

from typing import Any

from .._calls import ModelCall
from .._content import Image, Part, b64
from .._events import TextDelta, ToolCallStarted
from .._messages import Message, ToolRequest, Usage
from .._results import ModelResponse
from ..errors import ResponseFormatError
from ._settings import anthropic_settings
from ._tool_arguments import tool_request

STOP_REASONS = {"end_turn": "end", "tool_use": "tool_use", "max_tokens": "max_tokens", "stop_sequence": "stop_sequence"}
"""Anthropic stop reasons that have an onion name; others pass through unchanged."""

THINKING = "anthropic_thinking"
"""`Message.meta` key holding thinking blocks, which must go back with the assistant turn."""


def request_params(call: ModelCall, model: str, default_max_tokens: int) -> dict[str, Any]:
    """The `messages.create` keyword arguments for `call` (settings pass through verbatim)."""
    system, messages = to_wire_messages(call.messages)
    params: dict[str, Any] = {"model": model, "messages": messages}
    if system:
        params["system"] = system
    if call.tools:
        params["tools"] = [
            {"name": tool.name, "description": tool.description, "input_schema": tool.parameters}
            if tool.description
            else {"name": tool.name, "input_schema": tool.parameters}
            for tool in call.tools
        ]
    params["max_tokens"] = default_max_tokens
    if not call.settings:
        return params
    ttl = anthropic_settings(call.settings, params)
    if ttl is not None:
        place_breakpoints(params, ttl)
    return params


def place_breakpoints(params: dict[str, Any], ttl: str) -> None:
    """`cache_control` on the last tool, the system prompt and the last block of the latest two user turns (4 at most).

    The latest user turn makes the prefix cached for the next call; the one
    before it reads what the previous call wrote.
    """
    if ttl not in ("5m", "1h"):
        raise ValueError(f"prompt_cache ttl {ttl!r} must be '5m' or '1h'")
    mark = {"type": "ephemeral"} if ttl == "5m" else {"type": "ephemeral", "ttl": "1h"}
    if params.get("tools"):
        params["tools"][-1] = {**params["tools"][-1], "cache_control": mark}
    if isinstance(params.get("system"), str):
        params["system"] = [{"type": "text", "text": params["system"], "cache_control": mark}]
    turns = [entry for entry in params["messages"] if entry["role"] == "user"][-2:]
    for entry in turns:
        blocks = entry["content"]
        blocks[-1] = {**blocks[-1], "cache_control": mark}


def to_wire_messages(messages: list[Message]) -> tuple[str, list[dict[str, Any]]]:
    """The `system` text (every system message, joined) and the `messages` list."""
    system: list[str] = []
    wire: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "system":
            if message.text:
                system.append(message.text)
            continue
        role = "assistant" if message.role == "assistant" else "user"
        blocks = _blocks(message)
        if not blocks:
            continue
        if wire and wire[-1]["role"] == role:
            wire[-1]["content"].extend(blocks)
        else:
            wire.append({"role": role, "content": blocks})
    for entry in wire:
        if entry["role"] == "user":
            entry["content"].sort(key=lambda block: block["type"] != "tool_result")
    return "\n\n".join(system), wire


def _blocks(message: Message) -> list[dict[str, Any]]:
    if message.role == "tool":
        return [
            {
                "type": "tool_result",
                "tool_use_id": message.tool_call_id,
                "content": message.text if message.content is None else [_part(p) for p in message.content],
                "is_error": message.is_error,
            }
        ]
    if message.content is not None:
        return [_part(part) for part in message.content if part]
    blocks: list[dict[str, Any]] = []
    if message.role == "assistant" and message.meta and THINKING in message.meta:
        blocks.extend(dict(block) for block in message.meta[THINKING])
    if message.text:
        blocks.append({"type": "text", "text": message.text})
    for request in message.tool_calls:
        blocks.append({"type": "tool_use", "id": request.id, "name": request.name, "input": request.args})
    return blocks


def _part(part: Part) -> dict[str, Any]:
    """A content block for a message part: text, or an image / document given as base64 or a URL."""
    if isinstance(part, str):
        return {"type": "text", "text": part}
    kind = "image" if isinstance(part, Image) else "document"
    if part.data is None:
        return {"type": kind, "source": {"type": "url", "url": part.url}}
    return {"type": kind, "source": {"type": "base64", "media_type": part.media_type, "data": b64(part.data)}}


def read_usage(usage: Any) -> Usage:
    """onion `Usage` from Anthropic's: input counts cached and cache-written tokens too."""
    read = getattr(usage, "cache_read_input_tokens", None) or 0
    written = getattr(usage, "cache_creation_input_tokens", None) or 0
    return Usage(
        input_tokens=(usage.input_tokens or 0) + read + written,
        output_tokens=usage.output_tokens or 0,
        requests=1,
        cached_input_tokens=read,
        cache_write_tokens=written,
    )


def read_response(message: Any) -> ModelResponse:
    """The `ModelResponse` for an SDK `Message`."""
    text: list[str] = []
    calls: list[ToolRequest] = []
    thinking: list[dict[str, Any]] = []
    for block in message.content:
        if block.type == "text":
            text.append(block.text)
        elif block.type == "tool_use":
            calls.append(tool_request(block.id, block.name, block.input))
        elif block.type == "thinking":
            thinking.append({"type": "thinking", "thinking": block.thinking, "signature": block.signature})
        elif block.type == "redacted_thinking":
            thinking.append({"type": "redacted_thinking", "data": block.data})
    reply = Message.assistant("".join(text), calls)
    if thinking:
        reply.meta = {THINKING: thinking}
    stop = message.stop_reason
    return ModelResponse(
        reply, read_usage(message.usage), STOP_REASONS.get(stop, stop), model=message.model, raw=message
    )


class AnthropicStreamReader:
    """Assembles a `ModelResponse` from raw Messages stream events."""

    def __init__(self) -> None:
        self._blocks: dict[int, dict[str, Any]] = {}
        self._usage: dict[str, int] = {}
        self._stop_reason: str | None = None
        self._model: str | None = None
        self._stopped = False

    def feed(self, event: Any) -> list[Any]:
        kind = event.type
        if kind == "message_start":
            self._model = event.message.model
            self._take_usage(event.message.usage)
        elif kind == "content_block_start":
            return self._start(event.index, event.content_block)
        elif kind == "content_block_delta":
            return self._delta(self._blocks.get(event.index), event.delta)
        elif kind == "message_delta":
            self._stop_reason = event.delta.stop_reason
            self._take_usage(event.usage)
        elif kind == "message_stop":
            self._stopped = True
        return []

    def _start(self, index: int, block: Any) -> list[Any]:
        if block.type == "text":
            self._blocks[index] = {"type": "text", "text": block.text or ""}
            return [TextDelta(block.text)] if block.text else []
        if block.type == "tool_use":
            self._blocks[index] = {
                "type": "tool_use",
                "id": block.id,
                "name": block.name,
                "json": "",
                "input": block.input,
            }
            return [ToolCallStarted(block.id, block.name)]
        if block.type == "thinking":
            self._blocks[index] = {
                "type": "thinking",
                "thinking": block.thinking or "",
                "signature": block.signature or "",
            }
        elif block.type == "redacted_thinking":
            self._blocks[index] = {"type": "redacted_thinking", "data": block.data}
        return []

    def _delta(self, block: dict[str, Any] | None, delta: Any) -> list[Any]:
        if block is None:
            return []
        kind = delta.type
        if kind == "text_delta":
            block["text"] += delta.text
            return [TextDelta(delta.text)]
        if kind == "input_json_delta":
            block["json"] += delta.partial_json
        elif kind == "thinking_delta":
            block["thinking"] += delta.thinking
        elif kind == "signature_delta":
            block["signature"] += delta.signature
        return []

    def _take_usage(self, usage: Any) -> None:
        if usage is None:
            return
        for field in ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"):
            value = getattr(usage, field, None)
            if value is not None:
                self._usage[field] = value

    def finish(self) -> ModelResponse:
        if not self._stopped:
            raise ResponseFormatError(
                "the anthropic stream ended cleanly before message_stop: truncated",
                provider="anthropic",
            )
        text: list[str] = []
        calls: list[ToolRequest] = []
        thinking: list[dict[str, Any]] = []
        for _, block in sorted(self._blocks.items()):
            if block["type"] == "text":
                text.append(block["text"])
            elif block["type"] == "tool_use":
                calls.append(tool_request(block["id"], block["name"], block["json"] or block["input"]))
            else:
                thinking.append(block)
        reply = Message.assistant("".join(text), calls)
        if thinking:
            reply.meta = {THINKING: thinking}
        read = self._usage.get("cache_read_input_tokens", 0)
        written = self._usage.get("cache_creation_input_tokens", 0)
        usage = Usage(
            input_tokens=self._usage.get("input_tokens", 0) + read + written,
            output_tokens=self._usage.get("output_tokens", 0),
            requests=1,
            cached_input_tokens=read,
            cache_write_tokens=written,
        )
        stop = self._stop_reason
        return ModelResponse(reply, usage, STOP_REASONS.get(stop or "", stop), model=self._model)
