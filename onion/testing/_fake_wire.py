"""What `FakeProviderServer` sends: each API's JSON bodies and SSE frames for a `ModelResponse`.

A frame is `(event name or None, data)`, the data a JSON-able value or a raw
string. `frames(...)` splits a streamed answer into its head (through the
last content delta) and tail (the closing events), so the server can cut a
stream after the head for its faults.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Callable
from typing import Any

from .._messages import ToolRequest
from .._results import ModelResponse

_ids = itertools.count(1)

FIRST_EVENT = {"anthropic": "message_start", "chat": None, "responses": "response.created"}
STATUS_OF_TYPE = {"overloaded_error": 529, "rate_limit_error": 429, "rate_limit_exceeded": 429, "api_error": 500}
TYPE_OF_STATUS = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}


def error_body(api: str, error_type: str, message: str) -> dict[str, Any]:
    """The JSON body of an HTTP error answer."""
    if api == "anthropic":
        return {"type": "error", "error": {"type": error_type, "message": message}}
    return {"error": {"message": message, "type": error_type, "param": None, "code": error_type}}


def stream_error(api: str, error_type: str, message: str) -> tuple[str | None, Any]:
    """The SSE frame of an error event in the middle of a stream."""
    if api == "anthropic":
        return "error", error_body(api, error_type, message)
    if api == "chat":
        return None, error_body(api, error_type, message)
    return "error", {"type": "error", "code": error_type, "message": message, "param": None}


def _pieces(text: str, size: int) -> list[str]:
    return [text[start : start + size] for start in range(0, len(text), max(size, 1))]


def _arguments(request: ToolRequest) -> str:
    return request.raw_args if request.raw_args is not None and not request.args else json.dumps(request.args)


# -- Anthropic Messages ----------------------------------------------------------

_ANTHROPIC_STOP = {"end": "end_turn"}


def _anthropic_usage(response: ModelResponse) -> dict[str, int]:
    usage = response.usage
    return {
        "input_tokens": usage.input_tokens - usage.cached_input_tokens - usage.cache_write_tokens,
        "cache_creation_input_tokens": usage.cache_write_tokens,
        "cache_read_input_tokens": usage.cached_input_tokens,
        "output_tokens": usage.output_tokens,
    }


REASONING = "openai_reasoning"
"""The `Message.meta` key whose reasoning items the server sends first on the Responses API."""

THINKING = "anthropic_thinking"
"""The `Message.meta` key whose thinking blocks the server sends (as `onion.providers` reads them)."""


def thinking_signature(thinking: str) -> str:
    """The signature the fake server gives a thinking block, and checks when the block comes back."""
    return "fake-sig-" + hashlib.sha256(thinking.encode()).hexdigest()[:24]


def anthropic_request_problem(request: dict[str, Any]) -> str | None:
    """Why the real API would refuse this request's thinking blocks (400), or None.

    Each thinking block sent back must carry the signature it was given; with
    `thinking` enabled, the last assistant message that asked for tools must
    start with its thinking block.
    """
    messages = request.get("messages")
    if not isinstance(messages, list):
        return None
    last_tool_turn = None
    for index, message in enumerate(messages):
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, list) or message.get("role") != "assistant":
            continue
        for place, block in enumerate(content):
            if block.get("type") == "thinking" and block.get("signature") != thinking_signature(
                block.get("thinking", "")
            ):
                return f"messages.{index}.content.{place}: Invalid `signature` in `thinking` block"
        if any(block.get("type") == "tool_use" for block in content):
            last_tool_turn = (index, content)
    thinking = request.get("thinking")
    if last_tool_turn is not None and isinstance(thinking, dict) and thinking.get("type") in ("enabled", "adaptive"):
        index, content = last_tool_turn
        first = content[0].get("type") if content else None
        if first not in ("thinking", "redacted_thinking"):
            return (
                f"messages.{index}.content.0.type: Expected `thinking` or `redacted_thinking`, but found `{first}`. "
                "When `thinking` is enabled, a final `assistant` message must start with a thinking block."
            )
    return None


def _anthropic_body(response: ModelResponse, model: str) -> dict[str, Any]:
    content: list[dict[str, Any]] = [
        {"type": "thinking", "thinking": block["thinking"], "signature": thinking_signature(block["thinking"])}
        if block.get("type") == "thinking"
        else {"type": "redacted_thinking", "data": block["data"]}
        for block in (response.message.meta or {}).get(THINKING, ())
        if block.get("type") in ("thinking", "redacted_thinking")
    ]
    if response.text:
        content.append({"type": "text", "text": response.text})
    for request in response.tool_calls:
        arguments: Any = request.args if request.raw_args is None or request.args else request.raw_args
        content.append({"type": "tool_use", "id": request.id, "name": request.name, "input": arguments})
    return {
        "id": f"msg_fake_{next(_ids)}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": _ANTHROPIC_STOP.get(response.stop_reason, response.stop_reason),
        "stop_sequence": None,
        "usage": _anthropic_usage(response),
    }


def _anthropic_frames(response: ModelResponse, model: str, size: int) -> tuple[list[Any], list[Any]]:
    body = _anthropic_body(response, model)
    usage = body["usage"]
    start = {**body, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 1}}
    head: list[Any] = [("message_start", {"type": "message_start", "message": start}), ("ping", {"type": "ping"})]
    requests = iter(response.tool_calls)
    for index, block in enumerate(body["content"]):
        opening: dict[str, Any]
        deltas: list[dict[str, Any]]
        if block["type"] == "thinking":
            opening = {"type": "thinking", "thinking": "", "signature": ""}
            deltas = [{"type": "thinking_delta", "thinking": piece} for piece in _pieces(block["thinking"], size)]
            deltas.append({"type": "signature_delta", "signature": block["signature"]})
        elif block["type"] == "redacted_thinking":
            opening, deltas = block, []  # it comes whole, with no deltas
        elif block["type"] == "text":
            opening = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": piece} for piece in _pieces(block["text"], size)]
        else:
            opening = {**block, "input": {}}
            raw = _arguments(next(requests))
            deltas = [{"type": "input_json_delta", "partial_json": piece} for piece in _pieces(raw, size)]
        head.append(("content_block_start", {"type": "content_block_start", "index": index, "content_block": opening}))
        head.extend(
            ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": d}) for d in deltas
        )
        head.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    delta = {"stop_reason": body["stop_reason"], "stop_sequence": None}
    tail = [
        ("message_delta", {"type": "message_delta", "delta": delta, "usage": usage}),
        ("message_stop", {"type": "message_stop"}),
    ]
    return head, tail


# -- OpenAI Chat Completions -----------------------------------------------------

_CHAT_STOP = {"end": "stop", "tool_use": "tool_calls", "max_tokens": "length"}


def _chat_usage(response: ModelResponse) -> dict[str, Any]:
    usage = response.usage
    return {
        "prompt_tokens": usage.input_tokens,
        "completion_tokens": usage.output_tokens,
        "total_tokens": usage.input_tokens + usage.output_tokens,
        "prompt_tokens_details": {"cached_tokens": usage.cached_input_tokens},
    }


def _chat_body(response: ModelResponse, model: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": response.text or None, "refusal": None}
    if response.tool_calls:
        message["tool_calls"] = [
            {"id": r.id, "type": "function", "function": {"name": r.name, "arguments": _arguments(r)}}
            for r in response.tool_calls
        ]
    finish = _CHAT_STOP.get(response.stop_reason, response.stop_reason)
    return {
        "id": f"chatcmpl-fake{next(_ids)}",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
        "usage": _chat_usage(response),
    }


def _chat_frames(response: ModelResponse, model: str, size: int, include_usage: bool) -> tuple[list[Any], list[Any]]:
    ident = f"chatcmpl-fake{next(_ids)}"

    def chunk(delta: dict[str, Any], finish: str | None = None) -> tuple[None, dict[str, Any]]:
        choice = {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}
        return None, {"id": ident, "object": "chat.completion.chunk", "created": 0, "model": model, "choices": [choice]}

    head = [chunk({"role": "assistant", "content": ""})]
    head.extend(chunk({"content": piece}) for piece in _pieces(response.text, size))
    for index, request in enumerate(response.tool_calls):
        opening = {"index": index, "id": request.id, "type": "function", "function": {"name": request.name}}
        head.append(chunk({"tool_calls": [{**opening, "function": {"name": request.name, "arguments": ""}}]}))
        head.extend(
            chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
            for piece in _pieces(_arguments(request), size)
        )
    tail: list[Any] = [chunk({}, _CHAT_STOP.get(response.stop_reason, response.stop_reason))]
    if include_usage:
        usage = {"id": ident, "object": "chat.completion.chunk", "created": 0, "model": model, "choices": []}
        tail.append((None, {**usage, "usage": _chat_usage(response)}))
    tail.append((None, "[DONE]"))
    return head, tail


# -- OpenAI Responses ------------------------------------------------------------


def _responses_items(response: ModelResponse) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = [dict(item) for item in (response.message.meta or {}).get(REASONING, ())]
    if response.text:
        text = {"type": "output_text", "text": response.text, "annotations": []}
        items.append(
            {
                "type": "message",
                "id": f"msg_{next(_ids)}",
                "status": "completed",
                "role": "assistant",
                "content": [text],
            }
        )
    for request in response.tool_calls:
        items.append(
            {
                "type": "function_call",
                "id": f"fc_{next(_ids)}",
                "call_id": request.id,
                "name": request.name,
                "arguments": _arguments(request),
                "status": "completed",
            }
        )
    return items


def _responses_body(response: ModelResponse, model: str, items: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    usage = response.usage
    incomplete = {"max_tokens": "max_output_tokens", "content_filter": "content_filter"}.get(response.stop_reason)
    return {
        "id": f"resp_fake{next(_ids)}",
        "object": "response",
        "created_at": 0,
        "status": "incomplete" if incomplete else "completed",
        "incomplete_details": {"reason": incomplete} if incomplete else None,
        "error": None,
        "model": model,
        "output": _responses_items(response) if items is None else items,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": {
            "input_tokens": usage.input_tokens,
            "input_tokens_details": {"cached_tokens": usage.cached_input_tokens},
            "output_tokens": usage.output_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": usage.input_tokens + usage.output_tokens,
        },
    }


def _responses_frames(response: ModelResponse, model: str, size: int) -> tuple[list[Any], list[Any]]:
    items = _responses_items(response)
    body = _responses_body(response, model, items)
    sequence = itertools.count()

    def event(kind: str, **data: Any) -> tuple[str, dict[str, Any]]:
        return kind, {"type": kind, "sequence_number": next(sequence), **data}

    started = {**body, "status": "in_progress", "output": [], "incomplete_details": None}
    head = [event("response.created", response=started), event("response.in_progress", response=started)]
    for index, item in enumerate(items):
        place = {"output_index": index, "item_id": item["id"]}
        if item["type"] == "message":
            text = item["content"][0]["text"]
            head.append(event("response.output_item.added", output_index=index, item={**item, "content": []}))
            head.append(event("response.content_part.added", **place, content_index=0, part={**item["content"][0]}))
            head.extend(
                event("response.output_text.delta", **place, content_index=0, delta=piece, logprobs=[])
                for piece in _pieces(text, size)
            )
            head.append(event("response.output_text.done", **place, content_index=0, text=text, logprobs=[]))
        elif item["type"] == "reasoning":
            head.append(event("response.output_item.added", output_index=index, item={**item, "summary": []}))
            head.extend(_summary_events(event, place, item["summary"], size))
        else:
            head.append(event("response.output_item.added", output_index=index, item={**item, "arguments": ""}))
            head.extend(
                event("response.function_call_arguments.delta", **place, delta=piece)
                for piece in _pieces(item["arguments"], size)
            )
            head.append(event("response.function_call_arguments.done", **place, arguments=item["arguments"]))
        head.append(event("response.output_item.done", output_index=index, item=item))
    final = "response.incomplete" if body["status"] == "incomplete" else "response.completed"
    return head, [event(final, response=body)]


def _summary_events(
    event: Callable[..., tuple[str, dict[str, Any]]], place: dict[str, Any], summary: list[Any], size: int
) -> list[tuple[str, dict[str, Any]]]:
    """The events streaming a reasoning item's summary parts, as the API sends them before the item is done."""
    sent = []
    for number, part in enumerate(summary):
        where = {**place, "summary_index": number}
        sent.append(event("response.reasoning_summary_part.added", **where, part={**part, "text": ""}))
        sent.extend(
            event("response.reasoning_summary_text.delta", **where, delta=piece)
            for piece in _pieces(part["text"], size)
        )
        sent.append(event("response.reasoning_summary_text.done", **where, text=part["text"]))
        sent.append(event("response.reasoning_summary_part.done", **where, part=part))
    return sent


BODIES: dict[str, Callable[[ModelResponse, str], dict[str, Any]]] = {
    "anthropic": _anthropic_body,
    "chat": _chat_body,
    "responses": _responses_body,
}
"""The JSON body answering a request that did not ask to stream, per API."""


def frames(
    api: str, response: ModelResponse, model: str, request: dict[str, Any], size: int
) -> tuple[list[Any], list[Any]]:
    """The SSE frames answering `request` on `api` with `response`: (head, tail)."""
    if api == "anthropic":
        return _anthropic_frames(response, model, size)
    if api == "chat":
        options = request.get("stream_options")
        include_usage = isinstance(options, dict) and bool(options.get("include_usage"))
        return _chat_frames(response, model, size, include_usage)
    return _responses_frames(response, model, size)
