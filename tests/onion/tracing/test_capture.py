"""`tracing.capture()`: an in-process record of runs, drawn as a tree; `note` and `waited` from layers."""

from __future__ import annotations

import asyncio
import contextlib
import re
from pathlib import Path

import pytest

from middleware import cache, log, pseudonymize, rate_limit, retry
from onion import Agent, Handler, ModelCall, ModelResponse, ToolCall, ToolRequest, ToolResult, tool, tracing
from onion.errors import RateLimitedError
from onion.hooks import Block, before_each_tool
from onion.testing import ScriptedModel

TIME = re.compile(r"\d+(?:\.\d+)? (?:µs|ms|s)\b")


def timeless(text: str) -> str:
    """`text` with every duration replaced by `T` and runs of spaces by one (what a test can pin of a trace)."""
    return re.sub(r"(?<=[^\s│])  +", " ", TIME.sub("T", text))


@tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
def wipe(path: str) -> str:
    """Delete everything under a path."""
    raise AssertionError("blocked before it runs")


@before_each_tool("wipe")
def no_wipes(call: ToolCall) -> Block:
    return Block("not today")


async def no_sleep(seconds: float) -> None:
    """The retry backoff in these tests: recorded, never waited."""


def weather_agent(*script: object) -> Agent:
    model = ScriptedModel(list(script))
    stack = [log, retry(sleep=no_sleep), cache, no_wipes]
    return Agent(model, tools=[add, wipe], middleware=stack, name="calc")


async def test_print_trace_draws_each_run_as_a_tree_of_calls_layers_and_what_each_did() -> None:
    """Run, model calls (a request per attempt), the batch, its tool calls, and each call's layers with own time;
    a retry says it retried and waited, a cache hit says hit, a blocked call says blocked."""
    agent = weather_agent(
        RateLimitedError("429", retry_after=0.25),
        [ToolRequest("c1", "add", {"a": 1, "b": 2}), ToolRequest("c2", "wipe", {"path": "/"})],
        "3",
    )
    with tracing.capture() as trace:
        await agent.run("1+2, then wipe /")
        await agent.run("1+2, then wipe /")
    assert len(trace) == 2
    assert timeless(str(trace.runs[0])) == timeless(
        """\
run calc · T · 2 model requests · 0 in / 0 out tokens
├─ log T
├─ model call 1 · scripted · T · asked for 2 tools
│  ├─ log T
│  ├─ retry T retried 1x after RateLimitedError, waited 0.25 s
│  ├─ cache T (2 passes)
│  ├─ request 1 · scripted · T · RateLimitedError: 429
│  └─ request 2 · scripted · T
├─ tools [add, wipe] · T
│  ├─ log T
│  ├─ tool add(a=1, b=2) · T
│  │  ├─ log T
│  │  └─ before_each_tool(no_wipes) T
│  └─ tool wipe(path='/') · T · blocked
│     ├─ log T
│     └─ before_each_tool(no_wipes) T blocked
└─ model call 2 · scripted · T · answered
   ├─ log T
   ├─ retry T
   ├─ cache T
   └─ request 1 · scripted · T"""
    )
    second = timeless(str(trace.runs[1]))
    assert "request 1" not in second and "0 model requests" in second
    assert "model call 1 · scripted · T · cache hit · asked for 2 tools" in second
    assert "│  └─ cache T hit" in second
    assert str(trace) == f"{trace.runs[0]}\n\n{trace.runs[1]}"


async def test_a_capture_records_only_the_runs_started_in_its_own_context() -> None:
    """A run in a task started before the `with` block is not recorded, even while the capture is open."""
    go = asyncio.Event()
    agent = Agent(ScriptedModel(["inside", "outside"]), name="a")

    async def elsewhere() -> str:
        await go.wait()
        return (await agent.run("q")).output

    other = asyncio.ensure_future(elsewhere())
    with tracing.capture() as trace:
        assert (await agent.run("q")).output == "inside"
        go.set()
        assert await other == "outside"
    assert [run.result.output for run in trace.runs] == ["inside"]


