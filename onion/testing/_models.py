"""`ScriptedModel` and `FunctionModel`: models that answer from a script or a function."""

from __future__ import annotations

import inspect
import itertools
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from typing import Any

import pydantic
import pydantic_core

from .._calls import ModelCall
from .._events import TextDelta, ToolCallStarted
from .._messages import Message, ToolRequest, Usage
from .._results import ModelResponse
from ..errors import ScriptExhausted

ScriptItem = str | list[ToolRequest] | ModelResponse | BaseException | pydantic.BaseModel | Sequence[pydantic.BaseModel]
"""A final answer, a batch of tool calls, a whole response, an error to raise, or a structured answer:
a pydantic object (or a list of them) is answered as its JSON text."""

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
    if isinstance(item, pydantic.BaseModel) or (
        isinstance(item, list) and item and all(isinstance(value, pydantic.BaseModel) for value in item)
    ):
        item = pydantic_core.to_json(item).decode()
    if isinstance(item, str):
        return ModelResponse(Message.assistant(item), Usage(requests=1), "end", model=model_name)
    if isinstance(item, list):
        requests = [request for request in item if isinstance(request, ToolRequest)]
        if len(requests) == len(item):
            return ModelResponse(Message.assistant("", requests), Usage(requests=1), "tool_use", model=model_name)
    raise TypeError(
        f"script item {item!r} is not a str, a list of call(...), a ModelResponse, a pydantic object or an exception"
    )


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
    `ModelResponse`, a pydantic object or a list of them (a structured
    answer, sent as JSON text), or an exception to raise. Past the end of the
    script it raises `ScriptExhausted`.
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
