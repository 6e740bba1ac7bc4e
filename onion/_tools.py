"""`@tool`: functions the model can call, with a JSON schema from their signature."""

from __future__ import annotations

import asyncio
import inspect
import json
import re
import warnings
from collections.abc import Callable
from typing import Any, Literal, overload

import pydantic
import pydantic_core

from ._content import MEDIA, Part
from ._text import valid_text as valid_text
from ._threads import ToolThreads, default_tool_threads
from .errors import ToolAborted, ToolArgumentsError

CONTEXTS: set[type] = set()
"""The classes a tool's parameter may be annotated with to be passed the call: `onion.ToolCall` (which
`onion._calls`, a floor above this one, adds)."""


class Tool:
    """A function the model may call: `name`, `description`, `parameters` (JSON schema).

    Calling the tool object calls the function. A parameter annotated `ToolCall` is passed the current call,
    not shown to the model. `idempotent`: a recovered run may run it again (`docs/durable.md`).
    `untrusted`: its results are outside content (a web page, an e-mail, a file); `read_only`: it changes
    nothing, so `middleware.contain` lets it run after outside content (`docs/security.md`).
    A call that started and has no recorded result after a crash (`docs/durable.md`, "In doubt"): `in_doubt="ask"`
    pauses the recovered run for a person; `reconcile(call)` (sync or async) asks the outside world, answering the
    `ToolResult` of what happened or None to run it again.
    """

    __slots__ = (
        "_context_parameter",
        "_model",
        "description",
        "function",
        "idempotent",
        "in_doubt",
        "is_async",
        "name",
        "parameters",
        "read_only",
        "reconcile",
        "takes_context",
        "untrusted",
    )

    def __init__(
        self,
        function: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        idempotent: bool = False,
        untrusted: bool = False,
        read_only: bool = False,
        in_doubt: Literal["ask"] | None = None,
        reconcile: Callable[[Any], Any] | None = None,
    ):
        self.function = function
        self.idempotent = idempotent
        self.in_doubt, self.reconcile = in_doubt, reconcile
        if in_doubt not in (None, "ask") or (reconcile is not None and not callable(reconcile)):
            raise ValueError(f"tool {name or function.__name__}: in_doubt is 'ask' or None, reconcile a function")
        if idempotent and (in_doubt or reconcile):
            raise TypeError(
                f"tool {name or function.__name__}: an idempotent tool runs again after a crash, so in_doubt= and "
                "reconcile= (for a tool that must not) do not apply: give one or the other"
            )
        self.untrusted = untrusted
        self.read_only = read_only
        self.name = checked_name(name or function.__name__)
        self.description = description if description is not None else _description(function)
        self.is_async = inspect.iscoroutinefunction(function)
        self._context_parameter, self._model = _arguments_model(function, self.name)
        self.parameters: dict[str, Any] = self._model.model_json_schema()
        self.parameters.pop("title", None)
        self.takes_context = self._context_parameter is not None
        """True when the result may depend on the run, not only the arguments: set for a
        `ToolCall` parameter; set it yourself for a tool that finds its user another way.
        `cache` keeps such tools out unless given a `key`."""

    def validate(self, args: dict[str, Any]) -> dict[str, Any]:
        """The arguments converted to the declared types.

        Raises `ToolArgumentsError` saying which argument is wrong and why.
        """
        try:
            model = self._model.__pydantic_validator__.validate_python(args)
        except pydantic.ValidationError as error:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}"
                + (f" (got {e['input']!r:.60})" if e["type"] != "missing" else "")
                for e in error.errors()
            )
            raise ToolArgumentsError(f"invalid arguments for tool {self.name}: {problems}") from None
        fields: dict[str, Any] = model.__dict__  # extra="forbid": exactly the declared fields
        return fields  # the model itself is dropped: its dict is the caller's own

    async def invoke(self, args: dict[str, Any], call: Any = None, threads: ToolThreads | None = None) -> Any:
        """Run the function with validated `args`; sync functions run on `threads` (default: onion's own).

        A `BaseException` other than cancellation becomes `ToolAborted` (`docs/tools.md`); if onion stops
        waiting, `call.cancelled` is set.
        """
        if self._context_parameter is not None:
            args = {**args, self._context_parameter: call}
        try:
            if self.is_async:
                return await self.function(**args)
            if call is not None and self._context_parameter is not None:
                call.cancelled  # noqa: B018  made here, before a thread may read it
            value = await (threads or default_tool_threads).run(self.function, args, call)
            if inspect.isawaitable(value):
                value = await value
            return value
        except asyncio.CancelledError:
            if call is not None:
                call.cancelled.set()
            raise
        except Exception:
            raise
        except BaseException as error:
            raise self.aborted(error) from error

    def aborted(self, error: BaseException) -> ToolAborted:
        """The error a `BaseException` other than cancellation (`SystemExit`, ...) from the tool becomes."""
        return ToolAborted(f"tool {self.name} raised {type(error).__name__}: {error}")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.function(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<Tool {self.name}>"


@overload
def tool(function: Callable[..., Any], /) -> Tool: ...
@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    idempotent: bool = False,
    untrusted: bool = False,
    read_only: bool = False,
    in_doubt: Literal["ask"] | None = None,
    reconcile: Callable[[Any], Any] | None = None,
) -> Callable[[Callable[..., Any]], Tool]: ...
def tool(
    function: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    idempotent: bool = False,
    untrusted: bool = False,
    read_only: bool = False,
    in_doubt: Literal["ask"] | None = None,
    reconcile: Callable[[Any], Any] | None = None,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Make a function (sync or async) a tool: `@tool`, or `@tool(name=..., description=..., idempotent=...,
    untrusted=..., read_only=..., in_doubt=..., reconcile=...)` (see `Tool`)."""
    if function is not None:
        return Tool(function)
    return lambda fn: Tool(
        fn,
        name=name,
        description=description,
        idempotent=idempotent,
        untrusted=untrusted,
        read_only=read_only,
        in_doubt=in_doubt,
        reconcile=reconcile,
    )


def as_tool(item: Tool | Callable[..., Any]) -> Tool:
    """`item` as a `Tool`; a `TypeError` naming it when `tools=` cannot take it."""
    if isinstance(item, Tool):
        return item
    if callable(item) and hasattr(item, "__name__") and not isinstance(item, type):
        return Tool(item)
    if hasattr(item, "as_tool"):
        hint = "pass agent.as_tool() for an agent"
    elif isinstance(item, type):
        hint = f"got the class {item.__name__}: pass a function or a method"
    elif callable(item):
        hint = f"got {item!r}: pass Tool(item.__call__, name=...)"
    else:
        hint = f"got {item!r}"
    raise TypeError(
        "tools= takes functions (plain or @tool), Tool objects (Tool(fn), agent.as_tool()) and MCP servers "
        f"(onion.mcp.MCPServer); {hint}"
    )


def render(value: Any) -> str | list[Part]:
    """What the model reads for a tool's return value (valid UTF-8: see `valid_text`).

    An `Image` or `Document`, or a list holding one, is kept as parts (text
    parts of the list as they are, other items rendered as text).
    """
    if isinstance(value, str):
        return value if value.isascii() else valid_text(value)
    if type(value) is int:  # what JSON writes for it, without the serializer
        return str(value)
    if value is None:
        return ""
    if isinstance(value, MEDIA):
        return [value]
    if isinstance(value, list) and any(isinstance(item, MEDIA) for item in value):
        return [item if isinstance(item, MEDIA) else str(render(item)) for item in value]
    try:
        return pydantic_core.to_json(value).decode()
    except pydantic_core.PydanticSerializationError:
        return json.dumps(value, default=str)


TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
"""The tool names both provider APIs take; they answer any other with a 400 that names no tool."""
_NOT_IN_NAME = re.compile(r"[^a-zA-Z0-9_-]")


def checked_name(name: str) -> str:
    """`name`, if the providers take it (`TOOL_NAME`); else a `ValueError` naming it, the rule and a name to use."""
    if TOOL_NAME.fullmatch(name):
        return name
    raise ValueError(
        f"tool name {name!r} is refused by the model APIs: a tool name must match {TOOL_NAME.pattern} "
        f"(letters, digits, _ and -, at most 64); pass name={safe_name(name)!r}"
    )


def safe_name(name: str) -> str:
    """`name` with each character the providers refuse replaced by `_`, cut to 64 characters."""
    return _NOT_IN_NAME.sub("_", name)[:64] or "tool"


def _description(function: Callable[..., Any]) -> str:
    doc = inspect.getdoc(function) or ""
    return doc.split("\n\n")[0].strip()


def _arguments_model(function: Callable[..., Any], name: str) -> tuple[str | None, type[pydantic.BaseModel]]:
    hints = _hints(function)
    fields: dict[str, Any] = {}
    context_parameter = None
    for parameter in inspect.signature(function).parameters.values():
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            raise TypeError(f"tool {name}: *args and **kwargs cannot be described to a model")
        if parameter.kind is parameter.POSITIONAL_ONLY:
            raise TypeError(
                f"tool {name}: the parameter {parameter.name!r} is positional-only (before `/`); "
                "tools are called with keyword arguments"
            )
        annotation = hints.get(parameter.name, Any)
        if annotation in CONTEXTS:
            context_parameter = parameter.name
            continue
        if parameter.name.startswith("_") or parameter.name == "model_config":
            raise TypeError(f"tool {name}: rename the parameter {parameter.name!r}; pydantic cannot take it as a field")
        default = ... if parameter.default is inspect.Parameter.empty else parameter.default
        fields[parameter.name] = (annotation, default)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Field name .* shadows an attribute", UserWarning)
        model = pydantic.create_model(f"{name}_arguments", __config__=pydantic.ConfigDict(extra="forbid"), **fields)
    return context_parameter, model


def _hints(function: Callable[..., Any]) -> dict[str, Any]:
    import typing

    try:
        return typing.get_type_hints(function, include_extras=True)
    except Exception as error:
        raise TypeError(f"tool {function.__name__}: cannot resolve its annotations ({error})") from error
