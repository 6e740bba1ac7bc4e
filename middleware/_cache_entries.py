"""What `cache` keys an entry by and what it stores: request and tool keys, stored responses."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from typing import Any

from onion import Message, ModelCall, ModelResponse, Part, Tool, ToolCall, ToolRequest, Usage, output_schema

from .patterns import SECRET_NAME, SECRETS, scrub


def request_key(call: ModelCall, namespace: str = "", scope: object = None) -> str:
    """The cache key of a model request: stable across processes and dict orderings.

    `scope` is what `cache(key=...)` returned for the call (`None` without one).

    A tool list's part is serialized once per distinct list of `Tool`
    objects (see `_tools_part`); messages and settings on every call. An
    image's or document's bytes enter the key as their SHA-256, never whole.
    """
    ids: dict[str, str] = {}
    messages = []
    for m in call.messages:
        calls = [[_local(ids, c.id), c.name, c.args, c.raw_args] for c in m.tool_calls] if m.tool_calls else []
        entry = (m.role, m.text, calls, _local(ids, m.tool_call_id), m.is_error, m.meta)
        messages.append(entry if m.content is None else (*entry, [_part_key(part) for part in m.content]))
    settings = hashed_credentials(call.settings) if call.settings else None
    head = (5, namespace, scope, model_options(call.model), settings, messages)
    digest = hashlib.sha256(_utf8(_canonical(head)))
    digest.update(_tools_part(call.tools))
    if call.output_type is not str:
        digest.update(_utf8(output_schema(call.output_type).key))
    return digest.hexdigest()


def _part_key(part: Part) -> Any:
    """A message part in a key: text as is, an image's or document's bytes by their SHA-256."""
    if isinstance(part, str):
        return part
    if part.data is None:
        return [type(part).__name__, part.url]
    return [type(part).__name__, part.media_type, hashlib.sha256(part.data).hexdigest()]


_PLAIN = (str, int, float, bool, type(None))


def model_options(model: Any) -> dict[str, Any]:
    """What of `model` decides its answers and who pays for them: its class, its public plain-valued
    attributes, its `base_url`, and a hash of each of its `credentials()`.

    Plain values are str, int, float, bool and None (`AnthropicModel.max_tokens`,
    `OpenAIChatModel.system_role`); clients, lists and private attributes are
    left out. Credentials are never there as such: an attribute named or
    shaped like one (`hashed_credentials`) and each credential of a model
    with a `credentials()` method (the provider models: API key, token,
    organization, a given client's headers) count as `credential_hash`.
    """
    plain = {
        name: value
        for name, value in getattr(model, "__dict__", {}).items()
        if isinstance(value, _PLAIN) and not name.startswith("_")
    }
    plain.setdefault("name", str(getattr(model, "name", model)))
    base_url = getattr(model, "base_url", None)
    if base_url is not None:
        plain["base_url"] = str(base_url)
    plain["class"] = f"{type(model).__module__}.{type(model).__qualname__}"
    options: dict[str, Any] = hashed_credentials(plain)
    credentials = getattr(model, "credentials", None)
    if callable(credentials):
        options["credentials"] = {name: credential_hash(value) for name, value in credentials().items()}
    return options


_CREDENTIAL_PREFIX = b"onion.cache.credential\x00"
"""Puts credential hashes in a domain of their own: no other SHA-256 onion makes equals one."""


def credential_hash(value: str) -> str:
    """How a credential enters a cache key: `sha256:` and the SHA-256 of `value` under a fixed prefix.

    One-way, and equal for equal values: two tenants' keys never share an
    entry, one tenant's calls do.
    """
    return "sha256:" + hashlib.sha256(_CREDENTIAL_PREFIX + _utf8(value)).hexdigest()


def hashed_credentials(value: Any) -> Any:
    """`value` (JSON-like data) with every credential replaced by its `credential_hash`.

    A credential is a value under a name like one (`api_key`, `password`,
    an `Authorization` or `x-api-key` header: `patterns.SECRET_NAME`) or text
    shaped like one (`patterns.SECRETS`: a key, a bearer token, a private
    key, `secret=...`). Containers are rebuilt (tuples become lists).
    """
    if isinstance(value, str):
        if scrub(value, SECRETS) == value:
            return value
        for pattern in SECRETS:
            value = pattern.sub(_hash_match, value)
        return value
    if isinstance(value, dict):
        return {
            key: credential_hash(item if isinstance(item, str) else _canonical(item))
            if isinstance(key, str) and item and SECRET_NAME.search(key)
            else hashed_credentials(item)
            for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return [hashed_credentials(item) for item in value]
    return value


def _hash_match(match: re.Match[str]) -> str:
    return credential_hash(match.group())


def response_contents(message: Message) -> list[Any]:
    """What of a response is stored: its text, tool calls' arguments (parsed and raw) and provider extras."""
    return [message.text, message.meta, [[c.args, c.raw_args] for c in message.tool_calls]]


def holds_sensitive(value: Any) -> bool:
    """True when `value` (text or JSON-like data) holds what `patterns.scrub_value` would hide.

    That is a secret or personal data (`patterns.BUILTIN`: keys, bearer
    credentials, private keys, e-mail addresses, card numbers) in any
    string, or a value under a name like `password`.
    """
    if isinstance(value, str):
        return scrub(value) != value
    if isinstance(value, dict):
        return any(
            (isinstance(name, str) and bool(item) and SECRET_NAME.search(name) is not None)
            or holds_sensitive(name)
            or holds_sensitive(item)
            for name, item in value.items()
        )
    if isinstance(value, list | tuple):
        return any(holds_sensitive(item) for item in value)
    return False


def _local(ids: dict[str, str], call_id: str | None) -> str | None:
    """A tool call id replaced by its order of appearance, so provider-chosen ids don't matter."""
    return None if call_id is None else ids.setdefault(call_id, f"#{len(ids)}")


_canonical = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=repr).encode
"""JSON with sorted keys, unknown values as their `repr`: the key's one serialization."""

