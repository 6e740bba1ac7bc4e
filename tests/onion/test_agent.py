"""The agent loop: tools, injection at safe points, history checks, limits, cancellation."""

from __future__ import annotations

import asyncio
import threading
from typing import Annotated, Any

import pytest
from forker import Forker
from pydantic import Field

from onion import (
    Agent,
    Message,
    ModelCall,
    ModelResponse,
    Run,
    RunFinished,
    TextDelta,
    ToolBatch,
    ToolCall,
    ToolCallStarted,
    ToolRequest,
    ToolResult,
    ToolResultEvent,
    Usage,
    check_history,
    tool,
)
from onion.errors import MaxStepsExceeded, MessageOrderError, ScriptExhausted
from onion.testing import FunctionModel, ScriptedModel, call


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
async def fail(reason: str) -> str:
    """Always fails."""
    raise ValueError(reason)


async def test_final_answer_without_tools_ends_the_run() -> None:
    result = await Agent(ScriptedModel(["hello"]), instructions="Be brief.").run("hi")
    assert result.output == "hello"
    assert [(m.role, m.text) for m in result.messages] == [
        ("system", "Be brief."),
        ("user", "hi"),
        ("assistant", "hello"),
    ]


async def test_tool_results_follow_their_calls_in_call_order() -> None:
    """The first call finishes last (it waits for the second), yet its result comes first."""
    second_done = asyncio.Event()
    finished: list[str] = []

    @tool
    async def echo(text: str) -> str:
        if text == "first":
            await second_done.wait()
        else:
            second_done.set()
        finished.append(text)
        return text

    script = [[call("echo", text="first"), call("echo", text="second")], "ok"]
    result = await Agent(ScriptedModel(script), tools=[echo]).run("go")
    assert finished == ["second", "first"]
    assert [m.text for m in result.messages if m.role == "tool"] == ["first", "second"]
    check_history(result.messages)


async def test_batch_calls_run_concurrently() -> None:
    """Three calls of one batch each wait until all three are running: only concurrent calls can finish."""
    running = 0
    all_running = asyncio.Event()

    @tool
    async def busy() -> str:
        nonlocal running
        running += 1
        if running == 3:
            all_running.set()
        await all_running.wait()
        return "done"

    agent = Agent(ScriptedModel([[call("busy"), call("busy"), call("busy")], "ok"]), tools=[busy])
    async with asyncio.timeout(10):
        await agent.run("go")
    assert running == 3


async def test_parallel_tools_false_runs_calls_one_at_a_time() -> None:
    order: list[str] = []

    @tool
    async def step(name: str) -> str:
        order.append(f"start {name}")
        await asyncio.sleep(0)  # a parallel batch would start the next call here
        order.append(f"end {name}")
        return name

    agent = Agent(ScriptedModel([[call("step", name="a"), call("step", name="b")], "ok"]), tools=[step])
    agent.parallel_tools = False
    await agent.run("go")
    assert order == ["start a", "end a", "start b", "end b"]


async def test_sync_tools_run_in_a_worker_thread() -> None:
    threads: list[int] = []

    @tool
    def where() -> str:
        threads.append(threading.get_ident())
        return "here"

    await Agent(ScriptedModel([[call("where")], "ok"]), tools=[where]).run("go")
    assert threads and threads[0] != threading.get_ident()


async def test_errors_become_results_the_model_can_act_on_and_siblings_still_run() -> None:
    script = [[call("add", a=1, b="two"), call("nope", x=1), call("fail", reason="disk full"), call("add", a=2, b=2)]]
    model = ScriptedModel([*script, "ok"])
    result = await Agent(model, tools=[add, fail]).run("go")
    bad_args, unknown, raised, good = [m for m in result.messages if m.role == "tool"]
    assert bad_args.is_error and "b:" in bad_args.text and "'two'" in bad_args.text
    assert unknown.is_error and "Unknown tool 'nope'" in unknown.text and "add, fail" in unknown.text
    assert raised.is_error and "ValueError: disk full" in raised.text
    assert not good.is_error and good.text == "4"


