"""`ScriptedModel` and `FunctionModel`: models that answer from a script or a function."""

from __future__ import annotations

import inspect
import itertools
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import Any

from .._calls import ModelCall, ModelResponse
from .._events import TextDelta, ToolCallStarted
from .._messages import Message, ToolRequest, Usage
from ..errors import ScriptExhausted

ScriptItem = str | list[ToolRequest] | ModelResponse | BaseException
"""A final answer, a batch of tool calls, a whole response, or an error to raise."""

_ids = itertools.count(1)


def call(name: str, /, **args: Any) -> ToolRequest:
    """A tool call for a script, with a fresh unique id (as providers give)."""
    return ToolRequest(id=f"call_{next(_ids)}", name=name, args=args)


def to_response(item: ScriptItem, model_name: str) -> ModelResponse:
    """The `ModelResponse` a script item stands for (raises it if it is an error)."""
    if isinstance(item, BaseException):
        raise item
    if isinstance(item, ModelResponse):
        return item
    if isinstance(item, str):
        return ModelResponse(Message.assistant(item), Usage(requests=1), "end", model=model_name)
    if isinstance(item, list) and all(isinstance(request, ToolRequest) for request in item):
        return ModelResponse(Message.assistant("", list(item)), Usage(requests=1), "tool_use", model=model_name)
    raise TypeError(f"script item {item!r} is not a str, a list of call(...), a ModelResponse or an exception")


class _Recording(ABC):
    name: str

    def __init__(self) -> None:
        self.requests: list[ModelCall] = []
        """Every `ModelCall` that reached this model, after all layers."""

    @abstractmethod
    async def respond(self, call: ModelCall) -> ModelResponse: ...

    async def request(self, call: ModelCall) -> ModelResponse:
        self.requests.append(call)
        return await self.respond(call)

    async def stream(self, call: ModelCall) -> AsyncIterator[Any]:
        """The response's text in small pieces, then the response."""
        self.requests.append(call)
        response = await self.respond(call)
        text = response.text
        for start in range(0, len(text), 8):
            yield TextDelta(text[start : start + 8])
        for request in response.tool_calls:
            yield ToolCallStarted(request.id, request.name)
        yield response


class ScriptedModel(_Recording):
    """Answers each request with the next item of `script`.

    Items: a `str` (final answer), a list of `call(...)` (a tool batch), a
    `ModelResponse`, or an exception to raise. Past the end of the script it
    raises `ScriptExhausted`.
    """

    def __init__(self, script: Iterable[ScriptItem], *, name: str = "scripted") -> None:
        super().__init__()
        self.script = list(script)
        self.name = name
        self._position = 0

    async def respond(self, call: ModelCall) -> ModelResponse:
        if self._position >= len(self.script):
            raise ScriptExhausted(
                f"ScriptedModel {self.name!r} was asked for response {self._position + 1} "
                f"but its script has {len(self.script)}"
            )
        item = self.script[self._position]
        self._position += 1
        return to_response(item, self.name)

    @property
    def remaining(self) -> int:
        """How many script items have not been used yet."""
        return len(self.script) - self._position


class FunctionModel(_Recording):
    """Answers each request with `function(call)`, sync or async, returning any script item."""

    def __init__(self, function: Callable[[ModelCall], ScriptItem | Awaitable[ScriptItem]], *, name: str = "function"):
        super().__init__()
        self.function = function
        self.name = name

    async def respond(self, call: ModelCall) -> ModelResponse:
        item = self.function(call)
        if inspect.isawaitable(item):
            item = await item
        return to_response(item, self.name)
