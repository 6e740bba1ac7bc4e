"""`Span`: the record of one call or layer while tracing is on, and what layers tell it (`note`, `waited`)."""

from __future__ import annotations

import time
from collections import deque
from contextvars import ContextVar
from typing import Any

KINDS = ("run", "model", "tools", "tool", "request", "layer")
"""A span's `kind`: the four kinds of call, a request that reached the model, or one layer's pass."""

current: ContextVar[Span | None] = ContextVar("onion.tracing.current", default=None)
"""The innermost span open in this context: a layer while its own code runs, else the call."""

capturing: ContextVar[deque[Span] | None] = ContextVar("onion.tracing.capturing", default=None)
"""Where `capture()` keeps the runs started in this context (None: not capturing here)."""


class Span:
    """One call, model request or layer pass, with its timing and what it did.

    `start` and `end` are `time.perf_counter_ns()` readings; `children` are
    the spans opened inside this one, in the order they started (kept in
    a `capture()` only: an exporter's finished spans are let go). For a
    layer, `passes` counts its calls of `call_next` and `inner_ns` the time
    they took, so its own time is `own_ns`. `ctx`, `result` and `error` are
    the call's context, what it returned and what it raised: live objects,
    so `ctx.args` of a tool call holds the arguments as its tool got them
    (real values under `pseudonymize`); `args` holds them as the call was made.
    """

    __slots__ = (
        "args",
        "children",
        "ctx",
        "end",
        "error",
        "handle",
        "inner_error",
        "inner_ns",
        "kept",
        "kind",
        "name",
        "notes",
        "parent",
        "passes",
        "result",
        "start",
        "untrusted_before",
        "waited",
    )

    def __init__(self, kind: str, name: str, ctx: Any, parent: Span | None, kept: bool = False) -> None:
        self.kind = kind
        self.name = name
        """The layer's name for a layer; for a call, the model or tool name, or the agent's name for a run."""
        self.ctx = ctx
        self.args: dict[str, Any] | None = None
        """For a tool call, its arguments as the call was made, before its layers ran: what the model wrote
        (placeholders under `pseudonymize`), as traces show them."""
        self.untrusted_before: list[Any] | None = None
        """For a tool call made after untrusted content: that content's sources (`onion.UntrustedSource`)."""
        self.parent = parent
        self.children: list[Span] = []
        self.result: Any = None
        self.error: BaseException | None = None
        self.inner_error: BaseException | None = None
        """For a layer: the last exception its `call_next` raised (to tell its own errors from those it let through)."""
        self.passes = 0
        self.inner_ns = 0
        self.notes: list[str] = []
        self.waited = 0.0
        """Seconds the span's own code said it waited (`waited`)."""
        self.end = 0
        self.handle: Any = None
        """What an exporter keeps while the span is open (an OpenTelemetry span and its context token)."""
        self.kept: bool = parent.kept if parent is not None else kept
        """Whether the span stays in its parent's `children` (in a capture); an exporter's spans are let go."""
        if parent is not None and parent.kept:
            parent.children.append(self)
        self.start = time.perf_counter_ns()

    @property
    def duration_ns(self) -> int:
        return self.end - self.start if self.end else 0

    @property
    def own_ns(self) -> int:
        """The time spent in this span itself: for a layer, its time minus the time inside `call_next`."""
        return self.duration_ns - self.inner_ns

    def __repr__(self) -> str:
        return f"<Span {self.kind} {self.name} {self.duration_ns / 1e6:.3f}ms children={len(self.children)}>"

    def __str__(self) -> str:
        from ._tree import tree

        return tree(self)


def note(text: str) -> None:
    """Record `text` as something the running layer (or tool, or model) did: `"stored"`, `"skipped"`.

    Shown next to the layer in a captured trace, and as an event of its span
    with `instrument(layers=True)`. Costs one context lookup when tracing is off.
    """
    span = current.get()
    if span is not None:
        span.notes.append(text)


def waited(seconds: float) -> None:
    """Record that the running layer waited `seconds` (a rate limit, a backoff, a free slot).

    Waits add up per layer pass; a trace shows them as `waited 1.2 s`.
    Costs one context lookup when tracing is off.
    """
    span = current.get()
    if span is not None:
        span.waited += seconds
