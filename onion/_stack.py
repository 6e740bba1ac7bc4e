"""Composing layers into one chain per kind of call, built once, and checking what a chain returns."""

from __future__ import annotations

import inspect
import os
import sys
import weakref
from collections.abc import Callable, Iterable, Iterator
from types import CodeType, FunctionType, MethodType
from typing import Any

from ._handlers import Handler as Handler
from ._layers import KINDS, Layer
from .errors import MiddlewareError
from .types import Kind


class Stack:
    """An ordered, reusable list of middleware; the first added is the outermost.

    A stack is itself a middleware: nest it in another stack or agent, and
    every agent that uses it shares its layers (and their state). A change to
    a stack rebuilds the chains of the agents that use it, and only those.
    """

    def __init__(self, *middleware: Any, name: str | None = None) -> None:
        self.name = name
        self.version = 0
        """Bumped when this stack or a stack nested in it changes."""
        self._items: list[Layer | Stack] = []
        self._parents: weakref.WeakSet[Stack] = weakref.WeakSet()
        self.use(*middleware)

    def use(self, *middleware: Any) -> Stack:
        """Append middleware (functions, objects, classes, stacks, layers); returns the stack."""
        for item in middleware:
            if isinstance(item, type):
                item = item()
            if isinstance(item, Stack):
                if item is self or self in item._nested():
                    raise MiddlewareError(f"{item.label} cannot be added to {self.label}: it would contain itself")
                item._parents.add(self)
            self._items.append(item if isinstance(item, (Stack, Layer)) else Layer(item))
        self._changed()
        return self

    @property
    def label(self) -> str:
        """How errors and listings name this stack (never flattens it)."""
        return f"stack {self.name!r}" if self.name else f"stack at {id(self):#x}"

    def _changed(self) -> None:
        self.version += 1
        for parent in list(self._parents):
            parent._changed()

    def _nested(self) -> Iterator[Stack]:
        for item in self._items:
            if isinstance(item, Stack):
                yield item
                yield from item._nested()

    def layers(self, kind: Kind | None = None) -> list[Layer]:
        """The flattened layers, outermost first; only those wrapping `kind` if given."""
        return [layer for layer in self._flatten() if kind is None or kind in layer.wraps]

    def _flatten(self) -> Iterator[Layer]:
        for item in self._items:
            if isinstance(item, Stack):
                yield from item._flatten()
            else:
                yield item

    def compose(
        self,
        kind: Kind,
        terminal: Handler,
        *,
        checked: bool | None = None,
        wrap: Callable[[Layer, str], Callable[..., Any]] | None = None,
    ) -> Handler:
        """Build the chain for `kind` around `terminal`, outermost layer first.

        With `checked` (default: `ONION_CHECKED=1` or `python -X dev`) every
        layer's result is checked as it returns, naming the exact culprit;
        otherwise onion checks only what the whole chain returns, which
        costs nothing per layer. `wrap(layer, kind)`, if given, returns the
        function to run in place of each layer's own (tracing times layers so).
        """
        if checked is None:
            checked = checked_by_default()
        chain = terminal
        for layer in reversed(self.layers(kind)):
            function = layer.wraps[kind] if wrap is None else wrap(layer, kind)
            chain = _checked(layer.name, function, chain, kind) if checked else bind(function, chain)
        return chain

    async def __call__(self, ctx: Any, call_next: Handler) -> Any:
        return await self.compose(ctx.kind, call_next)(ctx)

    def __len__(self) -> int:
        return len(self.layers())

    def __iter__(self) -> Iterator[Layer]:
        return iter(self.layers())

    def __repr__(self) -> str:
        lines = [f"Stack({self.name})" if self.name else "Stack"]
        for kind in KINDS:
            lines.append(f"  {kind + ':':7} {self._listing(kind) or '(none)'}")
        return "\n".join(lines)

    def _listing(self, kind: Kind) -> str:
        """The layers wrapping `kind`, nested stacks shown by name: `log -> shared[retry -> cache]`."""
        names = []
        for item in self._items:
            if isinstance(item, Stack):
                inner = item._listing(kind)
                if inner:
                    names.append(f"{item.name or 'Stack'}[{inner}]")
            elif kind in item.wraps:
                names.append(item.name)
        return " -> ".join(names)


def checked_by_default() -> bool:
    return os.environ.get("ONION_CHECKED", "") not in ("", "0") or sys.flags.dev_mode


_monitoring = getattr(sys, "monitoring", None)  # Python 3.12+


def profiling() -> bool:
    """Whether a profiler is on: one set with `sys.setprofile`, or (Python 3.12+) one registered with
    `sys.monitoring`, as cProfile is from 3.12 on."""
    if sys.getprofile() is not None:
        return True
    return _monitoring is not None and _monitoring.get_tool(_monitoring.PROFILER_ID) is not None


