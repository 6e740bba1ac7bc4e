"""The workload on pydantic-ai: a `FunctionModel` and capabilities with `wrap_*` hooks."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from ..workload import ARGUMENTS, FINAL, QUESTION, add

DISTRIBUTION = "pydantic-ai-slim"


def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Tool calls after the question, the final answer after the results."""
    last = messages[-1]
    if isinstance(last, ModelRequest) and any(isinstance(part, ToolReturnPart) for part in last.parts):
        return ModelResponse(parts=[TextPart(FINAL)])
    return ModelResponse(parts=[ToolCallPart("add", a, tool_call_id=f"call_{i}") for i, a in enumerate(ARGUMENTS)])


class Noop(AbstractCapability[Any]):
    async def wrap_model_request(self, ctx: Any, *, request_context: Any, handler: Any) -> Any:
        return await handler(request_context)

    async def wrap_tool_execute(self, ctx: Any, *, call: Any, tool_def: Any, args: Any, handler: Any) -> Any:
        return await handler(args)


def build(layers: int) -> Callable[[], Awaitable[tuple[str, list[str]]]]:
    agent = Agent(FunctionModel(answer), tools=[add], capabilities=[Noop() for _ in range(layers)])

    async def run() -> tuple[str, list[str]]:
        result = await agent.run(QUESTION)
        returns = [
            str(part.content)
            for message in result.all_messages()
            for part in getattr(message, "parts", ())
            if isinstance(part, ToolReturnPart)
        ]
        return str(result.output), returns

    return run
