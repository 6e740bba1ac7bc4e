"""Tracing: which layer spent what. Runs offline.

python examples/tracing.py [trace.html]

The same agent runs twice: inside `tracing.capture()` (printed as a tree,
written as an HTML page), then with `tracing.instrument()` sending
OpenTelemetry spans to the SDK's in-memory exporter (printed by name).
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from middleware import cache, retry
from onion import Agent, tool, tracing
from onion.errors import RateLimitedError
from onion.testing import ScriptedModel, ScriptItem, call


@tool
def add(a: float, b: float) -> float:
    """Add two numbers."""
    return a + b


def agent() -> Agent:
    """An agent whose model is rate-limited once, then asks for a tool, then answers."""
    limited = RateLimitedError("429 (scripted)", retry_after=0.01)
    script: list[ScriptItem] = [limited, [call("add", a=2, b=3)], "2 + 3 = 5"]
    return Agent(ScriptedModel(script), tools=[add], middleware=[retry, cache], name="adder")


async def captured(html: Path | None = None) -> str:
    """The run as a tree; with `html`, the page too."""
    with tracing.capture() as trace:
        await agent().run("what is 2 + 3?")
    if html is not None:
        trace.to_html(html)
    return str(trace)


async def exported() -> list[str]:
    """The names of the OpenTelemetry spans of one run, indented by depth."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracing.instrument(provider)
    try:
        await agent().run("what is 2 + 3?")
    finally:
        tracing.uninstrument()
    spans = sorted(memory.get_finished_spans(), key=lambda span: span.start_time or 0)
    parents = {span.context.span_id: span.parent.span_id if span.parent else None for span in spans}

    def depth(span_id: int | None) -> int:
        return 0 if parents.get(span_id) is None else 1 + depth(parents[span_id])

    return ["  " * depth(span.context.span_id) + span.name for span in spans]


async def main(html: Path | None = None) -> tuple[str, list[str]]:
    tree = await captured(html)
    print(tree, end="\n\n")
    names = await exported()
    print("\n".join(names))
    return tree, names


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]) if len(sys.argv) > 1 else None))