def bind(function: Callable[..., Any], call_next: Handler) -> Handler:
    """Return `ctx -> function(ctx, call_next)` without adding a frame per call.

    A plain function or method taking exactly `(ctx, call_next)` is copied with `call_next` as its second
    parameter's default and a code object of its own (so CPython specialises the call for its one callee;
    shared while a profiler is on, see `profiling`). Other callables get a lambda.
    """
    target = function.__func__ if isinstance(function, MethodType) else function
    positional = 3 if isinstance(function, MethodType) else 2
    if (
        isinstance(target, FunctionType)
        and target.__code__.co_argcount == positional
        and not target.__defaults__
        and not target.__code__.co_flags & inspect.CO_VARARGS
    ):
        code = target.__code__ if profiling() else target.__code__.replace()
        copy = FunctionType(code, target.__globals__, target.__name__, (call_next,), target.__closure__)
        copy.__kwdefaults__ = target.__kwdefaults__
        copy.__qualname__ = target.__qualname__
        return MethodType(copy, function.__self__) if isinstance(function, MethodType) else copy
    return lambda ctx: function(ctx, call_next)


def expected_type(kind: Kind) -> type:
    from ._results import ModelResponse, ToolResult
    from ._run import RunResult

    return {"run": RunResult, "model": ModelResponse, "tools": list, "tool": ToolResult}[kind]


def _checked(name: str, function: Callable[..., Any], call_next: Handler, kind: Kind) -> Handler:
    """A layer wrapped so that its result and its use of `call_next` are checked."""
    expect = expected_type(kind)
    in_flight: set[int] = set()

    async def guarded_next(ctx: Any) -> Any:
        if id(ctx) in in_flight:
            raise concurrent_call_next(f"layer {name}", kind)
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


def concurrent_call_next(who: str, kind: Kind) -> MiddlewareError:
    """The error for a layer that awaited `call_next` while an earlier await for the same call was running."""
    return MiddlewareError(f"{who} awaited call_next concurrently for the same {kind} call")


def bad_result(stack: Stack, kind: Kind, result: Any, *, expected_count: int | None = None) -> MiddlewareError:
    """The error for a fast chain of `stack` whose result is not what a `kind` chain must return.

    Names the culprit when it can be known: the only layer, or the layer that
    returned an un-awaited coroutine; otherwise lists the candidates. For the
    tools kind, `expected_count` is the number of calls in the batch.
    """
    layers = stack.layers(kind)
    if kind == "tools" and isinstance(result, list):
        return MiddlewareError(_bad_batch(layers, result, expected_count))
    return MiddlewareError(blame(layers, kind, result))


def blame(layers: list[Layer], kind: Kind, result: Any) -> str:
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


def wrong_result(name: str, kind: Kind, result: Any) -> str:
    wanted = expected_type(kind).__name__
    if inspect.iscoroutine(result):
        result.close()
        return f"layer {name} returned an un-awaited coroutine; write `return await call_next(ctx)`"
    return f"layer {name} returned {type(result).__name__} {result!r:.80} where a {kind} layer must return {wanted}"


def _bad_batch(layers: list[Layer], results: list[Any], expected_count: int | None) -> str:
    """Why a tools chain's list is not one `ToolResult` per call, naming the tools layers."""
    from ._results import ToolResult

    names = [layer.name for layer in layers]
    if expected_count is not None and len(results) != expected_count:
        return f"the tools layers returned {len(results)} results for {expected_count} calls (layers: {names})"
    index, wrong = next((i, r) for i, r in enumerate(results) if not isinstance(r, ToolResult))
    if inspect.iscoroutine(wrong):
        what = "an un-awaited coroutine (write `await call_next(ctx)`)"
    else:
        what = f"{type(wrong).__name__} {wrong!r:.80}"
    for result in results:
        if inspect.iscoroutine(result):
            result.close()
    return f"the tools layers {names} returned {what} at position {index} where each result must be a ToolResult"


def _code(function: Callable[..., Any]) -> CodeType | None:
    target = getattr(function, "__func__", function)
    return getattr(target, "__code__", None)


def check_model(middleware: Iterable[Any], model: Any) -> None:
    """Give each layer in `middleware` that has `check_model(model)` the agent's model: one that cannot serve it
    raises (`budget` without a price for it). A class is made when it is added: its layer checks at its first call."""
    for item in middleware:
        if isinstance(item, Stack):
            check_model(item.layers(), model)
            continue
        source = item.source if isinstance(item, Layer) else item
        check = None if isinstance(source, type) else getattr(source, "check_model", None)
        if callable(check):
            check(model)
