"""`OutputSchema`: what onion knows about one `output_type` (its validator, JSON schema, strict form, name).

Built once per type (`output_schema(T)` is memoized) and shared by the agent
loop, which validates final answers, and the providers, which send the schema.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterator
from typing import Any

import pydantic
import pydantic_core

from .errors import OutputValidationError

WRAPPER = "response"
"""The one property a non-object output (a list, a union, a number) is wrapped in: providers want an object root."""

_FENCE = re.compile(r"^\s*```[\w-]*\s*\n(.*?)\n?```\s*$", re.DOTALL)
_OPEN_FENCE = re.compile(r"^\s*```[\w-]*\s*\n")
_NAME = re.compile(r"[^a-zA-Z0-9_-]+")
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_NUMBER_AT_END = re.compile(r"-?\d[\d.eE+-]*\Z")


class OutputSchema:
    """One output type, ready to send and to validate.

    `schema` is the JSON schema providers receive (a non-object type wrapped
    as `{"response": ...}`, `wrapped` true); `strict` is that schema adapted
    to strict mode (every object closed with `additionalProperties: false`,
    every property required, defaults dropped), or `None` when the type has
    open-ended objects (`dict` fields, `Any`) that strict mode cannot express.
    `recursive` says the type contains itself (a `$ref` leads back to its own
    definition): Anthropic's strict mode refuses such schemas. `name` is a
    provider-safe name for it.
    """

    __slots__ = ("adapter", "key", "name", "recursive", "schema", "strict", "type", "wrapped")

    def __init__(self, output_type: Any) -> None:
        try:
            self.adapter: pydantic.TypeAdapter[Any] = pydantic.TypeAdapter(output_type)
            inner = self.adapter.json_schema()
        except (pydantic.PydanticSchemaGenerationError, pydantic.PydanticUserError, TypeError) as error:
            raise TypeError(
                f"output_type={output_type!r} is not a type pydantic can validate and describe as JSON schema "
                f"({error}); use a pydantic model, a dataclass, list[...] of those, a union, or a plain type"
            ) from None
        self.type = output_type
        if inner.keys() == {"$ref", "$defs"}:  # a recursive type: pydantic names it at the root by reference
            inner = {**_target(inner, inner["$ref"]), "$defs": inner["$defs"]}
        self.wrapped = inner.get("type") != "object"
        if self.wrapped:
            defs = inner.pop("$defs", None)
            inner = {"type": "object", "properties": {WRAPPER: inner}, "required": [WRAPPER]}
            if defs is not None:
                inner["$defs"] = defs
        self.schema: dict[str, Any] = inner
        self.strict = strict_schema(inner)
        self.recursive = any(_refers_back(inner, ref) for ref in set(_refs(inner)))
        title = inner.get("title") if not self.wrapped else getattr(output_type, "__name__", None)
        self.name = _NAME.sub("_", str(title or "output"))[:64]
        self.key = json.dumps([repr(output_type), inner], sort_keys=True)
        """What a cache key takes from this type: its repr and schema, as canonical JSON."""

    def validate(self, text: str) -> Any:
        """The value `text` (JSON, optionally inside a Markdown code fence) stands for.

        Raises `pydantic.ValidationError` (invalid JSON included). A wrapped
        type accepts the value bare too, not only as `{"response": value}`.
        """
        fenced = _FENCE.match(text)
        if fenced:
            text = fenced.group(1)
        if not self.wrapped:
            return self.adapter.validate_json(text)
        try:
            value = pydantic_core.from_json(text)  # nesting past its limit is a ValueError, not RecursionError
        except ValueError:
            return self.adapter.validate_json(text)  # raises pydantic's "Invalid JSON" error
        if isinstance(value, dict) and value.keys() == {WRAPPER}:
            value = value[WRAPPER]
        return self.adapter.validate_json(json.dumps(value))

    def validate_partial(self, text: str) -> Any:
        """The value the start of a JSON answer stands for so far (pydantic's partial validation).

        A number the text ends in is left out (more digits may follow); the last string is kept as far as it
        came. Raises `ValueError` (`pydantic.ValidationError` included) while it is not a value yet.
        """
        text = _without_growing_number(_OPEN_FENCE.sub("", text, count=1))
        value = pydantic_core.from_json(text, allow_partial="trailing-strings")
        if self.wrapped and isinstance(value, dict) and value.keys() == {WRAPPER}:
            value = value[WRAPPER]
        return self.adapter.validate_python(value, experimental_allow_partial="trailing-strings")

    def feedback(self, error: pydantic.ValidationError) -> str:
        """The message that tells the model why its answer failed and what to send instead."""
        problems = "\n".join(f"- {_location(e)}: {e['msg']}" for e in error.errors(include_url=False))
        return (
            f"Your answer is not valid output:\n{problems}\n"
            f"Answer again with only a JSON value matching this schema: {json.dumps(self.schema)}"
        )

    def __repr__(self) -> str:
        return f"<OutputSchema {self.name} strict={self.strict is not None}>"


def _without_growing_number(text: str) -> str:
    """`text` without the number it ends in, outside any string (`{"population": 210` may go on to 2102650)."""
    if not text[-1:].isdigit():
        return text
    outside = _STRING.sub("", text)
    if '"' in outside:  # an unclosed string: the digits are its text
        return text
    number = _NUMBER_AT_END.search(outside)
    return text[: len(text) - len(number[0])] if number else text


def _location(error: Any) -> str:
    return ".".join(str(part) for part in error["loc"]) or "answer"


@functools.lru_cache(maxsize=256)
def _cached(output_type: Any) -> OutputSchema:
    return OutputSchema(output_type)


def output_schema(output_type: Any) -> OutputSchema:
    """The `OutputSchema` of `output_type`, built once per type (for a hashable type).

    Raises `TypeError` naming the type when pydantic cannot validate it.
    """
    try:
        return _cached(output_type)
    except TypeError as error:
        if "unhashable" not in str(error):
            raise
    return OutputSchema(output_type)


def strict_schema(schema: dict[str, Any]) -> dict[str, Any] | None:
    """`schema` adapted to strict structured output, or `None` when it cannot be.

    Objects get `additionalProperties: false` and every property in
    `required` (an optional field stays nullable through its own `anyOf`);
    `default`s are dropped; a `$ref` with sibling keywords (a description) is
    inlined, or, when its definition refers back to it (a recursive type),
    becomes `anyOf: [{"$ref": ...}]` beside them. An object with open-ended
    properties (a `dict`, `Any`) has no strict form.
    """
    try:
        strict: dict[str, Any] = _strict(json.loads(json.dumps(schema)), schema)
        return strict
    except _NotStrict:
        return None


class _NotStrict(Exception):
    pass


def _strict(node: Any, root: dict[str, Any]) -> Any:
    if isinstance(node, list):
        return [_strict(item, root) for item in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node and len(node) > 1:
        ref = node.pop("$ref")
        node = {"anyOf": [{"$ref": ref}], **node} if _refers_back(root, ref) else {**_resolve(root, ref), **node}
    node.pop("default", None)
    if node.get("type") == "object" or "properties" in node:
        extra = node.get("additionalProperties")
        if extra not in (None, False) or "properties" not in node:
            raise _NotStrict
        node["additionalProperties"] = False
        node["required"] = list(node["properties"])
    if node.get("type") is None and not ({"$ref", "anyOf", "allOf", "enum", "const"} & node.keys()):
        raise _NotStrict  # `Any`: a value of any shape
    return {key: value if key in ("enum", "const") else _strict_child(key, value, root) for key, value in node.items()}


def _strict_child(key: str, value: Any, root: dict[str, Any]) -> Any:
    if key in ("properties", "$defs"):
        return {name: _strict(child, root) for name, child in value.items()}
    if key in ("items", "anyOf", "allOf", "oneOf", "prefixItems"):
        return _strict(value, root)
    return value


def _resolve(root: dict[str, Any], ref: str) -> dict[str, Any]:
    resolved: dict[str, Any] = json.loads(json.dumps(_target(root, ref)))
    return resolved


def _target(root: dict[str, Any], ref: str) -> Any:
    node: Any = root
    for part in ref.removeprefix("#/").split("/"):
        node = node[part]
    return node


def _refers_back(root: dict[str, Any], ref: str) -> bool:
    """Whether the definition `ref` names refers to `ref` again, directly or through other definitions."""
    seen, pending = {ref}, [ref]
    while pending:
        for inner in _refs(_target(root, pending.pop())):
            if inner == ref:
                return True
            if inner not in seen:
                seen.add(inner)
                pending.append(inner)
    return False


def _refs(node: Any) -> Iterator[str]:
    if isinstance(node, list):
        for item in node:
            yield from _refs(item)
    elif isinstance(node, dict):
        if isinstance(node.get("$ref"), str):
            yield node["$ref"]
        for key, value in node.items():
            if key not in ("enum", "const", "default"):
                yield from _refs(value)


def invalid_output(
    agent: str,
    schema: OutputSchema,
    text: str,
    error: pydantic.ValidationError,
    answers: int,
    retries: int,
    messages: Any,
) -> OutputValidationError:
    """The error of a final answer that is still not a valid `schema` after `answers` answers (`output_retries`)."""
    errors = error.errors(include_url=False)
    problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'answer'}: {e['msg']}" for e in errors)
    return OutputValidationError(
        f"{agent}: the final answer is not a valid {schema.name} after {answers} answers "
        f"(output_retries={retries}): {problems}",
        errors=list(errors),
        text=text,
        messages=messages,
    )
