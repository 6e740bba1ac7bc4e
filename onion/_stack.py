"""Composing middleware into one chain per kind of call, built once."""

from __future__ import annotations

import functools
import inspect
import os
import sys
import typing
from collections.abc import Awaitable, Callable, Iterable, Iterator
from types import CodeType, FunctionType, MethodType
from typing import Any, ClassVar

from ._calls import Call, ModelCall, Run, ToolBatch, ToolCall
from .errors import MiddlewareError

Handler = Callable[[Any], Awaitable[Any]]
"""`call_next`: takes the context, returns an awaitable of the result."""

KINDS = ("run", "model", "tools", "tool")
_KIND_OF_CLASS: dict[type, tuple[str, ...]] = {
    Run: ("run",),
    ModelCall: ("model",),
    ToolBatch: ("tools",),
    ToolCall: ("tool",),
    Call: KINDS,
}
_METHODS = {"run": "wrap_run", "model": "wrap_model", "tools": "wrap_tools", "tool": "wrap_tool"}


class Layer:
    """One middleware of a stack, with the function it runs for each kind it wraps."""

    __slots__ = ("name", "source", "wraps")

    def __init__(self, source: Any) -> None:
        self.source = source
        self.name = _name_of(source)
        self.wraps: dict[str, Callable[..., Any]] = _resolve(source, self.name)

    def __repr__(self) -> str:
        return f"<Layer {self.name} wraps {', '.join(self.wraps)}>"


class Stack:
    """An ordered, reusable list of middleware; the first added is the outermost.

    A stack is itself a middleware: nest it in another stack or agent, and
    every agent that uses it shares its layers (and their state).
    """

    generation: ClassVar[int] = 0
    """Bumped whenever any stack changes, so agents rebuild their chains."""

    def __init__(self, *middleware: Any, name: str | None = None) -> None:
        self.name = name
        self._items: list[Layer | Stack] = []
        self.use(*middleware)

    def use(self, *middleware: Any) -> Stack:
        """Append middleware (functions, objects, classes, stacks, layers); returns the stack."""
        for item in middleware:
            if isinstance(item, type):
                item = item()
            self._items.append(item if isinstance(item, (Stack, Layer)) else Layer(item))
        Stack.generation += 1
        return self

    def layers(self, kind: str | None = None) -> list[Layer]:
        """The flattened layers, outermost first; only those wrapping `kind` if given."""
        return [layer for layer in self._flatten() if kind is None or kind in layer.wraps]

    def _flatten(self, seen: tuple[Stack, ...] = ()) -> Iterator[Layer]:
        if self in seen:
            raise MiddlewareError(f"stack {self!r} contains itself")
        for item in self._items:
            if isinstance(item, Stack):
                yield from item._flatten((*seen, self))
            else:
                yield item

    def compose(self, kind: str, terminal: Handler, *, checked: bool | None = None) -> Handler:
        """Build the chain for `kind` around `terminal`, outermost layer first.

        With `checked` (default: `ONION_CHECKED=1` or `python -X dev`) every
        layer's result is checked as it returns, naming the exact culprit;
        otherwise onion checks only what the whole chain returns, which
        costs nothing per layer.
        """
        if checked is None:
            checked = checked_by_default()
        chain = terminal
        for layer in reversed(self.layers(kind)):
            function = layer.wraps[kind]
            chain = _checked(layer.name, function, chain, kind) if checked else bind(function, chain)
        return chain

    async def __call__(self, ctx: Call, call_next: Handler) -> Any:
        return await self.compose(ctx.kind, call_next)(ctx)

    def __len__(self) -> int:
        return len(self.layers())

    def __iter__(self) -> Iterator[Layer]:
        return iter(self.layers())

    def __repr__(self) -> str:
        lines = [f"Stack({self.name})" if self.name else "Stack"]
        for kind in KINDS:
            names = [layer.name for layer in self.layers(kind)]
            lines.append(f"  {kind + ':':7} {' -> '.join(names) if names else '(none)'}")
        return "\n".join(lines)


def checked_by_default() -> bool:
    return os.environ.get("ONION_CHECKED", "") not in ("", "0") or sys.flags.dev_mode


def bind(function: Callable[..., Any], call_next: Handler) -> Handler:
    """Return `ctx -> function(ctx, call_next)` without adding a frame per call.

    For a plain function or method taking exactly `(ctx, call_next)`, the
    result is a copy of the function with `call_next` as the default of its
    second parameter, so calling the next layer costs one frame: its own.
    Each copy gets its own code object, so CPython specialises each call
    site for the one callee it always sees. Other callables get a lambda.
    """
    target = function.__func__ if isinstance(function, MethodType) else function
    positional = 3 if isinstance(function, MethodType) else 2
    if (
        isinstance(target, FunctionType)
        and target.__code__.co_argcount == positional
        and not target.__defaults__
        and not target.__code__.co_flags & inspect.CO_VARARGS
    ):
        code = target.__code__.replace()
        copy = FunctionType(code, target.__globals__, target.__name__, (call_next,), target.__closure__)
        copy.__kwdefaults__ = target.__kwdefaults__
        copy.__qualname__ = target.__qualname__
        return MethodType(copy, function.__self__) if isinstance(function, MethodType) else copy
    return lambda ctx: function(ctx, call_next)


def expected_type(kind: str) -> type | tuple[type, ...]:
    from ._calls import ModelResponse, RunResult, ToolResult

    return {"run": RunResult, "model": ModelResponse, "tools": list, "tool": ToolResult}[kind]


