"""The workload on LangChain v1: `create_agent` with `AgentMiddleware` layers."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool

from ..workload import ARGUMENTS, FINAL, QUESTION, add

DISTRIBUTION = "langchain"


class StepChat(BaseChatModel):
    """Tool calls after the question, the final answer after the results."""

    @property
    def _llm_type(self) -> str:
        return "step"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        raise NotImplementedError("the benchmark runs async only")

    async def _agenerate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        if isinstance(messages[-1], HumanMessage):
            calls = [{"id": f"call_{i}", "name": "add", "args": json.loads(a)} for i, a in enumerate(ARGUMENTS)]
            message = AIMessage(content="", tool_calls=calls)
        else:
            message = AIMessage(content=FINAL)
        return ChatResult(generations=[ChatGeneration(message=message)])


class Noop(AgentMiddleware):  # type: ignore[type-arg]
    async def awrap_model_call(self, request: Any, handler: Any) -> Any:
        return await handler(request)

    async def awrap_tool_call(self, request: Any, handler: Any) -> Any:
        return await handler(request)


def build(layers: int) -> Callable[[], Awaitable[tuple[str, list[str]]]]:
    # LangChain refuses two middleware of one name; each layer gets its own class.
    middleware = [type(f"Noop{i}", (Noop,), {})() for i in range(layers)]
    agent = create_agent(StepChat(), [tool(add)], middleware=middleware)

    async def run() -> tuple[str, list[str]]:
        state = await agent.ainvoke({"messages": [HumanMessage(QUESTION)]})
        messages = state["messages"]
        return messages[-1].content, [m.content for m in messages if isinstance(m, ToolMessage)]

    return run
