"""The fake server's view of tool names and structured output fields: where each API carries them, what it refuses.

Tool names must match `^[a-zA-Z0-9_-]{1,64}$` on every API (a 400 otherwise).

Anthropic: `output_config.format`; Chat Completions: `response_format`;
Responses: `text.format`. A malformed field is answered with a 400, as the
real APIs do: a format that is not `json_schema` with a schema object, an
OpenAI format without a valid `name`, an Anthropic schema with an object not
closed by `additionalProperties: false`, a strict OpenAI schema whose
objects are not closed or do not require every property, a `$ref` that
names no definition of the schema, and an Anthropic schema that is recursive.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def output_format(api: str | None, body: Any) -> dict[str, Any] | None:
    """The field carrying the schema in a request body of `api`, or None."""
    if not isinstance(body, dict):
        return None
    if api == "anthropic":
        holder = body.get("output_config")
        found = holder.get("format") if isinstance(holder, dict) else None
    elif api == "chat":
        found = body.get("response_format")
    elif api == "responses":
        holder = body.get("text")
        found = holder.get("format") if isinstance(holder, dict) else None
    else:
        return None
    return found if isinstance(found, dict) else None


def format_problem(api: str | None, body: Any) -> str | None:
    """Why the real API would refuse this request's structured output field (400), or None."""
    found = output_format(api, body)
    if found is None or found.get("type") in ("text", "json_object"):
        return None
    where = {"anthropic": "output_config.format", "chat": "response_format", "responses": "text.format"}[str(api)]
    if found.get("type") != "json_schema":
        return f"{where}.type: expected 'json_schema', got {found.get('type')!r}"
    settings = found.get("json_schema") if api == "chat" else found
    if not isinstance(settings, dict):
        return f"{where}.json_schema: required"
    schema = settings.get("schema")
    if not isinstance(schema, dict):
        return f"{where}: 'schema' must be a JSON schema object"
    if api != "anthropic" and not _NAME.match(str(settings.get("name", ""))):
        return f"{where}: 'name' must match ^[a-zA-Z0-9_-]{{1,64}}$, got {settings.get('name')!r}"
    for path, ref in _refs(schema, "schema"):
        if not _resolves(schema, ref):
            return f"{where}: {path}: '$ref' {ref!r} names no definition in the schema"
        if api == "anthropic" and _refers_back(schema, ref):
            return f"{where}: {path}: recursive schemas are not supported ({ref!r} refers back to itself)"
    strict = api == "anthropic" or settings.get("strict") is True
    if strict:
        for path, node in _objects(schema, "schema"):
            if node.get("additionalProperties") is not False:
                return f"{where}: {path}: 'additionalProperties' must be explicitly set to false for objects"
            if api != "anthropic" and sorted(node.get("required", [])) != sorted(node.get("properties", {})):
                return f"{where}: {path}: 'required' must list every key in 'properties' (strict mode)"
    return None


def tool_name_problem(api: str | None, body: Any) -> str | None:
    """Why the real API would refuse a tool name in this request (400), or None."""
    tools = body.get("tools") if isinstance(body, dict) else None
    if api is None or not isinstance(tools, list):
        return None
    for index, offered in enumerate(tools):
        if not isinstance(offered, dict) or offered.get("type") not in (None, "function", "custom"):
            continue  # a server tool (web search and the like) has a type and a name of the API's own
        function = offered.get("function") if api == "chat" else offered
        name = function.get("name") if isinstance(function, dict) else None
        where = {"anthropic": f"tools.{index}.name", "chat": f"tools[{index}].function.name"}.get(
            api, f"tools[{index}].name"
        )
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            return f"{where}: String should match pattern '^[a-zA-Z0-9_-]{{1,64}}$', got {name!r}"
    return None


def _refs(node: Any, path: str) -> Iterator[tuple[str, str]]:
    """Every `$ref` within `node`, with its path."""
    if isinstance(node, list):
        for index, item in enumerate(node):
            yield from _refs(item, f"{path}.{index}")
    elif isinstance(node, dict):
        if "$ref" in node:
            yield path, str(node["$ref"])
        for key, value in node.items():
            if key not in ("enum", "const", "default", "examples"):
                yield from _refs(value, f"{path}.{key}")


def _resolves(schema: dict[str, Any], ref: str) -> bool:
    return ref.startswith("#") and isinstance(_target(schema, ref), dict)


def _target(schema: dict[str, Any], ref: str) -> Any:
    node: Any = schema
    for part in ref.removeprefix("#").split("/")[1:]:
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def _refers_back(schema: dict[str, Any], ref: str) -> bool:
    """Whether the definition `ref` names leads back to `ref` through `$ref`s."""
    seen, pending = {ref}, [ref]
    while pending:
        for _, inner in _refs(_target(schema, pending.pop()), ""):
            if inner == ref:
                return True
            if inner not in seen and _resolves(schema, inner):
                seen.add(inner)
                pending.append(inner)
    return False


def _objects(node: Any, path: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every object schema within `node`, with its path."""
    if isinstance(node, list):
        for index, item in enumerate(node):
            yield from _objects(item, f"{path}.{index}")
    elif isinstance(node, dict):
        if node.get("type") == "object":
            yield path, node
        for key, value in node.items():
            if key not in ("enum", "const", "default", "examples"):
                yield from _objects(value, f"{path}.{key}")