async def test_malformed_json_arguments_become_an_error_result() -> None:
    request = ToolRequest(id="t1", name="add", args={}, raw_args='{"a": 1,')
    model = ScriptedModel([ModelResponse(Message.assistant("", [request])), "ok"])
    result = await Agent(model, tools=[add]).run("go")
    answer = result.messages[-2]
    assert answer.is_error and "not valid JSON" in answer.text and answer.tool_call_id == "t1"


async def test_layer_may_change_arguments_before_validation() -> None:
    async def fix_args(ctx: ToolCall, call_next: Any) -> Any:
        ctx.args = {"a": int(ctx.args["a"]), "b": 10}
        return await call_next(ctx)

    result = await Agent(ScriptedModel([[call("add", a="5", b="x")], "ok"]), tools=[add], middleware=[fix_args]).run("")
    assert result.messages[-2].text == "15"


async def test_tool_schema_comes_from_signature_and_docstring() -> None:
    @tool(name="search_web")
    def search(query: Annotated[str, Field(description="What to look for")], limit: int = 5) -> list[str]:
        """Search the web.

        Longer text that is not part of the description.
        """
        return []

    assert search.name == "search_web" and search.description == "Search the web."
    assert search.parameters["properties"]["query"]["description"] == "What to look for"
    assert search.parameters["required"] == ["query"]
    assert search.parameters["properties"]["limit"]["default"] == 5


async def test_tool_may_take_the_tool_call_for_run_state() -> None:
    @tool
    def remember(note: str, ctx: ToolCall) -> str:
        ctx.run.state.setdefault("notes", []).append(note)
        return "saved"

    assert "ctx" not in remember.parameters["properties"]
    result = await Agent(ScriptedModel([[call("remember", note="milk")], "ok"]), tools=[remember]).run("go")
    assert result.state["notes"] == ["milk"]


async def test_injected_messages_land_after_the_batch_results() -> None:
    async def nag(ctx: ToolCall, call_next: Any) -> Any:
        ctx.run.inject("Double-check that.")
        return await call_next(ctx)

    model = ScriptedModel([[call("add", a=1, b=2), call("add", a=3, b=4)], "ok"])
    result = await Agent(model, tools=[add], middleware=[nag]).run("go")
    roles = [m.role for m in model.requests[1].messages]
    assert roles == ["user", "assistant", "tool", "tool", "user", "user"]
    check_history(result.messages)


async def test_injection_after_the_final_answer_is_kept() -> None:
    async def note(ctx: ModelCall, call_next: Any) -> Any:
        response = await call_next(ctx)
        ctx.run.inject(Message.user("thanks"))
        return response

    result = await Agent(ScriptedModel(["bye"]), middleware=[note]).run("x")
    assert result.messages[-1].text == "thanks"


async def test_broken_history_is_caught_before_the_model_sees_it() -> None:
    async def drop_results(ctx: ModelCall, call_next: Any) -> Any:
        ctx.messages = [m for m in ctx.messages if m.role != "tool"]
        return await call_next(ctx)

    model = ScriptedModel([[call("add", a=1, b=2)], "ok"])
    with pytest.raises(MessageOrderError, match="unanswered tool call") as error:
        await Agent(model, tools=[add], middleware=[drop_results]).run("go")
    assert error.value.index == 1 and len(model.requests) == 1


def test_history_check_names_the_offending_message() -> None:
    asked = Message.assistant("", [ToolRequest("a", "add"), ToolRequest("b", "add")])
    with pytest.raises(MessageOrderError, match="message 2 answers tool call 'b'"):
        check_history([Message.user("x"), asked, Message.tool("b", "1"), Message.tool("a", "2")])
    with pytest.raises(MessageOrderError, match="message 0 is a tool result"):
        check_history([Message.tool("a", "1")])
    with pytest.raises(MessageOrderError, match="unanswered"):
        check_history([Message.user("x"), asked, Message.tool("a", "1")])
    with pytest.raises(MessageOrderError, match=r"message 3 \(user\) comes before tool call\(s\) b were answered"):
        check_history([Message.user("x"), asked, Message.tool("a", "1"), Message.user("y")])
    check_history([Message.user("x"), asked, Message.tool("a", "1"), Message.tool("b", "2"), Message.user("y")])