async def test_chains_go_back_to_untraced_when_the_last_capture_ends() -> None:
    """Inside a capture the model chain is wrapped; after it, the agent's chain is its first layer again."""

    async def first(ctx: ModelCall, call_next: Handler) -> ModelResponse:
        return await call_next(ctx)  # type: ignore[no-any-return]

    agent = Agent(ScriptedModel(["a", "b", "c"]), middleware=[first])
    await agent.run("q")
    assert agent._compiled().model_chain.__code__ == first.__code__
    with tracing.capture():
        await agent.run("q")
        assert agent._compiled().model_chain.__code__ != first.__code__
    await agent.run("q")
    assert agent._compiled().model_chain.__code__ == first.__code__


async def test_note_and_waited_from_a_layer_show_next_to_it_and_do_nothing_untraced() -> None:
    """A layer's `note(text)` and `waited(seconds)` land on its own line; outside a trace they are no-ops."""

    async def slow_gate(ctx: ToolCall, call_next: Handler) -> ToolResult:
        tracing.waited(1.25)
        tracing.note("let through")
        return await call_next(ctx)  # type: ignore[no-any-return]

    agent = Agent(ScriptedModel([[ToolRequest("c1", "add", {"a": 1, "b": 1})], "2"] * 2), tools=[add])
    agent.use(slow_gate)
    await agent.run("1+1")
    with tracing.capture() as trace:
        await agent.run("1+1")
    assert re.search(r"slow_gate +\d+ µs  waited 1.2 s, let through$", str(trace), re.MULTILINE)


async def test_a_note_from_inside_a_tool_is_credited_to_the_tool_call_not_its_innermost_layer(tmp_path: Path) -> None:
    """`tracing.note()` in a tool lands on the tool call's line of the tree and the page, not a layer's."""

    @tool
    async def look_up(city: str) -> str:
        """Look a city up."""
        tracing.note("cache miss")
        return "sunny"

    async def gate(ctx: ToolCall, call_next: Handler) -> ToolResult:
        return await call_next(ctx)  # type: ignore[no-any-return]

    agent = Agent(ScriptedModel([[ToolRequest("c1", "look_up", {"city": "Oslo"})], "sunny"]), tools=[look_up])
    agent.use(gate)
    with tracing.capture() as trace:
        await agent.run("weather?")
    drawn = timeless(str(trace))
    assert "tool look_up(city='Oslo') · T · cache miss" in drawn
    assert not re.search(r"gate +T +.*cache miss", drawn)
    html = trace.to_html(tmp_path / "trace.html").read_text()
    [tool_row] = [line for line in html.splitlines() if 'data-kind="tool"' in line]
    assert "cache miss" in tool_row
    assert not [line for line in html.splitlines() if 'data-kind="layer"' in line and "cache miss" in line]


async def test_a_run_inside_a_tool_is_drawn_inside_that_tool_call() -> None:
    """An agent used from a tool: its run is a child of the tool call, not a separate run."""
    inner = Agent(ScriptedModel(["4"]), name="inner")

    @tool
    async def ask(question: str) -> str:
        """Ask the inner agent."""
        return (await inner.run(question)).output

    outer = Agent(ScriptedModel([[ToolRequest("c1", "ask", {"question": "2+2"})], "4"]), tools=[ask], name="outer")
    with tracing.capture() as trace:
        await outer.run("what is 2+2?")
    [run] = trace.runs
    assert "│  └─ tool ask(question='2+2') · T\n│     └─ run inner · T · 1 model request" in timeless(str(run))


async def test_a_failed_run_is_recorded_with_its_error_and_arguments_are_scrubbed() -> None:
    """The run raises out of the `with` block and is still recorded; a tool argument holding a key shows redacted."""
    key = "sk-ant-api03-" + "z" * 40
    agent = Agent(
        ScriptedModel([[ToolRequest("c1", "add", {"a": 1, "b": key})], RateLimitedError("quota")]),
        tools=[add],
        middleware=[rate_limit()],
    )
    with tracing.capture() as trace, contextlib.suppress(RateLimitedError):
        await agent.run("q")
    text = str(trace)
    assert key not in text and "b='[REDACTED]'" in text
    assert text.splitlines()[0].endswith("RateLimitedError: quota")