def _checked(name: str, function: Callable[..., Any], call_next: Handler, kind: str) -> Handler:
    """A layer wrapped so that its result and its use of `call_next` are checked."""
    expect = expected_type(kind)
    in_flight: set[int] = set()

    async def guarded_next(ctx: Any) -> Any:
        if id(ctx) in in_flight:
            raise MiddlewareError(f"layer {name} awaited call_next concurrently for the same {kind} call")
        in_flight.add(id(ctx))
        try:
            return await call_next(ctx)
        finally:
            in_flight.discard(id(ctx))

    async def checked(ctx: Any) -> Any:
        result = await function(ctx, guarded_next)
        if not isinstance(result, expect):
            raise MiddlewareError(wrong_result(name, kind, result))
        return result

    return checked


def wrong_result(name: str, kind: str, result: Any) -> str:
    expect = expected_type(kind)
    wanted = expect.__name__ if isinstance(expect, type) else " or ".join(t.__name__ for t in expect)
    if inspect.iscoroutine(result):
        result.close()
        return f"layer {name} returned an un-awaited coroutine; write `return await call_next(ctx)`"
    return f"layer {name} returned {type(result).__name__} {result!r:.80} where a {kind} layer must return {wanted}"


def blame(layers: list[Layer], kind: str, result: Any) -> str:
    """Name the layer of a fast chain that returned `result` of the wrong type."""
    if inspect.iscoroutine(result):
        codes: list[CodeType | None] = [_code(layer.wraps[kind]) for layer in layers]
        if result.cr_code in codes:
            index = codes.index(result.cr_code)
            culprit = layers[index - 1].name if index else "the outermost layer"
            return wrong_result(culprit, kind, result)
        return wrong_result(layers[-1].name if layers else "?", kind, result)
    if len(layers) == 1:
        return wrong_result(layers[0].name, kind, result)
    names = ", ".join(layer.name for layer in layers)
    return (
        wrong_result(f"one of [{names}]", kind, result)
        + "; run with ONION_CHECKED=1 (or python -X dev) to name the exact layer"
    )


def _code(function: Callable[..., Any]) -> CodeType | None:
    target = getattr(function, "__func__", function)
    return getattr(target, "__code__", None)


def _name_of(source: Any) -> str:
    if isinstance(source, (FunctionType, MethodType)):
        return source.__qualname__.replace(".<locals>", "")
    if isinstance(source, functools.partial):
        return f"partial({_name_of(source.func)})"
    name = getattr(source, "name", None)
    return name if isinstance(name, str) else type(source).__name__


def _resolve(source: Any, name: str) -> dict[str, Callable[..., Any]]:
    """Which kinds `source` wraps, and the function to call for each.

    An object with `wrap_*` methods may also have `wrap_only` (a collection of
    kind names): only those of its methods are used, so a configured-off
    method costs nothing and is not listed.
    """
    methods = {kind: getattr(source, method) for kind, method in _METHODS.items() if hasattr(source, method)}
    only = getattr(source, "wrap_only", None) if methods else None
    if only is not None:
        methods = {kind: method for kind, method in methods.items() if kind in only}
    for kind, method in methods.items():
        _check_parameters(method, f"{name}.{_METHODS[kind]}")
    if methods:
        return methods
    if not callable(source):
        raise TypeError(
            f"{name!r} is not a middleware: pass an `async def mw(ctx, call_next)`, "
            "an object with wrap_run/wrap_model/wrap_tools/wrap_tool methods, or a Stack"
        )
    return {kind: source for kind in _kinds_of(source, name)}


def _kinds_of(function: Callable[..., Any], name: str) -> tuple[str, ...]:
    """The kinds named by the annotation of the first parameter (all kinds if none)."""
    target = function if inspect.isfunction(function) or inspect.ismethod(function) else type(function).__call__
    parameters = _check_parameters(function, name)
    if not parameters or parameters[0].annotation is inspect.Parameter.empty:
        return KINDS
    try:
        hints = typing.get_type_hints(target)
        annotation: Any = hints.get(parameters[0].name, parameters[0].annotation)
    except Exception:
        annotation = parameters[0].annotation
    kinds = _kinds_of_annotation(annotation)
    if not kinds:
        raise TypeError(f"middleware {name}: cannot tell which calls it wraps from the annotation {annotation!r}")
    return tuple(kind for kind in KINDS if kind in kinds)


def _check_parameters(function: Callable[..., Any], name: str) -> list[inspect.Parameter]:
    """The parameters of `function`; a `TypeError` naming it unless it can be called as `(ctx, call_next)`."""
    try:
        parameters = list(inspect.signature(function).parameters.values())
    except (TypeError, ValueError):
        return []
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(positional) < 2 and not any(p.kind is p.VAR_POSITIONAL for p in parameters):
        raise TypeError(f"middleware {name} must take (ctx, call_next)")
    return parameters


def _kinds_of_annotation(annotation: Any) -> set[str]:
    if isinstance(annotation, str):
        named = {kind for cls, kinds in _KIND_OF_CLASS.items() for kind in kinds if cls.__name__ in _words(annotation)}
        return named or (set(KINDS) if annotation in ("Any", "object") else set())
    if annotation is Any or annotation is object:
        return set(KINDS)
    if isinstance(annotation, type):
        for cls, kinds in _KIND_OF_CLASS.items():
            if issubclass(annotation, cls):
                return set(kinds)
        return set()
    found: set[str] = set()
    for argument in typing.get_args(annotation):
        if argument is not type(None):
            found |= _kinds_of_annotation(argument)
    return found


def _words(text: str) -> Iterable[str]:
    return text.replace("|", " ").replace("[", " ").replace("]", " ").replace(",", " ").replace(".", " ").split()
