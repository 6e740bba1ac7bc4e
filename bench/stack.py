"""Stack overhead: ns per no-op layer through `Stack.compose`, against hand-nested awaits.

The baseline is the limit for CPython: N distinct hand-written coroutine
functions, each awaiting the next by name, around the same terminal.
Per-layer cost is (time with N layers - time with none) / N, for each side.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from onion import Handler, Message, ModelCall, ModelResponse, Run, Stack, ToolCall, ToolRequest, ToolResult, Usage

from .table import Row
from .timing import Batch, Scale, interleaved
from .workload import StepModel, noop

LAYERS = (0, 1, 5, 10, 20)
KINDS = ("model", "tool")
BAR = 1.5
SECTION = "stack"


def hand_nested(layers: int, terminal: Handler) -> Handler:
    """`layers` hand-written coroutine functions, each awaiting the next by name."""
    if not layers:
        return terminal
    source = "".join(
        f"async def layer_{i}(ctx):\n    return await {f'layer_{i + 1}' if i + 1 < layers else 'terminal'}(ctx)\n"
        for i in range(layers)
    )
    namespace: dict[str, Any] = {"terminal": terminal}
    exec(source, namespace)
    return namespace["layer_0"]  # type: ignore[no-any-return]


def contexts() -> dict[str, tuple[Any, Handler]]:
    """A real context and a terminal returning a prebuilt result, per kind."""
    run = Run(None, "question", [Message.user("question")])  # type: ignore[arg-type]
    response = ModelResponse(Message.assistant("answer"), Usage(requests=1))
    result = ToolResult(content="3", call_id="call_0")

    async def model_terminal(ctx: ModelCall) -> ModelResponse:
        return response

    async def tool_terminal(ctx: ToolCall) -> ToolResult:
        return result

    return {
        "model": (ModelCall(run, list(run.messages), [], StepModel(), {}), model_terminal),
        "tool": (ToolCall(run, ToolRequest("call_0", "add", {"a": 1, "b": 2}), None), tool_terminal),
    }


def batch_of(chain: Handler, ctx: Any) -> Batch:
    async def batch(n: int) -> float:
        start = time.perf_counter()
        for _ in range(n):
            await chain(ctx)
        return time.perf_counter() - start

    return batch


def cases() -> dict[str, Batch]:
    found: dict[str, Batch] = {}
    for kind, (ctx, terminal) in contexts().items():
        for layers in LAYERS:
            found[f"onion {kind} {layers}"] = batch_of(
                Stack(*[noop] * layers).compose(kind, terminal, checked=False), ctx
            )
            found[f"hand {kind} {layers}"] = batch_of(hand_nested(layers, terminal), ctx)
        if kind == "model":
            checked = Stack(*[noop] * 10).compose(kind, terminal, checked=True)
            found[f"checked {kind} 10"] = batch_of(checked, ctx)
    return found


def rows(scale: Scale) -> list[Row]:
    t = asyncio.run(interleaved(cases(), rounds=scale.rounds, target_s=scale.target_s))
    found = []
    for kind in KINDS:
        found.append(
            Row(
                SECTION,
                f"{kind} kind, 0 layers, per call",
                t[f"onion {kind} 0"] * 1e9,
                "ns",
                t[f"hand {kind} 0"] * 1e9,
                "hand",
            )
        )
        for layers in LAYERS[1:]:
            onion = (t[f"onion {kind} {layers}"] - t[f"onion {kind} 0"]) / layers
            hand = (t[f"hand {kind} {layers}"] - t[f"hand {kind} 0"]) / layers
            name = f"{kind} kind, {layers} layer{'s' if layers > 1 else ''}, per layer"
            found.append(Row(SECTION, name, onion * 1e9, "ns", hand * 1e9, "hand", BAR))
    checked = (t["checked model 10"] - t["onion model 0"]) / 10
    hand = (t["hand model 10"] - t["hand model 0"]) / 10
    found.append(
        Row(SECTION, "model kind, 10 layers, ONION_CHECKED=1, per layer", checked * 1e9, "ns", hand * 1e9, "hand")
    )
    return found
