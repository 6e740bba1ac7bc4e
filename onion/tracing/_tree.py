"""A captured run drawn as a tree for the terminal: calls inside calls, each call's layers with their own time."""

from __future__ import annotations

from ._facts import calls_of, duration, label, layer_lines, numbered, outcome
from ._spans import Span


def tree(span: Span, real_values: bool = False) -> str:
    """`span` and everything inside it, one line per call and per layer of its chain.

    A call's line: its name, its time, what it came to. Under it, its
    layers (outermost first), each with its own time (its time minus the
    time inside `call_next`, over all its passes) and what it did; then the
    calls made inside it. Tool arguments are shown as the model wrote them,
    or as the tools got them with `real_values` (see `label`).
    """
    lines = [headline(span, None, real_values)]
    _branch(span, "", lines, real_values)
    return "\n".join(lines)


def headline(span: Span, number: int | None, real_values: bool = False) -> str:
    return " · ".join([label(span, number, real_values), duration(span.duration_ns), *outcome(span)])


def _branch(call: Span, prefix: str, lines: list[str], real_values: bool) -> None:
    layers = layer_lines(call)
    calls = numbered(calls_of(call))
    width = max((len(line.name) for line in layers), default=0)
    rows = len(layers) + len(calls)
    for index, line in enumerate(layers):
        connector = "└─ " if index == rows - 1 else "├─ "
        passes = f" ({line.passes} passes)" if line.passes > 1 else ""
        facts = "  " + ", ".join(line.facts) if line.facts else ""
        lines.append(f"{prefix}{connector}{line.name:<{width}}  {duration(line.own_ns):>9}{passes}{facts}".rstrip())
    for index, (inner, number) in enumerate(calls, start=len(layers)):
        last = index == rows - 1
        lines.append(f"{prefix}{'└─ ' if last else '├─ '}{headline(inner, number, real_values)}")
        _branch(inner, prefix + ("   " if last else "│  "), lines, real_values)