async def test_max_steps_stops_with_every_call_answered() -> None:
    model = FunctionModel(lambda c: [call("add", a=1, b=1)])
    with pytest.raises(MaxStepsExceeded, match="max_steps=3") as error:
        await Agent(model, tools=[add], max_steps=3).run("loop forever")
    assert len(model.requests) == 3
    check_history(error.value.messages)
    assert error.value.messages[-1].is_error and error.value.usage.requests == 3


async def test_usage_adds_up_over_model_calls() -> None:
    def answer(c: ModelCall) -> Any:
        usage = Usage(input_tokens=10, output_tokens=5, requests=1)
        if len(c.messages) == 1:
            return ModelResponse(Message.assistant("", [ToolRequest("t", "add", {"a": 1, "b": 1})]), usage)
        return ModelResponse(Message.assistant("2"), usage)

    result = await Agent(FunctionModel(answer), tools=[add]).run("x")
    assert (result.usage.input_tokens, result.usage.output_tokens, result.usage.requests) == (20, 10, 2)


async def test_script_past_its_end_says_so() -> None:
    with pytest.raises(ScriptExhausted, match="response 2 but its script has 1"):
        await Agent(ScriptedModel([[call("add", a=1, b=1)]]), tools=[add]).run("x")


async def test_model_calls_get_copies_of_messages_and_tools() -> None:
    async def trim(ctx: ModelCall, call_next: Any) -> Any:
        ctx.messages.append(Message.user("extra"))
        ctx.tools.clear()
        return await call_next(ctx)

    model = ScriptedModel(["ok"])
    agent = Agent(model, tools=[add], middleware=[trim])
    result = await agent.run("x")
    assert [m.text for m in result.messages] == ["x", "ok"] and agent.tools == [add]
    assert model.requests[0].tools == []


async def test_continue_a_conversation_from_its_messages() -> None:
    first = await Agent(ScriptedModel(["one"]), instructions="sys").run("a")
    model = ScriptedModel(["two"])
    second = await Agent(model, instructions="sys").run([*first.messages, Message.user("b")])
    assert [m.role for m in second.messages] == ["system", "user", "assistant", "user", "assistant"]


async def test_state_is_shared_by_layers_and_returned() -> None:
    async def count(ctx: ToolBatch, call_next: Any) -> Any:
        ctx.run.state["batches"] = ctx.run.state.get("batches", 0) + 1
        return await call_next(ctx)

    result = await Agent(ScriptedModel([[call("add", a=1, b=1)], "ok"]), tools=[add], middleware=[count]).run(
        "x", state={"user": "ada"}
    )
    assert result.state == {"user": "ada", "batches": 1}


async def test_cancelling_a_run_cancels_its_tools_and_leaves_no_task() -> None:
    started = asyncio.Event()
    cancelled: list[str] = []

    @tool
    async def hang(name: str) -> str:
        started.set()
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            cancelled.append(name)
            raise
        return name

    agent = Agent(ScriptedModel([[call("hang", name="a"), call("hang", name="b")], "ok"]), tools=[hang])
    before = asyncio.all_tasks()
    task = asyncio.create_task(agent.run("go"))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert sorted(cancelled) == ["a", "b"]
    assert asyncio.all_tasks() - before - {asyncio.current_task()} == set()


async def test_cancelled_run_stops_waiting_for_a_sync_tool() -> None:
    """Cancelling a run ends it while its sync tool's thread is still blocked."""
    started, release = threading.Event(), threading.Event()

    @tool
    def block() -> str:
        started.set()
        release.wait(10)
        return "late"

    agent = Agent(ScriptedModel([[call("block")], "ok"]), tools=[block])
    task = asyncio.ensure_future(agent.run("go"))
    try:
        await asyncio.to_thread(started.wait, 10)
        task.cancel()
        done, _ = await asyncio.wait({task}, timeout=10)
        assert task in done and task.cancelled() and not release.is_set()
    finally:
        release.set()


def test_run_sync_runs_without_a_loop_and_refuses_inside_one() -> None:
    assert Agent(ScriptedModel(["ok"])).run_sync("x").output == "ok"

    async def inside() -> None:
        with pytest.raises(RuntimeError, match=r"await agent\.run"):
            Agent(ScriptedModel(["ok"])).run_sync("x")

    asyncio.run(inside())


