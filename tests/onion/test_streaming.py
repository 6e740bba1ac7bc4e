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
        await stream.aclose()
        del stream
        gc.collect()
    finally:
        loop.set_exception_handler(None)
    assert [report["message"] for report in reports] == []


class Shout:
    """A stream edit: every `TextDelta` upper-cased."""

    def __call__(self, event: Any) -> list[Any]:
        return [TextDelta(event.text.upper())] if isinstance(event, TextDelta) else [event]


class HoldAll:
    """A stream edit: holds every `TextDelta` and sends the text as one when the stream ends."""

    def __init__(self) -> None:
        self.held = ""

    def __call__(self, event: Any) -> list[Any]:
        if isinstance(event, TextDelta):
            self.held += event.text
            return []
        if isinstance(event, StreamReset):
            self.held = ""
        return [event]

    def end(self) -> list[Any]:
        held, self.held = self.held, ""
        return [TextDelta(held)] if held else []


async def shouting(ctx: ModelCall, call_next: Any) -> Any:
    """Upper-cases the streamed deltas and the answer alike."""
    with ctx.edit_stream(Shout()):
        response = await call_next(ctx)
    return ModelResponse(Message.assistant(response.text.upper()), response.usage)


async def test_a_layer_rewrites_its_calls_streamed_deltas_and_the_consumer_sees_no_reset() -> None:
    """An edit rewrites each delta as it streams: the consumer sees the rewritten pieces, no `StreamReset`."""
    events, output = await stream_all(Agent(ScriptedModel(["a fairly long quiet answer"]), middleware=[shouting]))
    deltas = [event.text for event in events if isinstance(event, TextDelta)]
    assert len(deltas) > 1 and "".join(deltas) == "A FAIRLY LONG QUIET ANSWER" == output
    assert not any(isinstance(event, StreamReset) for event in events)


async def test_a_layer_holds_back_deltas_until_the_stream_ends() -> None:
    """An edit that returns nothing holds a delta back; what its `end()` returns goes out before the call finishes."""

    async def hold(ctx: ModelCall, call_next: Any) -> Any:
        with ctx.edit_stream(HoldAll()):
            return await call_next(ctx)

    events, output = await stream_all(Agent(ScriptedModel(["a fairly long answer"]), middleware=[hold]))
    assert [type(event).__name__ for event in events] == ["TextDelta", "ModelCallFinished", "RunFinished"]
    assert events[0] == TextDelta("a fairly long answer") and output == "a fairly long answer"


async def test_inner_edits_run_first_and_an_outer_observer_sees_what_they_sent_on() -> None:
    """Deltas flow out like responses: the inner layer's edit first, then those registered before it, last first."""
    seen: list[str] = []

    async def watch_and_hold(ctx: ModelCall, call_next: Any) -> Any:
        ctx.observe(lambda event: seen.append(event.text) if isinstance(event, TextDelta) else None)
        with ctx.edit_stream(HoldAll()):
            return await call_next(ctx)

    events, output = await stream_all(
        Agent(ScriptedModel(["a fairly long answer"]), middleware=[watch_and_hold, shouting])
    )
    assert seen == ["A FAIRLY LONG ANSWER"]
    assert [event.text for event in events if isinstance(event, TextDelta)] == ["A FAIRLY LONG ANSWER"] == [output]


async def test_an_edit_inside_retry_edits_each_attempt_once_and_drops_what_the_dropped_attempt_held() -> None:
    """Under `retry`, `with ctx.edit_stream(...)` lasts one attempt: the retried stream is edited once, reset first."""
    from middleware import retry

    class DropsThenAnswers(ScriptedModel):
        async def stream(self, call: ModelCall) -> AsyncIterator[Any]:
            if not self.requests:
                self.requests.append(call)
                yield TextDelta("half an ")
                raise ConnectionLostError("dropped mid-stream")
            async for item in super().stream(call):
                yield item

    async def no_sleep(seconds: float) -> None:
        return None

    held: list[HoldAll] = []

    async def hold(ctx: ModelCall, call_next: Any) -> Any:
        held.append(HoldAll())
        with ctx.edit_stream(held[-1]):
            return await call_next(ctx)

    agent = Agent(DropsThenAnswers(["the whole answer"]), middleware=[shouting, retry(sleep=no_sleep), hold])
    events, output = await stream_all(agent)
    assert output == "THE WHOLE ANSWER" and shown(events) == ["THE WHOLE ANSWER"]
    assert [event.text for event in events if isinstance(event, TextDelta)] == ["THE WHOLE ANSWER"]
    assert len(held) == 2 and held[0].held == "half an "


