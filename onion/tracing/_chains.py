"""An agent's chains with tracing wrappers while tracing is on; with tracing off, `Stack.compose` as it is.

Turning tracing on or off replaces `active`; an agent whose chains were
built for another `active` rebuilds them on its next call, so a chain
never checks per call whether tracing is on.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from .. import _chains as core
from .._copies import own_copy
from .._layers import Layer
from .._stack import Handler, Stack
from .._untrusted import untrusted_sources
from ._spans import Span, capturing, current

if TYPE_CHECKING:
    from .._run import Call
    from ..types import Kind


class Exporter(Protocol):
    """Where spans go as they open and close (OpenTelemetry, with `instrument()`)."""

    layers: bool
    """Whether it wants a span per layer."""

    def open(self, span: Span) -> None: ...

    def close(self, span: Span) -> None: ...


class Switch:
    """What tracing is on: an exporter, captures, or both. Replaced, never changed."""

    __slots__ = ("exporter", "layers")

    def __init__(self, exporter: Exporter | None, captures: int) -> None:
        self.exporter = exporter
        self.layers = captures > 0 or (exporter is not None and exporter.layers)
        """Whether chains wrap each layer (a capture shows layers; an exporter may want them)."""

    def compose(self, stack: Stack, kind: Kind, terminal: Handler, checked: bool) -> Handler:
        """The chain for `kind` around `terminal`, traced (the core's `onion._chains.compose` calls this)."""
        return compose(stack, kind, terminal, checked, self)


active: Switch | None = None
"""What tracing is on now; None when it is off."""

_exporter: Exporter | None = None
_captures = 0
_lock = threading.Lock()


def set_exporter(exporter: Exporter | None) -> None:
    """Send spans to `exporter` from now on (None: stop); agents rebuild their chains on their next call."""
    global _exporter
    with _lock:
        _exporter = exporter
        _switch()


def count_capture(change: int) -> None:
    """A capture started (+1) or ended (-1)."""
    global _captures
    with _lock:
        _captures += change
        _switch()


def _switch() -> None:
    global active
    active = core.active = Switch(_exporter, _captures) if _exporter is not None or _captures else None


def compose(stack: Stack, kind: Kind, terminal: Handler, checked: bool, switch: Switch | None) -> Handler:
    """The chain for `kind` around `terminal`: traced per call (and per model request, and per layer) if on."""
    if switch is None:
        return stack.compose(kind, terminal, checked=checked)
    exporter = switch.exporter
    if kind == "model":
        terminal = _traced("request", terminal, exporter)
    elif kind == "tool" and switch.layers:
        terminal = _in_tool_span(terminal)
    wrap = _layer_wrapper(exporter if exporter is not None and exporter.layers else None) if switch.layers else None
    return _traced(kind, stack.compose(kind, terminal, checked=checked, wrap=wrap), exporter)


def _traced(kind: str, chain: Handler, exporter: Exporter | None) -> Handler:
    """`chain` recording a span of `kind` per call, when this call is traced.

    A call is traced when it runs inside a traced one, in a `capture()`, or
    while an exporter is on. A tool call's span keeps its arguments as the
    call was made (`Span.args`), before layers restore or change them.
    """
    tool = kind == "tool"

    async def traced_call(ctx: Any) -> Any:
        parent = current.get()
        roots = capturing.get() if parent is None else None
        if parent is None and roots is None and exporter is None:
            return await chain(ctx)
        span = Span(kind, name_of(kind, ctx), ctx, parent, roots is not None)
        if tool:
            span.args = own_copy(ctx.args)
            if any(message.untrusted for message in ctx.run.messages):
                span.untrusted_before = untrusted_sources(ctx.run.messages)
        if roots is not None:
            roots.append(span)
        token = current.set(span)
        if exporter is not None:
            exporter.open(span)
        try:
            span.result = result = await chain(ctx)
        except BaseException as error:
            span.error = error
            raise
        finally:
            span.end = time.perf_counter_ns()
            current.reset(token)
            if exporter is not None:
                exporter.close(span)
        return result

    return traced_call


def _in_tool_span(terminal: Handler) -> Handler:
    """`terminal` (the tool itself) run with its call's span current, so what the tool notes (`note`,
    `waited`) and the runs it starts belong to the tool call, not to its innermost layer."""

    async def tool_itself(ctx: Any) -> Any:
        span = current.get()
        while span is not None and span.kind == "layer":
            span = span.parent
        if span is None:
            return await terminal(ctx)
        token = current.set(span)
        try:
            return await terminal(ctx)
        finally:
            current.reset(token)

    return tool_itself


def _layer_wrapper(exporter: Exporter | None) -> Callable[[Layer, str], Callable[..., Any]]:
    """`Stack.compose`'s `wrap`: each layer's function recording a span per pass inside a traced call."""

    def wrap(layer: Layer, kind: str) -> Callable[..., Any]:
        function = layer.wraps[kind]
        name = layer.name

        async def traced_layer(ctx: Any, call_next: Handler) -> Any:
            parent = current.get()
            if parent is None:
                return await function(ctx, call_next)
            span = Span("layer", name, ctx, parent)

            async def timed_next(inner: Any) -> Any:
                span.passes += 1
                started = time.perf_counter_ns()
                try:
                    return await call_next(inner)
                except BaseException as error:
                    span.inner_error = error
                    raise
                finally:
                    span.inner_ns += time.perf_counter_ns() - started

            token = current.set(span)
            if exporter is not None:
                exporter.open(span)
            try:
                span.result = result = await function(ctx, timed_next)
            except BaseException as error:
                span.error = error
                raise
            finally:
                span.end = time.perf_counter_ns()
                current.reset(token)
                if exporter is not None:
                    exporter.close(span)
            return result

        return traced_layer

    return wrap


def name_of(kind: str, ctx: Call) -> str:
    """What a call's span is named after: the agent (run), model (model call, request) or tool(s)."""
    if kind == "run":
        return str(ctx.agent.name)  # type: ignore[attr-defined]
    if kind in ("model", "request"):
        return model_name(ctx.model)  # type: ignore[attr-defined]
    if kind == "tools":
        return ", ".join(call.name for call in ctx.calls)  # type: ignore[attr-defined]
    return str(ctx.name)  # type: ignore[attr-defined]


def model_name(model: Any) -> str:
    return str(getattr(model, "name", None) or type(model).__name__)