async def test_stream_yields_deltas_tool_results_and_the_result_last() -> None:
    agent = Agent(ScriptedModel([[call("add", a=1, b=2)], "the answer is 3"]), tools=[add])
    events = [event async for event in agent.stream("go")]
    assert isinstance(events[0], ToolCallStarted)
    assert [e.result.content for e in events if isinstance(e, ToolResultEvent)] == ["3"]
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "the answer is 3"
    assert isinstance(events[-1], RunFinished) and events[-1].result.output == "the answer is 3"


async def test_short_circuited_call_still_streams_its_text() -> None:
    async def canned(ctx: ModelCall, call_next: Any) -> ModelResponse:
        return ModelResponse(Message.assistant("cached answer"), cached=True)

    events = [event async for event in Agent(ScriptedModel([]), middleware=[canned]).stream("go")]
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["cached answer"]


async def test_layers_observe_streamed_deltas() -> None:
    seen: list[str] = []

    async def watch(ctx: ModelCall, call_next: Any) -> Any:
        ctx.observe(lambda event: seen.append(event.text) if isinstance(event, TextDelta) else None)
        return await call_next(ctx)

    agent = Agent(ScriptedModel(["a fairly long answer"]), middleware=[watch])
    [event async for event in agent.stream("go")]
    assert "".join(seen) == "a fairly long answer" and len(seen) > 1


async def test_leaving_a_stream_early_cancels_the_run() -> None:
    cancelled = asyncio.Event()

    @tool
    async def hang() -> str:
        try:
            await asyncio.sleep(10)
        finally:
            cancelled.set()
        return "x"

    stream = Agent(ScriptedModel([[call("hang")], "ok"]), tools=[hang]).stream("go")
    async for event in stream:
        if isinstance(event, ToolCallStarted):
            break
    await stream.aclose()
    assert cancelled.is_set()


def test_model_strings_need_a_known_provider() -> None:
    with pytest.raises(ValueError, match="unknown model string"):
        Agent("gemini:pro")


def test_duplicate_tool_names_are_refused() -> None:
    with pytest.raises(ValueError, match="share the name 'add'"):
        Agent(ScriptedModel([]), tools=[add, add])


async def test_a_retried_stream_tells_the_consumer_to_discard_its_partial_text() -> None:
    from collections.abc import AsyncIterator

    from onion import StreamReset
    from onion.errors import ConnectionLostError

    class DropsOnce:
        name = "drops-once"

        def __init__(self) -> None:
            self.attempts = 0

        async def request(self, call: ModelCall) -> ModelResponse:
            raise AssertionError("only streamed here")

        async def stream(self, call: ModelCall) -> AsyncIterator[Any]:
            self.attempts += 1
            yield TextDelta("Hel")
            if self.attempts == 1:
                raise ConnectionLostError("dropped mid-stream")
            yield TextDelta("lo")
            yield ModelResponse(Message.assistant("Hello"))

    async def retry_once(ctx: ModelCall, call_next: Any) -> Any:
        try:
            return await call_next(ctx)
        except ConnectionLostError:
            return await call_next(ctx)

    events = [e async for e in Agent(DropsOnce(), middleware=[retry_once]).stream("hi")]
    kinds = [type(e).__name__ for e in events]
    assert kinds[:5] == ["TextDelta", "StreamReset", "TextDelta", "TextDelta", "ModelCallFinished"]
    after_reset = events[kinds.index("StreamReset") + 1 :]
    assert "".join(e.text for e in after_reset if isinstance(e, TextDelta)) == "Hello"
    assert isinstance(events[1], StreamReset)


async def test_agent_closes_a_client_it_built_from_a_model_string(monkeypatch: pytest.MonkeyPatch) -> None:
    from onion.testing import FakeProviderServer

    with FakeProviderServer(["hello"]) as server:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        async with Agent("anthropic:claude-test") as agent:
            assert (await agent.run("hi")).output == "hello"
            client = agent.model.client  # type: ignore[attr-defined]
        assert client.is_closed()


async def test_agent_leaves_a_model_object_it_was_given_open() -> None:
    class Closable(ScriptedModel):
        closed = False

        async def aclose(self) -> None:
            self.closed = True

    model = Closable(["ok"])
    async with Agent(model) as agent:
        await agent.run("x")
    assert not model.closed


