"""Translation between onion's messages and the OpenAI Responses API.

System messages before the first other message become `instructions`; a
later one stays in place as a `system` input item. Tool calls are
`function_call` items answered by `function_call_output` items (an error
result's text is prefixed with `Error: `: the API has no error flag).
Reasoning items are kept in `Message.meta` and sent back with their turn.
Requests are plain dicts; responses and events are read from the SDK's
objects (or dicts) by field name.
"""

from __future__ import annotations

from typing import Any

from .._calls import ModelCall
from .._content import Image, Part, data_url
from .._events import TextDelta, ToolCallStarted
from .._messages import Message, ToolRequest, Usage
from .._results import ModelResponse
from ..errors import ResponseFormatError
from ._errors import from_error_type
from ._settings import openai_settings
from ._tool_arguments import arguments_json, tool_request, tool_result_text

REASONING = "openai_reasoning"
"""`Message.meta` key holding reasoning items, sent back before the turn's other items."""

INCOMPLETE_REASONS = {"max_output_tokens": "max_tokens", "content_filter": "content_filter"}


def request_params(call: ModelCall, model: str) -> dict[str, Any]:
    """The `responses.create` keyword arguments for `call`.

    A `max_tokens` setting is sent as `max_output_tokens`; other settings
    pass through verbatim. Tools are sent with `strict: false`, since onion's
    schemas need not meet strict mode's rules.
    """
    messages = call.messages
    leading = 0
    while leading < len(messages) and messages[leading].role == "system":
        leading += 1
    params: dict[str, Any] = {
        "model": model,
        "input": [item for message in messages[leading:] for item in _items(message)],
    }
    instructions = "\n\n".join(m.text for m in messages[:leading] if m.text)
    if instructions:
        params["instructions"] = instructions
    if call.tools:
        params["tools"] = [
            {
                "type": "function",
                "name": tool.name,
                "description": tool.description,
                "parameters": tool.parameters,
                "strict": False,
            }
            for tool in call.tools
        ]
    settings = dict(openai_settings(call.settings, responses=True))
    if "max_tokens" in settings and "max_output_tokens" not in settings:
        settings["max_output_tokens"] = settings.pop("max_tokens")
    params.update(settings)
    return params


def _items(message: Message) -> list[dict[str, Any]]:
    if message.role == "tool":
        output: Any = tool_result_text(message.text, message.is_error)
        if message.content is not None:
            output = [_part(part) for part in message.content if part]
            if message.is_error:
                output.insert(0, {"type": "input_text", "text": "Error:"})
        return [{"type": "function_call_output", "call_id": message.tool_call_id, "output": output}]
    if message.role != "assistant":
        if message.content is not None:
            return [{"role": message.role, "content": [_part(part) for part in message.content if part]}]
        return [{"role": message.role, "content": message.text}]
    items: list[dict[str, Any]] = [dict(item) for item in (message.meta or {}).get(REASONING, ())]
    if message.text:
        items.append({"role": "assistant", "content": message.text})
    items.extend(
        {"type": "function_call", "call_id": r.id, "name": r.name, "arguments": arguments_json(r)}
        for r in message.tool_calls
    )
    return items


def _part(part: Part) -> dict[str, Any]:
    """An input content part: `input_text`, `input_image` (a URL or a data URL), or a PDF as `input_file`."""
    if isinstance(part, str):
        return {"type": "input_text", "text": part}
    if isinstance(part, Image):
        return {"type": "input_image", "image_url": data_url(part), "detail": "auto"}
    if part.data is None:
        return {"type": "input_file", "file_url": part.url}
    return {"type": "input_file", "filename": "document.pdf", "file_data": data_url(part)}


def _field(item: Any, name: str) -> Any:
    return item.get(name) if isinstance(item, dict) else getattr(item, name, None)


def _as_dict(item: Any) -> dict[str, Any]:
    if isinstance(item, dict):
        return dict(item)
    dumped: dict[str, Any] = item.to_dict()
    return dumped


