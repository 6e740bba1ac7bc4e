"""Turning what users pass to `use()` into layers: which kinds each wraps, and with what function."""

from __future__ import annotations

import difflib
import functools
import inspect
import typing
from collections.abc import Callable, Iterable
from types import FunctionType, MethodType
from typing import Any

from ._calls import ModelCall, ToolBatch, ToolCall
from ._run import Call, Run
from .types import KINDS as KINDS

_KIND_OF_CLASS: dict[type, tuple[str, ...]] = {
    Run: ("run",),
    ModelCall: ("model",),
    ToolBatch: ("tools",),
    ToolCall: ("tool",),
    Call: KINDS,
}
METHODS = {"run": "wrap_run", "model": "wrap_model", "tools": "wrap_tools", "tool": "wrap_tool"}


class Layer:
    """One middleware of a stack, with the function it runs for each kind it wraps."""

    __slots__ = ("name", "source", "wraps")

    def __init__(self, source: Any) -> None:
        self.source = source
        self.name = _name_of(source)
        self.wraps: dict[str, Callable[..., Any]] = _resolve(source, self.name)

    def __repr__(self) -> str:
        return f"<Layer {self.name} wraps {', '.join(self.wraps)}>"


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
    method costs nothing and is not listed. A misspelt `wrap_*` method or an
    unknown `wrap_only` name is a `TypeError`.
    """
    _check_wrap_names(source, name)
    methods = {kind: getattr(source, method) for kind, method in METHODS.items() if hasattr(source, method)}
    only = getattr(source, "wrap_only", None)
    if only is not None and not isinstance(source, (FunctionType, MethodType)):
        _check_wrap_only(only, methods, name)
        methods = {kind: method for kind, method in methods.items() if kind in only}
        for kind, method in methods.items():
            _check_parameters(method, f"{name}.{METHODS[kind]}")
        return methods
    for kind, method in methods.items():
        _check_parameters(method, f"{name}.{METHODS[kind]}")
    if methods:
        return methods
    if not callable(source):
        raise TypeError(
            f"{name!r} is not a middleware: pass an `async def mw(ctx, call_next)`, "
            "an object with wrap_run/wrap_model/wrap_tools/wrap_tool methods, or a Stack"
        )
    return {kind: source for kind in _kinds_of(source, name)}


def _check_wrap_names(source: Any, name: str) -> None:
    if isinstance(source, (FunctionType, MethodType, functools.partial)):
        return
    known = {*METHODS.values(), "wrap_only"}
    for attribute in dir(source):
        if attribute.startswith("wrap_") and attribute not in known:
            close = difflib.get_close_matches(attribute, sorted(known), n=1)
            hint = (
                f"; did you mean {close[0]}?"
                if close
                else f"; the methods onion calls are {', '.join(METHODS.values())}"
            )
            raise TypeError(f"middleware {name} has {attribute}, which onion never calls{hint}")


def _check_wrap_only(only: Any, methods: dict[str, Any], name: str) -> None:
    if isinstance(only, str) or not isinstance(only, Iterable):
        raise TypeError(f"{name}.wrap_only must be a collection of kind names such as ('model', 'tool'), not {only!r}")
    for kind in only:
        if kind not in METHODS:
            raise TypeError(f"{name}.wrap_only names {kind!r}, which is not a kind; use some of {', '.join(KINDS)}")
        if kind not in methods:
            raise TypeError(f"{name}.wrap_only names {kind!r} but {name} has no {METHODS[kind]} method")


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