async def test_a_streamed_run_is_captured_like_a_run() -> None:
    """`agent.stream` inside the block: the run, its model calls and its tool call are recorded."""
    agent = Agent(ScriptedModel([[ToolRequest("c1", "add", {"a": 1, "b": 2})], "3"]), tools=[add], name="s")
    with tracing.capture() as trace:
        events = [event async for event in agent.stream("1+2")]
    assert events
    assert timeless(str(trace)) == (
        "run s · T · 2 model requests · 0 in / 0 out tokens\n"
        "├─ model call 1 · scripted · T · asked for 1 tool\n"
        "│  └─ request 1 · scripted · T\n"
        "├─ tools [add] · T\n"
        "│  └─ tool add(a=1, b=2) · T\n"
        "└─ model call 2 · scripted · T · answered\n"
        "   └─ request 1 · scripted · T"
    )


async def test_a_capture_left_open_keeps_only_its_last_max_runs_runs() -> None:
    """`capture(max_runs=3)` keeps the last 3 of 10 runs; by default the last 1,000 (so a capture left open around
    a server holds a bounded amount of memory); `max_runs=None` keeps every run; a count below 1 is refused."""

    def numbered(n: int) -> Agent:
        return Agent(ScriptedModel([f"answer {i}" for i in range(n)]))

    agent = numbered(10)
    with tracing.capture(max_runs=3) as last:
        for i in range(10):
            await agent.run(f"q{i}")
    assert len(last) == 3 and [run.result.output for run in last] == ["answer 7", "answer 8", "answer 9"]
    agent = numbered(1_001)
    with tracing.capture() as default:
        for i in range(1_001):
            await agent.run(f"q{i}")
    assert len(default) == 1_000 and default.runs[0].result.output == "answer 1"
    agent = numbered(1_001)
    with tracing.capture(max_runs=None) as every:
        for i in range(1_001):
            await agent.run(f"q{i}")
    assert len(every) == 1_001
    with pytest.raises(ValueError, match=r"capture\(max_runs=0\): keep at least one run, or None for all"):
        tracing.capture(max_runs=0)


PHONE = "+44 20 7946 0958"
EMPLOYEE = "EMP-123456"


async def pseudonymized_run() -> tuple[tracing.Trace, list[tuple[str, str]]]:
    """A run under `pseudonymize` whose tool gets a phone number and an employee id restored, captured."""
    got: list[tuple[str, str]] = []

    @tool
    def ring(phone: str, employee: str) -> str:
        """Ring an employee."""
        got.append((phone, employee))
        return f"rang {employee} on {phone}"

    asked = ToolRequest("c1", "ring", {"phone": "<PHONE_1>", "employee": "<EMPLOYEE_1>"})
    agent = Agent(ScriptedModel([[asked], "Rang <EMPLOYEE_1>."]), tools=[ring])
    agent.use(pseudonymize(EMPLOYEE=r"EMP-\d{6}"))
    with tracing.capture() as trace:
        assert (await agent.run(f"Ring {EMPLOYEE} on {PHONE}")).output == f"Rang {EMPLOYEE}."
    return trace, got


async def test_under_pseudonymize_the_tree_and_the_page_show_what_the_model_got_not_what_the_tool_got(
    tmp_path: Path,
) -> None:
    """The tool runs with a phone number and `EMP-123456` restored; the tree and the page show the placeholders."""
    trace, got = await pseudonymized_run()
    assert got == [(PHONE, EMPLOYEE)]
    page = trace.to_html(tmp_path / "trace.html").read_text()
    for shown in (str(trace), page):
        assert EMPLOYEE not in shown and "7946" not in shown
    assert "tool ring(phone='<PHONE_1>', employee='<EMPLOYEE_1>')" in str(trace)
    assert "tool ring(phone=&#x27;&lt;PHONE_1&gt;&#x27;" in page


async def test_real_values_draws_the_arguments_the_tool_got() -> None:
    """Asked for (`real_values=True`), the tree shows the arguments as the tool got them, restored."""
    from onion.tracing._html import page
    from onion.tracing._tree import tree

    trace, _ = await pseudonymized_run()
    [run] = trace.runs
    assert f"tool ring(phone='{PHONE}', employee='{EMPLOYEE}')" in tree(run, real_values=True)
    assert EMPLOYEE in page([run], real_values=True)