async def test_a_consumer_editing_nested_tool_call_arguments_leaves_the_history_alone() -> None:
    """`ToolCallStarted.args` is the event's own copy, nested lists included."""
    from onion import ToolCallStarted, tool
    from onion.testing import ScriptedModel, call

    @tool
    def tag(labels: list[str]) -> str:
        """Tag."""
        return ",".join(labels)

    agent = Agent(ScriptedModel([[call("tag", labels=["a"])], "ok"]), tools=[tag])
    events = [event async for event in agent.stream("go")]
    started = next(event for event in events if isinstance(event, ToolCallStarted))
    started.args["labels"].append("tampered")
    result = events[-1].result  # type: ignore[union-attr]
    assert result.messages[1].tool_calls[0].args == {"labels": ["a"]}


class Hang:
    """A tool that waits until cancelled, noting that it was and whether it ever finished."""

    def __init__(self) -> None:
        self.cancelled = asyncio.Event()
        self.finished = False

    def tool(self) -> Any:
        from onion import tool

        @tool
        async def hang() -> str:
            """Wait a long time."""
            try:
                await asyncio.sleep(0.5)
            except asyncio.CancelledError:
                self.cancelled.set()
                raise
            self.finished = True
            return "done"

        return hang


def hanging_agent(hang: Hang, *middleware: Any) -> Agent:
    from onion.testing import call

    return Agent(ScriptedModel([[call("hang")], "ok"]), tools=[hang.tool()], middleware=middleware)


async def test_breaking_out_of_a_kept_stream_cancels_the_run() -> None:
    """`stream = agent.stream(...)`, then `break` out of `async for event in stream`: the tool is cancelled,
    though `stream` is still referenced."""
    from onion import ToolCallStarted

    hang = Hang()
    stream = hanging_agent(hang).stream("go")
    async for event in stream:
        if isinstance(event, ToolCallStarted):
            break
    await asyncio.wait_for(hang.cancelled.wait(), 2)
    assert not hang.finished
    assert [event async for event in stream] == []  # a stream left is over: read again, it has nothing


async def test_breaking_out_of_a_kept_resume_stream_cancels_the_resumed_run() -> None:
    """The issue's case: `stream = agent.resume_stream(state)`, `break` when the next tool starts: it never finishes."""
    from middleware import approve
    from onion import ToolCallStarted, tool
    from onion.testing import call

    @tool
    def note() -> str:
        """Note something down."""
        return "noted"

    hang = Hang()
    model = ScriptedModel([[call("note")], [call("hang")], "ok"])
    agent = Agent(model, tools=[note, hang.tool()], middleware=[approve("note")])
    paused = await agent.run("go")
    state = paused.to_state()
    state.approve(paused.pending[0].id)
    stream = agent.resume_stream(state)
    async for event in stream:
        if isinstance(event, ToolCallStarted):
            break
    await asyncio.wait_for(hang.cancelled.wait(), 2)
    assert not hang.finished


async def test_leaving_an_async_with_stream_cancels_the_run_before_the_block_ends() -> None:
    """`async with agent.stream(...) as events:`: when the block ends (break or not), the run is over."""
    from onion import ToolCallStarted

    hang = Hang()
    async with hanging_agent(hang).stream("go") as events:
        async for event in events:
            if isinstance(event, ToolCallStarted):
                await asyncio.sleep(0)  # the tool has started
                break
    assert hang.cancelled.is_set() and not hang.finished


async def test_aclose_cancels_the_run_and_a_stream_closed_before_reading_never_starts_one() -> None:
    """`await stream.aclose()` ends the run at once; closed before its first event, no model is asked."""
    hang = Hang()
    stream = hanging_agent(hang).stream("go")
    await stream.__anext__()
    await stream.__anext__()  # the tool call started
    await stream.aclose()
    assert hang.cancelled.is_set() and not hang.finished

    model = ScriptedModel(["never"])
    unread = Agent(model).stream("go")
    await unread.aclose()
    assert model.requests == [] and [event async for event in unread] == []
