"""`cassette`: record the model calls of a block once (and, asked, its tool calls), replay them offline after.

It stands in at the model boundary (`onion._boundary`), after every layer:
layers outside it (cache, retry, log, redact) see replayed responses, and
replayed provider errors, as they saw the live ones.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextvars import Token
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

from .. import errors
from .._boundary import BOUNDARY, Boundary
from .._calls import ModelCall, ToolCall
from .._results import ModelResponse, ToolResult
from .._tools import render
from ..errors import ModelError, OnionError
from ._cassette_entries import (
    event_entry,
    event_from,
    model_name,
    request_entry,
    response_entry,
    response_from,
    scrubbed,
    tool_entry,
    tool_result_from,
)
from ._cassette_match import CassetteMismatch, Matcher, ignored

CassetteMode = Literal["once", "record", "replay"]
"""How a cassette treats its file: record when missing (`"once"`), always record, or only replay."""
MODES = ("once", "record", "replay")
VERSION = 1


class Cassette:
    """The model calls of a block, recorded to `path` or replayed from it; build one with `cassette(...)`.

    `recording` says, once entered, whether the block calls the models and
    records (`mode="record"`, or `"once"` without the file) or replays.
    `model_calls` and `tool_calls` are the entries recorded or read, as in
    the file.
    """

    __slots__ = (
        "_errors",
        "_matcher",
        "_token",
        "_tools_used",
        "ignore",
        "mode",
        "model_calls",
        "path",
        "recording",
        "tool_calls",
        "tools",
    )

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        mode: CassetteMode = "once",
        ignore: Iterable[str] = (),
        tools: bool = False,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"cassette mode must be one of {', '.join(map(repr, MODES))}, not {mode!r}")
        self.path = Path(path)
        self.mode: CassetteMode = mode
        self.ignore = tuple(ignore)
        self.tools = tools
        self.recording = False
        self.model_calls: list[dict[str, Any]] = []
        self.tool_calls: list[dict[str, Any]] = []
        self._matcher: Matcher | None = None
        self._tools_used: list[bool] = []
        self._token: Token[Boundary | None] | None = None
        self._errors: dict[str, type[Exception]] = {}

    def __enter__(self) -> Cassette:
        if self._token is not None:
            raise RuntimeError(f"cassette {self.path} is already in use: enter it once at a time")
        exists = self.path.exists()
        if self.mode == "replay" and not exists:
            raise CassetteMismatch(
                f'cassette {self.path} does not exist, and mode="replay" never calls a model: record it first '
                '(mode="once" or "record", or pytest --onion-record)',
                path=self.path,
            )
        self.recording = self.mode == "record" or not exists
        if self.recording:
            self.model_calls, self.tool_calls = [], []
        else:
            self._load()
        self._tools_used = [False] * len(self.tool_calls)
        self._token = BOUNDARY.set(self)
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        """Stop standing in; a recording block that ended without an exception writes its file."""
        assert self._token is not None, "cassette exited without being entered"
        BOUNDARY.reset(self._token)
        self._token = None
        if self.recording and kind is None:
            self._write()

    async def __aenter__(self) -> Cassette:
        return self.__enter__()

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.__exit__(kind, error, traceback)

    def model(self, call: ModelCall) -> Any:
        return _Standin(self, call.model)

    async def tool(self, call: ToolCall, invoke: Callable[[], Awaitable[Any]]) -> Any:
        if not self.tools:
            return await invoke()
        if not self.recording:
            return self._replay_tool(call)
        try:
            value = await invoke()
        except Exception as failure:
            self.tool_calls.append({**tool_entry(call.name, call.args, "", False), "raised": _raised(failure)})
            raise
        if isinstance(value, ToolResult):
            entry = tool_entry(call.name, call.args, value.content, value.is_error)
            if value.untrusted:
                entry["untrusted"] = True
        else:
            entry = tool_entry(call.name, call.args, render(value), False)
        self.tool_calls.append(entry)
        return value

    async def answer(self, call: ModelCall, model: Any) -> ModelResponse:
        """`model`'s response to `call`, recorded; or the recorded response (or error) of the matching request."""
        request = request_entry(call)
        if not self.recording:
            entry = self._replayed(request)
            if "error" in entry:
                raise _error_from(entry["error"])
            return response_from(entry["response"])
        try:
            response: ModelResponse = await model.request(call)
        except ModelError as failure:
            self.model_calls.append({"request": request, "error": _error_entry(failure)})
            raise
        self.model_calls.append({"request": request, "response": response_entry(response)})
        return response

    async def answer_streamed(self, call: ModelCall, model: Any) -> AsyncIterator[Any]:
        """`answer`, streamed: the model's events (recorded in order), or the recorded ones, then the response."""
        request = request_entry(call)
        if not self.recording:
            entry = self._replayed(request)
            for event in entry.get("events", ()):
                yield event_from(event)
            if "error" in entry:
                raise _error_from(entry["error"])
            yield response_from(entry["response"])
            return
        events: list[dict[str, Any]] = []
        try:
            async for item in model.stream(call):
                if isinstance(item, ModelResponse):
                    self.model_calls.append({"request": request, "events": events, "response": response_entry(item)})
                else:
                    events.append(event_entry(item))
                yield item
        except ModelError as failure:
            self.model_calls.append({"request": request, "events": events, "error": _error_entry(failure)})
            raise

    def _replayed(self, request: dict[str, Any]) -> dict[str, Any]:
        assert self._matcher is not None
        return self.model_calls[self._matcher.take(request)]

    def _replay_tool(self, call: ToolCall) -> ToolResult:
        wanted = scrubbed({"name": call.name, "args": call.args})
        for index, entry in enumerate(self.tool_calls):
            if not self._tools_used[index] and {"name": entry["name"], "args": entry["args"]} == wanted:
                self._tools_used[index] = True
                raised = entry.get("raised")
                if raised is not None:
                    raise self._tool_error(raised)
                return tool_result_from(entry, call.id)
        recorded = [entry["args"] for entry in self.tool_calls if entry["name"] == call.name]
        raise CassetteMismatch(
            f"cassette {self.path}: no recorded call of tool {call.name} with arguments "
            f"{json.dumps(wanted['args'], sort_keys=True, default=str)} is left to replay (recorded with: "
            f'{json.dumps(recorded, sort_keys=True, default=str)}); record it again with mode="record"',
            path=self.path,
            field="args",
            recorded=recorded,
            actual=wanted["args"],
        )

    def _tool_error(self, raised: dict[str, str]) -> Exception:
        """An exception named as the tool's was (the model reads `Tool x failed: ValueError: ...` as live)."""
        name = raised["type"]
        cls = self._errors.get(name)
        if cls is None:
            cls = self._errors[name] = type(name, (Exception,), {"__module__": "onion.testing.cassette"})
        return cls(raised["message"])

    def _load(self) -> None:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            if data.get("version") != VERSION:
                raise ValueError(f"version {data.get('version')!r}, where this onion reads version {VERSION}")
            self.model_calls = list(data["model_calls"])
            self.tool_calls = list(data.get("tool_calls", ()))
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
            raise OnionError(
                f"cassette {self.path} cannot be read ({type(error).__name__}: {error}); "
                'delete it or record it again with mode="record"'
            ) from error
        self._matcher = Matcher([entry["request"] for entry in self.model_calls], ignored(self.ignore), self.path)

    def _write(self) -> None:
        data: dict[str, Any] = {"version": VERSION, "model_calls": self.model_calls}
        if self.tools:
            data["tool_calls"] = self.tool_calls
        text = json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=self.path.parent, prefix=f".{self.path.name}.", suffix=".tmp")
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as file:
                file.write(text)
            os.replace(temporary, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise

    def __repr__(self) -> str:
        return f"<Cassette {self.path} mode={self.mode}>"


def cassette(
    path: str | os.PathLike[str], *, mode: CassetteMode = "once", ignore: Iterable[str] = (), tools: bool = False
) -> Cassette:
    """Record the model calls made inside the block to `path` (JSON), or replay them from it.

    `with cassette(path):` or `async with cassette(path):` applies to every
    agent run inside the block (in this thread, and the tasks it starts).
    `mode`: `"once"` records when the file is missing and replays when it
    exists; `"record"` always calls the models and rewrites the file;
    `"replay"` never calls a model (a missing file raises `CassetteMismatch`
    at once). The file is written when a recording block ends without an
    exception; missing folders are created. A replayed request that matches
    no recorded one raises `CassetteMismatch` naming the first differing
    field. `ignore` names fields left out of matching (`"settings.temperature"`,
    `"messages[*].meta"`); ids providers generate are always left out.
    `tools=True` also records each tool call's result and replays it
    without running the tool.
    """
    return Cassette(path, mode=mode, ignore=ignore, tools=tools)


class _Standin:
    """What the agent asks in place of the model while a cassette is active; streams when the model does."""

    __slots__ = ("_cassette", "_model", "name", "stream")

    def __init__(self, cassette: Cassette, model: Any) -> None:
        self._cassette, self._model = cassette, model
        self.name = model_name(model)
        self.stream = self._stream if callable(getattr(model, "stream", None)) else None

    async def request(self, call: ModelCall) -> ModelResponse:
        return await self._cassette.answer(call, self._model)

    async def _stream(self, call: ModelCall) -> AsyncIterator[Any]:
        async for item in self._cassette.answer_streamed(call, self._model):
            yield item


def _error_entry(error: ModelError) -> dict[str, Any]:
    entry: dict[str, Any] = scrubbed(
        {
            "type": type(error).__name__,
            "message": str(error),
            "retryable": error.retryable,
            "retry_after": error.retry_after,
            "status_code": error.status_code,
            "provider": error.provider,
        }
    )
    return entry


def _error_from(entry: dict[str, Any]) -> ModelError:
    cls = getattr(errors, entry["type"], None)
    if not (isinstance(cls, type) and issubclass(cls, ModelError)):
        cls = ModelError
    return cls(
        entry["message"],
        retryable=entry["retryable"],
        retry_after=entry["retry_after"],
        status_code=entry["status_code"],
        provider=entry["provider"],
    )


def _raised(error: Exception) -> dict[str, str]:
    return {"type": type(error).__name__, "message": str(scrubbed(str(error)))}
