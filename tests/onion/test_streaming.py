"""What a stream consumer is shown: after any recovery, the text the run returns; no stray task errors."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import AsyncIterator
from typing import Any

from middleware import fallback
from onion import (
    Agent,
    Event,
    Message,
    ModelCall,
    ModelCallFinished,
    ModelResponse,
    Run,
    RunFinished,
    StreamReset,
    TextDelta,
)
from onion.errors import ConnectionLostError
from onion.hooks import on_error
from onion.providers import AnthropicModel
from onion.testing import FakeProviderServer, ScriptedModel, StreamError


def shown(events: list[Event]) -> list[str]:
    """The text a consumer that honours `StreamReset` displays for each model call."""
    calls, text = [], ""
    for event in events:
        if isinstance(event, TextDelta):
            text += event.text
        elif isinstance(event, StreamReset):
            text = ""
        elif isinstance(event, ModelCallFinished):
            calls.append(text)
            text = ""
    return calls


class DropsMidStream:
    """Streams the start of an answer, then the connection drops."""

    name = "drops"

    async def request(self, call: ModelCall) -> ModelResponse:
        raise ConnectionLostError("dropped")

    async def stream(self, call: ModelCall) -> AsyncIterator[Any]:
        yield TextDelta("The first answ")
        raise ConnectionLostError("dropped mid-stream")


class RequestOnly:
    """A model that cannot stream: it has `request()` only."""

    name = "request-only"

    def __init__(self, text: str) -> None:
        self.text = text

    async def request(self, call: ModelCall) -> ModelResponse:
        return ModelResponse(Message.assistant(self.text))


async def stream_all(agent: Agent, question: str = "hi") -> tuple[list[Event], str]:
    events = [event async for event in agent.stream(question)]
    final = events[-1]
    assert isinstance(final, RunFinished)
    return events, final.result.output


async def test_a_fallback_model_that_does_not_stream_replaces_a_dropped_stream_after_a_reset(
    server: FakeProviderServer,
) -> None:
    """The Anthropic stream drops after half an answer; a non-streaming model answers: reset, then its text."""
    server.script([StreamError(partial_text="Half of the first")])
    primary = AnthropicModel("claude-test", base_url=server.url, api_key="test-key")
    backup = RequestOnly("The backup's answer")
    try:
        events, output = await stream_all(Agent(primary, middleware=[fallback(backup)]))
    finally:
        await primary.aclose()
    texts = [event.text for event in events if isinstance(event, TextDelta)]
    assert "".join(texts).startswith("Half") and output == "The backup's answer"
    assert shown(events) == ["The backup's answer"]
    reset = next(i for i, event in enumerate(events) if isinstance(event, StreamReset))
    assert "".join(e.text for e in events[reset:] if isinstance(e, TextDelta)) == "The backup's answer"


async def test_an_on_error_recovery_of_a_dropped_stream_is_shown_after_a_reset() -> None:
    """A hook answering for a stream that dropped midway: the consumer drops the half answer and sees the hook's."""

    @on_error
    def apologise(call: ModelCall, error: Exception) -> ModelResponse:
        return ModelResponse(Message.assistant("Sorry, try again later."))

    events, output = await stream_all(Agent(DropsMidStream(), middleware=[apologise]))
    assert output == "Sorry, try again later."
    assert shown(events) == ["Sorry, try again later."]
    assert [type(event).__name__ for event in events[:4]] == [
        "TextDelta",
        "StreamReset",
        "TextDelta",
        "ModelCallFinished",
    ]


async def test_a_layer_that_changes_a_streamed_answer_shows_the_changed_one_after_a_reset() -> None:
    """The model streamed its text whole, then a layer rewrote it: what the run returns is what is shown."""

    async def shout(ctx: ModelCall, call_next: Any) -> Any:
        response = await call_next(ctx)
        return ModelResponse(Message.assistant(response.text.upper()), response.usage)

    events, output = await stream_all(Agent(ScriptedModel(["a quiet answer"]), middleware=[shout]))
    assert output == "A QUIET ANSWER" and shown(events) == ["A QUIET ANSWER"]


async def test_a_stream_shown_as_answered_gets_no_reset() -> None:
    """A plain streamed answer, and a layer that re-wraps it unchanged, send no `StreamReset`."""

    async def rewrap(ctx: ModelCall, call_next: Any) -> Any:
        response = await call_next(ctx)
        return ModelResponse(Message.assistant(str(response.text)), response.usage)

    events, _ = await stream_all(Agent(ScriptedModel(["a fairly long answer"]), middleware=[rewrap]))
    assert not any(isinstance(event, StreamReset) for event in events)
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "a fairly long answer"


async def test_a_consumer_leaving_after_the_run_failed_leaves_no_unretrieved_task_exception() -> None:
    """The run fails while the consumer holds its first delta; closing the stream logs nothing from asyncio."""
    failed = asyncio.Event()

    async def note_failure(ctx: Run, call_next: Any) -> Any:
        try:
            return await call_next(ctx)
        finally:
            failed.set()

    reports: list[dict[str, Any]] = []
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(lambda _, context: reports.append(context))
    try:
        stream = Agent(DropsMidStream(), middleware=[note_failure]).stream("hi")
        first = await stream.__anext__()
        assert isinstance(first, TextDelta)
        await failed.wait()  # the run task ends in the same step as this wakes up
        await stream.aclose()  # type: ignore[attr-defined]
        del stream
        gc.collect()
    finally:
        loop.set_exception_handler(None)
    assert [report["message"] for report in reports] == []
