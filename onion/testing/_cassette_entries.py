"""What a cassette writes for one model call (its request and response, streamed events) and one tool call.

Everything is plain JSON data, scrubbed of secrets before it is kept: values
under credential names (`api_key`, an `Authorization` or `x-api-key` header),
and text matching the built-in secret patterns (`middleware.patterns.SECRETS`:
API keys, bearer credentials, private keys, `password=...`) become
`[REDACTED]`. A live request is scrubbed the same way before it is matched,
so a secret in a question still matches its recording.
"""

from __future__ import annotations

import re
from typing import Any

from .._calls import ModelCall
from .._content import part_dict, part_from
from .._events import TextDelta, ToolCallStarted
from .._messages import Message, Usage
from .._model import PROVIDERS
from .._output import output_schema
from .._results import ModelResponse, ToolResult

REDACTED = "[REDACTED]"

_CREDENTIAL_HEADER = re.compile(r"(?i)auth|key|token|secret|cookie|session|passw|signature")
"""A header name whose value says who is calling (`Authorization`, `x-api-key`, `Cookie`, `X-Session-Token`)."""

_HEADERS = ("extra_headers", "headers", "default_headers")

_PROVIDER_NAMES = {class_name: provider for provider, (_, class_name) in reversed(PROVIDERS.items())}
"""Provider model class names as model strings spell them: `OpenAIResponsesModel` -> `"openai-responses"`."""


def scrubbed(value: Any) -> Any:
    """`value` (JSON-like data) with every secret replaced by `[REDACTED]` (see the module's docstring)."""
    from ..scrub import SECRETS, scrub_value

    return scrub_value(value, SECRETS, REDACTED)


def provider_of(model: Any) -> str:
    """The provider a model talks to, as a model string spells it (`"openai-responses"`), else its class name."""
    for cls in type(model).__mro__:
        if cls.__module__.startswith("onion.providers") and cls.__name__ in _PROVIDER_NAMES:
            return _PROVIDER_NAMES[cls.__name__]
    return type(model).__name__


def model_name(model: Any) -> str:
    return str(getattr(model, "name", None) or type(model).__name__)


def output_type_entry(output_type: Any) -> Any:
    """`"str"`, or the name and JSON schema of a structured output type."""
    if output_type is str:
        return "str"
    schema = output_schema(output_type)
    return {"name": schema.name, "schema": schema.schema}


def request_entry(call: ModelCall) -> dict[str, Any]:
    """The request as the model receives it: provider, model, output type, messages, tools, settings (scrubbed)."""
    settings = dict(call.settings)
    for key in _HEADERS:
        headers = settings.get(key)
        if isinstance(headers, dict):
            settings[key] = {
                name: REDACTED if isinstance(name, str) and _CREDENTIAL_HEADER.search(name) else value
                for name, value in headers.items()
            }
    entry = {
        "provider": provider_of(call.model),
        "model": model_name(call.model),
        "output_type": output_type_entry(call.output_type),
        "messages": [_sent(message) for message in call.messages],
        "tools": [{"name": t.name, "description": t.description, "parameters": t.parameters} for t in call.tools],
        "settings": settings,
    }
    scrubbed_entry: dict[str, Any] = scrubbed(entry)
    return scrubbed_entry


def response_entry(response: ModelResponse) -> dict[str, Any]:
    """What the model answered: the assistant message, usage, stop reason and the model that answered."""
    entry = {
        "message": response.message.to_dict(),
        "usage": response.usage.to_dict(),
        "stop_reason": response.stop_reason,
        "model": response.model,
    }
    scrubbed_entry: dict[str, Any] = scrubbed(entry)
    return scrubbed_entry


def response_from(entry: dict[str, Any]) -> ModelResponse:
    """The `ModelResponse` a `response_entry` stands for, as a model would have returned it (not `cached`)."""
    return ModelResponse(
        Message.from_dict(entry["message"]),
        Usage(**entry["usage"]),
        entry["stop_reason"],
        model=entry.get("model"),
    )


def event_entry(event: Any) -> dict[str, Any]:
    """A streamed event as data: `{"type": "text_delta", "text": ...}` or `{"type": "tool_call_started", ...}`."""
    if isinstance(event, TextDelta):
        entry: dict[str, Any] = {"type": "text_delta", "text": event.text}
    elif isinstance(event, ToolCallStarted):
        entry = {"type": "tool_call_started", "id": event.id, "name": event.name, "args": event.args}
    else:
        raise TypeError(
            f"a cassette records TextDelta and ToolCallStarted events, not {type(event).__name__} {event!r:.80}"
        )
    scrubbed_entry: dict[str, Any] = scrubbed(entry)
    return scrubbed_entry


def event_from(entry: dict[str, Any]) -> TextDelta | ToolCallStarted:
    if entry["type"] == "text_delta":
        return TextDelta(entry["text"])
    return ToolCallStarted(entry["id"], entry["name"], dict(entry.get("args") or {}))


def tool_entry(name: str, args: dict[str, Any], content: Any, is_error: bool) -> dict[str, Any]:
    """One tool call and what it answered (text, or parts as `Message.to_dict` writes them)."""
    stored = content if isinstance(content, str) else [part_dict(part) for part in content]
    entry: dict[str, Any] = scrubbed({"name": name, "args": args, "content": stored, "is_error": is_error})
    return entry


def tool_result_from(entry: dict[str, Any], call_id: str) -> ToolResult:
    content = entry["content"]
    parts = content if isinstance(content, str) else [part_from(part) for part in content]
    return ToolResult(
        content=parts, is_error=bool(entry["is_error"]), call_id=call_id, untrusted=bool(entry.get("untrusted"))
    )


def _sent(message: Message) -> dict[str, Any]:
    """A message as the model receives it: without onion's own label of outside content (no provider sees it, so a
    cassette recorded before a tool was marked `untrusted` still matches)."""
    data = message.to_dict()
    data.pop("untrusted", None)
    return data