async def test_a_batch_that_raises_leaves_every_call_answered_for_a_run_layer_that_goes_on() -> None:
    """A tools layer raising: the calls are answered with errors, so a run layer may catch and run again."""

    class Flaky(Exception):
        pass

    failures = [Flaky("once")]

    async def fails_once(ctx: ToolBatch, call_next: Any) -> Any:
        if failures:
            raise failures.pop()
        return await call_next(ctx)

    async def try_again(ctx: Run, call_next: Any) -> Any:
        try:
            return await call_next(ctx)
        except Flaky:
            return await call_next(ctx)

    model = ScriptedModel([[call("add", a=1, b=2), call("add", a=3, b=4)], "ok"])
    result = await Agent(model, tools=[add], middleware=[try_again, fails_once]).run("go")
    check_history(result.messages)
    assert [m.is_error for m in result.messages if m.role == "tool"] == [True, True]
    assert "Flaky" in result.messages[-2].text


async def test_a_cancelled_batch_leaves_the_history_valid() -> None:
    """Cancelling a run mid-batch answers every call of the batch before the cancellation propagates."""
    started = asyncio.Event()
    seen: list[list[Message]] = []

    @tool
    async def hang() -> str:
        started.set()
        await asyncio.sleep(10)
        return "late"

    async def keep(ctx: Run, call_next: Any) -> Any:
        try:
            return await call_next(ctx)
        finally:
            seen.append(list(ctx.messages))

    agent = Agent(ScriptedModel([[call("hang"), call("add", a=1, b=1)], "ok"]), tools=[hang, add], middleware=[keep])
    task = asyncio.create_task(agent.run("go"))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    check_history(seen[0])
    assert "cancelled" in seen[0][-1].text


async def test_messages_a_run_layer_injects_after_the_run_are_kept() -> None:
    """Injected at the end of the run (after call_next of a run layer) still lands in the result."""

    async def closing_note(ctx: Run, call_next: Any) -> Any:
        result = await call_next(ctx)
        ctx.inject("noted")
        return result

    result = await Agent(ScriptedModel(["bye"]), middleware=[closing_note]).run("x")
    assert [m.text for m in result.messages] == ["x", "bye", "noted"]


@pytest.mark.parametrize("parallel", [True, False])
async def test_a_tools_layer_may_pass_on_an_empty_batch(parallel: bool) -> None:
    """A tools layer that answers every call itself may still call the inner layers with no calls left."""

    async def answer_all(ctx: ToolBatch, call_next: Any) -> Any:
        calls, ctx.calls = ctx.calls, []
        assert await call_next(ctx) == []
        return [ToolResult(content="mine", call_id=c.id) for c in calls]

    agent = Agent(ScriptedModel([[call("add", a=1, b=1), call("add", a=2, b=2)], "ok"]), tools=[add])
    agent.parallel_tools = parallel
    result = await agent.use(answer_all).run("go")
    assert [m.text for m in result.messages if m.role == "tool"] == ["mine", "mine"]


async def test_an_injection_that_races_the_flush_is_not_lost() -> None:
    """A message injected while queued ones are being appended (a sync tool's thread) lands later."""

    class InjectsWhileExtending(list[Message]):
        run: Any = None

        def extend(self, messages: Any) -> None:
            super().extend(messages)
            if self.run is not None:
                run, self.run = self.run, None
                run.inject("from a worker thread")

    async def racing(ctx: Run, call_next: Any) -> Any:
        messages = InjectsWhileExtending(ctx.messages)
        messages.run = ctx
        ctx.messages = messages
        ctx.inject("queued")
        return await call_next(ctx)

    result = await Agent(ScriptedModel(["ok"]), middleware=[racing]).run("x")
    assert [m.text for m in result.messages] == ["x", "queued", "ok", "from a worker thread"]