_TOOLS_PARTS: dict[tuple[Tool, ...], bytes] = {}
_TOOLS_PARTS_MAX = 256


def _tools_part(tools: Sequence[Tool]) -> bytes:
    """The canonical bytes of a tool list (names, descriptions, schemas), memoized per list of tools.

    Keyed by the `Tool` objects themselves (identity), held strongly while
    memoized so an id is never reused; the memo is emptied past 256 lists.
    A tool's name, description and schema are read when its list is first
    seen: change a `Tool` in place after using it and the key won't notice.
    """
    key = tuple(tools)
    part = _TOOLS_PARTS.get(key)
    if part is None:
        part = _utf8(_canonical([[t.name, t.description, t.parameters] for t in tools]))
        if len(_TOOLS_PARTS) >= _TOOLS_PARTS_MAX:
            _TOOLS_PARTS.clear()
        _TOOLS_PARTS[key] = part
    return part


def tool_key(call: ToolCall, namespace: str = "", scope: object = None) -> str:
    """The cache key of a tool call: its name and arguments, with `namespace` and `scope` as for `request_key`."""
    value = {"ns": namespace, "scope": scope, "tool": call.name, "args": call.args}
    return hashlib.sha256(_utf8(_canonical(value))).hexdigest()


def _utf8(text: str) -> bytes:
    """`text` as UTF-8, a lone surrogate (an undecodable file name) as its own bytes: keys never raise nor collide."""
    return text.encode("utf-8", "surrogatepass")


def encode_response(response: ModelResponse, call: ModelCall) -> str:
    """A response as ASCII JSON text (so any store holds it, lone surrogates included): text, tool calls
    with ids and args, stop reason, model, meta."""
    message = response.message
    return json.dumps(
        {
            "text": message.text,
            "tool_calls": [[c.id, c.name, c.args, c.raw_args] for c in message.tool_calls],
            "meta": message.meta,
            "stop_reason": response.stop_reason,
            "model": response.model or str(getattr(call.model, "name", "")) or None,
        },
        default=repr,
    )


def decode_response(text: str) -> ModelResponse:
    """The cached `ModelResponse` stored as `text`: `cached=True`, zero usage."""
    data = json.loads(text)
    calls = [ToolRequest(id=i, name=n, args=a, raw_args=r) for i, n, a, r in data["tool_calls"]]
    message = Message.assistant(data["text"], calls)
    message.meta = data["meta"]
    return ModelResponse(message, Usage(), data["stop_reason"], model=data["model"], cached=True)