def read_usage(usage: Any) -> Usage:
    """onion `Usage` from the Responses API's (`input_tokens` already counts cached tokens)."""
    if usage is None:
        return Usage(requests=1)
    details = _field(usage, "input_tokens_details")
    return Usage(
        input_tokens=_field(usage, "input_tokens") or 0,
        output_tokens=_field(usage, "output_tokens") or 0,
        requests=1,
        cached_input_tokens=(_field(details, "cached_tokens") or 0) if details is not None else 0,
    )


def read_response(response: Any, output: list[Any] | None = None) -> ModelResponse:
    """The `ModelResponse` for an SDK `Response` (or its `output` items given separately).

    A `failed` response raises the matching `ModelError`.
    """
    if _field(response, "status") == "failed":
        error = _field(response, "error")
        raise from_error_type(
            str(_field(error, "code") or ""), str(_field(error, "message") or "response failed"), "openai"
        )
    text: list[str] = []
    calls: list[ToolRequest] = []
    reasoning: list[dict[str, Any]] = []
    for item in _field(response, "output") if output is None else output:
        kind = _field(item, "type")
        if kind == "message":
            for part in _field(item, "content") or ():
                part_kind = _field(part, "type")
                if part_kind == "output_text":
                    text.append(_field(part, "text"))
                elif part_kind == "refusal":
                    text.append(_field(part, "refusal"))
        elif kind == "function_call":
            calls.append(tool_request(_field(item, "call_id"), _field(item, "name"), _field(item, "arguments")))
        elif kind == "reasoning":
            reasoning.append(_as_dict(item))
    reply = Message.assistant("".join(text), calls)
    if reasoning:
        reply.meta = {REASONING: reasoning}
    details = _field(response, "incomplete_details")
    reason = _field(details, "reason") if details is not None else None
    stop = INCOMPLETE_REASONS.get(reason, reason) if reason else ("tool_use" if calls else "end")
    raw = None if output is not None else response
    return ModelResponse(reply, read_usage(_field(response, "usage")), stop, model=_field(response, "model"), raw=raw)


class ResponsesStreamReader:
    """Assembles a `ModelResponse` from Responses stream events.

    Output items are built from their deltas (text, concatenated argument
    fragments) and replaced by the complete item of `output_item.done`;
    usage and status come from `response.completed` / `response.incomplete`.
    An `error` event or `response.failed` raises the matching `ModelError`.
    """

    def __init__(self) -> None:
        self._items: dict[int, Any] = {}
        self._final: Any = None

    def feed(self, event: Any) -> list[Any]:
        kind = event.type
        if kind == "response.output_text.delta":
            item = self._items.setdefault(event.output_index, {"type": "message", "content": []})
            if isinstance(item, dict):
                parts = item["content"] or [{"type": "output_text", "text": ""}]
                parts[-1]["text"] += event.delta
                item["content"] = parts
            return [TextDelta(event.delta)]
        if kind == "response.output_item.added":
            item = event.item
            if item.type == "function_call":
                self._items[event.output_index] = {
                    "type": "function_call",
                    "call_id": item.call_id,
                    "name": item.name,
                    "arguments": item.arguments or "",
                }
                return [ToolCallStarted(item.call_id, item.name)]
        elif kind == "response.function_call_arguments.delta":
            item = self._items.get(event.output_index)
            if isinstance(item, dict) and item.get("type") == "function_call":
                item["arguments"] += event.delta
        elif kind == "response.output_item.done":
            self._items[event.output_index] = event.item
        elif kind in ("response.completed", "response.incomplete", "response.failed"):
            self._final = event.response
            if kind == "response.failed":
                read_response(event.response, [])
        elif kind == "error":
            raise from_error_type(str(event.code or ""), str(event.message or "stream failed"), "openai")
        return []

    def finish(self) -> ModelResponse:
        if self._final is None:
            raise ResponseFormatError(
                "the openai stream ended cleanly before response.completed: truncated",
                provider="openai",
            )
        output = [item for _, item in sorted(self._items.items())] or list(_field(self._final, "output") or ())
        response = read_response(self._final, output)
        response.raw = self._final
        return response
