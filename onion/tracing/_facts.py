"""What each span did, in words: shared by the terminal tree, the HTML page and layer spans' attributes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .._calls import ModelCall
from .._messages import Usage
from .._results import ModelResponse, ToolResult
from .._run import RunResult
from ._spans import Span

MAX_ERROR = 120
"""Characters of an error's text shown."""


def did(span: Span) -> list[str]:
    """What one layer pass did: answered itself (`hit`, `blocked`), retried, recovered, raised, waited, notes."""
    facts = []
    error, inner = span.error, span.inner_error
    if error is not None and error is not inner:
        facts.append(f"raised {type(error).__name__}")
    if span.passes == 0 and error is None:
        facts.append(_answered(span.result, span.ctx))
    elif span.passes > 1:
        facts.append(f"retried {span.passes - 1}x" + (f" after {type(inner).__name__}" if inner is not None else ""))
    elif inner is not None and error is None:
        facts.append(f"recovered from {type(inner).__name__}")
    if span.waited:
        facts.append(f"waited {span.waited:.2g} s")
    facts.extend(span.notes)
    return facts


def _answered(result: Any, ctx: Any) -> str:
    """What a layer that never called the next one did."""
    if isinstance(result, ModelResponse):
        return "hit" if result.cached else "answered"
    if isinstance(result, ToolResult):
        return "paused" if ctx.pause_reason is not None else "blocked" if result.is_error else "answered"
    if isinstance(result, list) and result:
        if any(call.pause_reason is not None for call in ctx.calls):
            return "paused"
        if all(isinstance(r, ToolResult) and r.is_error for r in result):
            return "blocked"
    return "answered"


def outcome(span: Span) -> list[str]:
    """What a call (or model request) came to: tokens, a cache hit, a block, an error, what it noted."""
    facts = []
    result = span.result
    if isinstance(result, RunResult):
        usage = result.usage
        facts.append(f"{usage.requests} model request{'s' if usage.requests != 1 else ''}")
        facts.append(f"{usage.input_tokens} in / {usage.output_tokens} out tokens")
        if result.paused:
            facts.append("paused")
    elif isinstance(result, ModelResponse):
        if span.kind == "model" and result.cached:
            facts.append("cache hit")
        usage = result.usage if span.kind == "request" else produced(span.ctx)
        if usage.total_tokens:
            facts.append(f"{usage.input_tokens} in / {usage.output_tokens} out tokens")
        if span.kind == "model":
            calls = len(result.tool_calls)
            facts.append(f"asked for {calls} tool{'s' if calls != 1 else ''}" if calls else "answered")
    elif isinstance(result, ToolResult) and result.is_error:
        facts.append("blocked" if "was blocked" in result.content else "error result")
    elif isinstance(result, ToolResult) and span.ctx.pause_reason is not None:
        facts.append("paused")
    if isinstance(result, ToolResult) and result.untrusted:
        facts.append("untrusted result")
    if span.untrusted_before:
        facts.append(after_untrusted(span.untrusted_before))
    if span.error is not None:
        facts.append(error_text(span.error))
    facts.extend(span.notes)
    return facts


def after_untrusted(sources: list[Any]) -> str:
    """`after untrusted content from fetch (call c1): "first words"`, scrubbed, for a call made after it."""
    from ..scrub import scrub

    more = f" (+{len(sources) - 1} more)" if len(sources) > 1 else ""
    return scrub(f"after untrusted content from {sources[0]}{more}")


def produced(call: ModelCall) -> Usage:
    """What the models produced for `call`, every attempt added up (zero for a response no model made)."""
    total = Usage()
    for usage in call._counted or ():
        total.add(usage)
    return total


def error_text(error: BaseException) -> str:
    from ..scrub import scrub

    text = scrub(f"{type(error).__name__}: {error}")
    return text if len(text) <= MAX_ERROR else text[: MAX_ERROR - 3] + "..."


def label(span: Span, number: int | None = None, real_values: bool = False) -> str:
    """How a call is named in a tree or on the page: `model call 2 · claude-...`, `tool add(a=1, b=2)`.

    A tool call shows its arguments as the call was made (`Span.args`: what
    the model wrote), or, with `real_values`, as its tool got them.
    """
    numbered = f" {number}" if number is not None else ""
    if span.kind == "run":
        return f"run {span.name}"
    if span.kind == "model":
        return f"model call{numbered} · {span.name}"
    if span.kind == "request":
        return f"request{numbered} · {span.name}"
    if span.kind == "tools":
        return f"tools [{span.name}]"
    if span.kind == "tool":
        return f"tool {span.name}({arguments(span.ctx.args if real_values or span.args is None else span.args)})"
    return span.name


def arguments(args: dict[str, Any], limit: int = 60) -> str:
    """A tool call's arguments as `a=1, city='Paris'`, scrubbed of secrets, cut at `limit` characters."""
    from ..scrub import scrub_value

    text = ", ".join(f"{key}={value!r}" for key, value in scrub_value(args).items())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def duration(ns: int) -> str:
    """`12 µs`, `3.41 ms`, `12.3 ms`, `1.24 s`."""
    if ns >= 1_000_000_000:
        return f"{ns / 1e9:.2f} s"
    if ns < 1_000_000:
        return f"{ns / 1e3:.0f} µs"
    ms = ns / 1e6
    return f"{ms:.2f} ms" if ms < 10 else f"{ms:.1f} ms"


def numbered(calls: list[Span]) -> list[tuple[Span, int | None]]:
    """The calls with the number each is shown with: model calls and requests counted in order."""
    counts = {"model": 0, "request": 0}
    found: list[tuple[Span, int | None]] = []
    for call in calls:
        if call.kind in counts:
            counts[call.kind] += 1
            found.append((call, counts[call.kind]))
        else:
            found.append((call, None))
    return found


def layers_of(call: Span) -> list[tuple[int, Span]]:
    """The layer passes of a call, in the order they started, with their depth in its chain (0: outermost)."""
    found: list[tuple[int, Span]] = []
    _walk(call, 0, found, [])
    return found


def calls_of(call: Span) -> list[Span]:
    """The calls (and model requests) made inside a call, through its layers, in the order they started."""
    found: list[Span] = []
    _walk(call, 0, [], found)
    return found


def _walk(span: Span, depth: int, layers: list[tuple[int, Span]], calls: list[Span]) -> None:
    for child in span.children:
        if child.kind == "layer":
            layers.append((depth, child))
            _walk(child, depth + 1, layers, calls)
        else:
            calls.append(child)


@dataclass(slots=True)
class LayerLine:
    """One layer of a call's chain, its passes added up."""

    name: str
    own_ns: int = 0
    passes: int = 0
    facts: list[str] = field(default_factory=list)


def layer_lines(call: Span) -> list[LayerLine]:
    """A line per layer of a call's chain, outermost first: its own time over all passes, and what it did."""
    lines: dict[int, LayerLine] = {}
    for depth, span in layers_of(call):
        line = lines.setdefault(depth, LayerLine(span.name))
        line.own_ns += span.own_ns
        line.passes += 1
        line.facts.extend(fact for fact in did(span) if fact not in line.facts)
    return [lines[depth] for depth in sorted(lines)]
