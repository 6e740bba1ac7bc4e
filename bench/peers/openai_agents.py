"""The workload on the OpenAI Agents SDK: a fake `Model`, `RunHooks` as the layers.

RunHooks only observe (they cannot wrap a call), and a run takes one hooks
object: ten layers are ten no-op hooks behind one that awaits each in turn.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from agents import Agent, RunConfig, RunHooks, Runner, Usage, function_tool, set_tracing_disabled
from agents.items import ModelResponse
from agents.models.interface import Model
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

from ..workload import ARGUMENTS, FINAL, QUESTION, add

DISTRIBUTION = "openai-agents"


class StepModel(Model):
    """Tool calls after the question, the final answer after the results."""

    async def get_response(self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any) -> ModelResponse:
        last = input[-1] if isinstance(input, list) else {}
        if last.get("type") == "function_call_output":
            text = ResponseOutputText(type="output_text", text=FINAL, annotations=[])
            output: list[Any] = [
                ResponseOutputMessage(id="msg_1", type="message", role="assistant", status="completed", content=[text])
            ]
        else:
            output = [
                ResponseFunctionToolCall(
                    type="function_call", call_id=f"call_{i}", name="add", arguments=a, id=f"fc_{i}"
                )
                for i, a in enumerate(ARGUMENTS)
            ]
        return ModelResponse(output=output, usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("the benchmark does not stream")


class Noop(RunHooks):  # type: ignore[type-arg]
    async def on_llm_start(self, *args: Any) -> None:
        pass

    async def on_llm_end(self, *args: Any) -> None:
        pass

    async def on_tool_start(self, *args: Any) -> None:
        pass

    async def on_tool_end(self, *args: Any) -> None:
        pass


class Layers(RunHooks):  # type: ignore[type-arg]
    """Each event, awaited on every layer in turn."""

    def __init__(self, hooks: list[Noop]) -> None:
        self.hooks = hooks

    async def on_llm_start(self, *args: Any) -> None:
        for hook in self.hooks:
            await hook.on_llm_start(*args)

    async def on_llm_end(self, *args: Any) -> None:
        for hook in self.hooks:
            await hook.on_llm_end(*args)

    async def on_tool_start(self, *args: Any) -> None:
        for hook in self.hooks:
            await hook.on_tool_start(*args)

    async def on_tool_end(self, *args: Any) -> None:
        for hook in self.hooks:
            await hook.on_tool_end(*args)


def build(layers: int) -> Callable[[], Awaitable[tuple[str, list[str]]]]:
    set_tracing_disabled(True)
    agent = Agent(name="bench", model=StepModel(), tools=[function_tool(add)])
    hooks = Layers([Noop() for _ in range(layers)]) if layers else None
    config = RunConfig(tracing_disabled=True)

    async def run() -> tuple[str, list[str]]:
        result = await Runner.run(agent, QUESTION, hooks=hooks, run_config=config)
        outputs = [
            str(item.output) for item in result.new_items if getattr(item, "type", "") == "tool_call_output_item"
        ]
        return str(result.final_output), outputs

    return run