async def test_tool_parameters_may_share_names_with_pydantic_model_attributes() -> None:
    """`schema`, `json`, `copy`... are ordinary parameter names: no warning, and the tool works."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")

        @tool
        def query(schema: str, json: bool = False) -> str:
            """Query a database schema."""
            return f"{schema} {json}"

    result = await Agent(ScriptedModel([[call("query", schema="public")], "ok"]), tools=[query]).run("x")
    assert result.messages[-2].text == "public False"


def test_a_tool_parameter_pydantic_cannot_take_is_refused_by_name() -> None:
    """A parameter that could never be passed is a TypeError naming the tool and the parameter."""

    def leaky(_secret: str) -> str:
        return _secret

    with pytest.raises(TypeError, match="tool leaky: rename the parameter '_secret'"):
        tool(leaky)


def test_a_duplicate_tool_name_is_named_alone() -> None:
    """The error names the duplicated name, not every tool of the agent."""

    @tool
    def lookup(query: str) -> str:
        """Look up."""
        return query

    @tool(name="lookup")
    def other(query: str) -> str:
        """Look up elsewhere."""
        return query

    @tool
    def unrelated() -> str:
        """Unrelated."""
        return ""

    with pytest.raises(ValueError, match=r"^two tools share the name 'lookup': rename one") as error:
        Agent(ScriptedModel(["x"]), tools=[lookup, other, unrelated])
    assert "unrelated" not in str(error.value)


async def test_a_model_returning_the_wrong_type_is_blamed_not_the_layers() -> None:
    """A model whose request() returns a str raises a TypeError naming the model, not a MiddlewareError."""

    class Broken:
        name = "broken"

        async def request(self, call: ModelCall) -> Any:
            return "just text"

        def __repr__(self) -> str:
            return "<Broken>"

    async def passthrough(ctx: ModelCall, call_next: Any) -> Any:
        return await call_next(ctx)

    with pytest.raises(TypeError, match=r"model <Broken> returned str 'just text' where request\(\) must return"):
        await Agent(Broken(), middleware=[passthrough]).run("x")


async def test_usage_counts_every_response_the_model_produced_even_those_a_layer_rejected() -> None:
    """Three responses, two refused by a layer inside a retrying layer: the run's usage shows all three."""

    async def try_three_times(ctx: ModelCall, call_next: Any) -> Any:
        for _ in range(2):
            try:
                return await call_next(ctx)
            except ValueError:
                pass
        return await call_next(ctx)

    async def refuse_drafts(ctx: ModelCall, call_next: Any) -> Any:
        response = await call_next(ctx)
        if response.text.startswith("draft"):
            raise ValueError("not final")
        return response

    usage = Usage(input_tokens=10, output_tokens=5, requests=1)
    script = [ModelResponse(Message.assistant(text), usage) for text in ("draft 1", "draft 2", "final")]
    agent = Agent(ScriptedModel(script), middleware=[try_three_times, refuse_drafts])
    result = await agent.run("x")
    assert result.output == "final"
    assert (result.usage.input_tokens, result.usage.output_tokens, result.usage.requests) == (30, 15, 3)


async def test_a_response_a_layer_rebuilds_or_makes_itself_is_counted_once() -> None:
    """A layer re-wrapping the model's response (same usage) adds nothing; one it makes itself counts."""

    async def rewrap(ctx: ModelCall, call_next: Any) -> Any:
        response = await call_next(ctx)
        return ModelResponse(Message.assistant(response.text.upper()), response.usage)

    usage = Usage(input_tokens=10, output_tokens=5, requests=1)
    rewrapped = await Agent(ScriptedModel([ModelResponse(Message.assistant("ok"), usage)]), middleware=[rewrap]).run(
        "x"
    )
    assert (rewrapped.output, rewrapped.usage) == ("OK", Usage(10, 5, 1))

    async def answer(ctx: ModelCall, call_next: Any) -> Any:
        return ModelResponse(Message.assistant("from elsewhere"), Usage(input_tokens=7, requests=1))

    made = await Agent(ScriptedModel([]), middleware=[answer]).run("x")
    assert made.usage == Usage(7, 0, 1)


def test_processes_forked_after_import_onion_give_their_runs_ids_of_their_own(forker: Forker) -> None:
    """Workers forked from one process that imported onion (a pre-fork server, the test forker): run ids differ."""
    code = (
        "from onion import Agent; from onion.testing import ScriptedModel; "
        "print(Agent(ScriptedModel(['hi'])).run_sync('x').run_id)"
    )
    ids = [forker.run("-c", code, timeout=60).stdout.strip() for _ in range(3)]
    assert all(ids) and len(set(ids)) == 3, ids
