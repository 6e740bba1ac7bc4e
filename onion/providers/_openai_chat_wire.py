"""Translation between onion's messages and the OpenAI Chat Completions API.

Requests are plain dicts; responses and stream chunks are read by attribute
from the SDK's objects. Tool-call arguments travel as JSON strings; tool
results are `role: "tool"` messages, one per call, right after the call.
The API has no error flag for a tool result, so an error result's text is
prefixed with `Error: `.
"""

from __future__ import annotations

from typing import Any

from .._calls import ModelCall
from .._content import Image, Part, data_url
from .._events import TextDelta, ToolCallStarted
from .._messages import Message, Usage
from .._results import ModelResponse
from ..errors import ResponseFormatError, UnsupportedContent
from ._settings import openai_settings
from ._tool_arguments import arguments_json, tool_request, tool_result_text

STOP_REASONS = {"stop": "end", "tool_calls": "tool_use", "function_call": "tool_use", "length": "max_tokens"}
"""Chat finish reasons that have an onion name; others (`content_filter`) pass through unchanged."""


def request_params(call: ModelCall, model: str, system_role: str) -> dict[str, Any]:
    """The `chat.completions.create` keyword arguments for `call`.

    A `max_tokens` setting is sent as `max_completion_tokens` (which every
    current model accepts); other settings pass through verbatim.
    """
    params: dict[str, Any] = {"model": model, "messages": to_wire_messages(call.messages, system_role)}
    if call.tools:
        params["tools"] = [
            {
                "type": "function",
                "function": {"name": tool.name, "description": tool.description, "parameters": tool.parameters},
            }
            for tool in call.tools
        ]
    settings = dict(openai_settings(call.settings, responses=False))
    if "max_tokens" in settings and "max_completion_tokens" not in settings:
        settings["max_completion_tokens"] = settings.pop("max_tokens")
    params.update(settings)
    return params


def to_wire_messages(messages: list[Message], system_role: str) -> list[dict[str, Any]]:
    """The `messages` list. Images and documents a tool returned (a tool message carries text only)
    follow the batch's tool messages in one user message, as OpenAI advises."""
    wire: list[dict[str, Any]] = []
    returned: list[dict[str, Any]] = []
    for index, message in enumerate(messages):
        if returned and message.role != "tool":
            wire.append({"role": "user", "content": returned})
            returned = []
        if message.content is not None and message.role == "tool":
            returned.append({"type": "text", "text": f"Returned by tool call {message.tool_call_id}:"})
            returned.extend(_part(part, index) for part in message.content if not isinstance(part, str))
        wire.append(_message(message, system_role, index))
    if returned:
        wire.append({"role": "user", "content": returned})
    return wire


def _part(part: Part, index: int) -> dict[str, Any]:
    """A content part: text, `image_url` (a URL or a data URL), or a PDF as `file` data."""
    if isinstance(part, str):
        return {"type": "text", "text": part}
    if isinstance(part, Image):
        return {"type": "image_url", "image_url": {"url": data_url(part)}}
    if part.data is None:
        raise UnsupportedContent(
            f"message {index}: OpenAI Chat takes a document as data, not a URL ({part.url}); "
            "pass Document(data=pdf_bytes)",
            provider="openai",
        )
    return {"type": "file", "file": {"filename": "document.pdf", "file_data": data_url(part)}}


def _message(message: Message, system_role: str, index: int) -> dict[str, Any]:
    if message.role == "system":
        return {"role": system_role, "content": message.text}
    if message.role == "tool":
        text = message.text if message.content is None or message.text else "(see the next message)"
        return {
            "role": "tool",
            "tool_call_id": message.tool_call_id,
            "content": tool_result_text(text, message.is_error),
        }
    if message.content is not None and message.role == "user":
        return {"role": "user", "content": [_part(part, index) for part in message.content if part]}
    if message.role == "assistant" and message.tool_calls:
        calls = [
            {"id": r.id, "type": "function", "function": {"name": r.name, "arguments": arguments_json(r)}}
            for r in message.tool_calls
        ]
        return {"role": "assistant", "content": message.text or None, "tool_calls": calls}
    return {"role": message.role, "content": message.text}


def read_usage(usage: Any) -> Usage:
    """onion `Usage` from Chat's (`prompt_tokens` already counts cached tokens)."""
    if usage is None:
        return Usage(requests=1)
    details = getattr(usage, "prompt_tokens_details", None)
    return Usage(
        input_tokens=usage.prompt_tokens or 0,
        output_tokens=usage.completion_tokens or 0,
        requests=1,
        cached_input_tokens=(getattr(details, "cached_tokens", None) or 0) if details is not None else 0,
    )


def read_response(completion: Any) -> ModelResponse:
    """The `ModelResponse` for an SDK `ChatCompletion` (its first choice)."""
    choice = completion.choices[0]
    message = choice.message
    calls = [
        tool_request(call.id, call.function.name, call.function.arguments)
        for call in message.tool_calls or ()
        if call.type == "function"
    ]
    text = message.content or getattr(message, "refusal", None) or ""
    finish = choice.finish_reason
    reply = Message.assistant(text, calls)
    return ModelResponse(
        reply, read_usage(completion.usage), STOP_REASONS.get(finish, finish), model=completion.model, raw=completion
    )


class ChatStreamReader:
    """Assembles a `ModelResponse` from Chat Completions chunks (arguments concatenated per call index)."""

    def __init__(self) -> None:
        self._text: list[str] = []
        self._calls: dict[int, dict[str, str]] = {}
        self._finish: str | None = None
        self._usage = Usage(requests=1)
        self._model: str | None = None

    def feed(self, chunk: Any) -> list[Any]:
        self._model = chunk.model or self._model
        if getattr(chunk, "usage", None) is not None:
            self._usage = read_usage(chunk.usage)
        events: list[Any] = []
        for choice in chunk.choices:
            if choice.index != 0:
                continue
            delta = choice.delta
            if delta.content:
                self._text.append(delta.content)
                events.append(TextDelta(delta.content))
            for part in delta.tool_calls or ():
                entry = self._calls.setdefault(part.index, {"id": "", "name": "", "arguments": ""})
                started = bool(entry["id"] and entry["name"])
                if part.id:
                    entry["id"] = part.id
                function = part.function
                if function is not None:
                    if function.name:
                        entry["name"] = function.name
                    if function.arguments:
                        entry["arguments"] += function.arguments
                if not started and entry["id"] and entry["name"]:
                    events.append(ToolCallStarted(entry["id"], entry["name"]))
            if choice.finish_reason:
                self._finish = choice.finish_reason
        return events

    def finish(self) -> ModelResponse:
        if self._finish is None:
            raise ResponseFormatError(
                "the openai stream ended cleanly before a finish_reason: truncated",
                provider="openai",
            )
        calls = [tool_request(c["id"], c["name"], c["arguments"]) for _, c in sorted(self._calls.items())]
        reply = Message.assistant("".join(self._text), calls)
        return ModelResponse(reply, self._usage, STOP_REASONS.get(self._finish, self._finish), model=self._model)
