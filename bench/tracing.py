"""Tracing overhead: µs per model call through an agent's model chain (5 no-op layers), tracing on against off.

`instrument()` sends to the OpenTelemetry SDK (a `TracerProvider` whose
processor hands each span to an exporter that drops it, and a
`MeterProvider`), as an application would, minus the network. Tracing off
after `uninstrument()` is measured against an agent that never saw tracing:
chains are rebuilt without it, so the two should be the same code. The
cost tracing adds is also set against two bare spans of the same SDK
(the least a model call's chat and request spans can cost).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

from onion import Agent, Message, ModelCall, Run, tracing

from .table import Row
from .timing import Batch, Scale, interleaved
from .workload import StepModel, noop

SECTION = "tracing"
LAYERS = 5


class Discard:
    """An OpenTelemetry span exporter that drops what it is given (the SDK's work is measured, not a network's)."""

    def export(self, spans: Sequence[Any]) -> Any:
        from opentelemetry.sdk.trace.export import SpanExportResult

        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        """Nothing to release."""

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


def model_chain(agent: Agent) -> Batch:
    """Model calls through the agent's model chain as built now (tracing on or off), a fresh `ModelCall` each."""
    chain = agent._compiled().model_chain
    run = Run(agent, "question", [Message.user("question")])
    messages, model = run.messages, agent.model

    async def batch(n: int) -> float:
        start = time.perf_counter()
        for _ in range(n):
            await chain(ModelCall(run, messages, [], model, {}))
        return time.perf_counter() - start

    return batch


def chains() -> dict[str, Batch]:
    """One model chain per case, each built under its own tracing setting."""
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    def agent() -> Agent:
        return Agent(StepModel(), middleware=[noop] * LAYERS, checked=False)

    cases = {"never": model_chain(agent())}
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(Discard()))  # type: ignore[arg-type]
    meters = MeterProvider()
    traced = agent()
    for name, layers in (("instrument", False), ("layers", True)):
        tracing.instrument(provider, meter_provider=meters, layers=layers)
        cases[name] = model_chain(traced)
    tracing.uninstrument()
    cases["off again"] = model_chain(traced)
    cases["bare"] = bare_spans(provider)
    return cases


def bare_spans(provider: Any) -> Batch:
    """Two nested spans straight from the SDK (what a chat span and its request span cost at the least)."""
    tracer = provider.get_tracer("bench")

    async def batch(n: int) -> float:
        start = time.perf_counter()
        for _ in range(n):
            with tracer.start_as_current_span("chat"), tracer.start_as_current_span("request"):
                pass
        return time.perf_counter() - start

    return batch


def rows(scale: Scale) -> list[Row]:
    t = asyncio.run(interleaved(chains(), rounds=scale.rounds, target_s=scale.target_s))
    off = t["never"] * 1e6
    per = f"per model call, {LAYERS} layers"
    return [
        Row(SECTION, f"{per}, instrument()", t["instrument"] * 1e6, "µs", off, "tracing off"),
        Row(SECTION, f"{per}, instrument(layers=True)", t["layers"] * 1e6, "µs", off, "tracing off"),
        Row(SECTION, f"{per}, off after uninstrument()", t["off again"] * 1e6, "µs", off, "never traced"),
        Row(
            SECTION,
            "instrument() cost per model call (on - off)",
            (t["instrument"] - t["never"]) * 1e6,
            "µs",
            t["bare"] * 1e6,
            "2 bare SDK spans",
        ),
    ]
