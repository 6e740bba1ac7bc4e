"""Call contexts: what a layer can reach is that call's own; injection from other threads."""

from __future__ import annotations

import asyncio
import sys
import threading
from typing import Any

from onion import Agent, Message, ModelCall, Run, ToolCall, ToolRequest, tool
from onion.providers import AnthropicModel
from onion.testing import FakeProviderServer, FunctionModel, ScriptedModel, call


async def test_a_layer_writing_into_nested_settings_changes_that_call_only(server: FakeProviderServer) -> None:
    """A header set in `settings["extra_headers"]` for one user's run never goes out with another's."""

    async def end_user(ctx: ModelCall, call_next: Any) -> Any:
        if "user" in ctx.run.state:
            ctx.settings["extra_headers"]["x-end-user"] = ctx.run.state["user"]
        ctx.settings["metadata"]["tags"].append("seen")
        return await call_next(ctx)

    server.script(["for alice", "for everyone"])
    model = AnthropicModel("claude-test", base_url=server.url, api_key="test-key")
    settings = {"extra_headers": {"x-app": "shop"}, "metadata": {"tags": []}}
    agent = Agent(model, settings=settings, middleware=[end_user])
    try:
        await agent.run("orders?", state={"user": "alice"})
        await agent.run("orders?")
    finally:
        await model.aclose()
    alice, anonymous = (request.headers for request in server.requests)
    assert alice["x-end-user"] == "alice" and alice["x-app"] == "shop"
    assert "x-end-user" not in anonymous and anonymous["x-app"] == "shop"
    assert agent.settings == {"extra_headers": {"x-app": "shop"}, "metadata": {"tags": []}}


async def test_a_layer_editing_the_input_history_in_place_never_reaches_the_callers_messages() -> None:
    """Two runs continuing one shared history: in-place edits by a layer in one stay in that run."""
    history = [
        Message.user("hi"),
        Message.assistant("", [ToolRequest("c1", "lookup", {"ids": [1, 2]})]),
        Message.tool("c1", "found"),
    ]

    async def scrub(ctx: ModelCall, call_next: Any) -> Any:
        for message in ctx.messages:
            message.text = message.text.upper()
            for request in message.tool_calls:
                request.args["ids"].append(99)
        return await call_next(ctx)

    agent = Agent(ScriptedModel(["one", "two"]), middleware=[scrub])
    first = await agent.run(history)
    second = await agent.run(history)
    assert [m.text for m in history] == ["hi", "", "found"] and history[1].tool_calls[0].args == {"ids": [1, 2]}
    assert [m.text for m in first.messages[:3]] == [m.text for m in second.messages[:3]] == ["HI", "", "FOUND"]
    assert second.messages[1].tool_calls[0].args == {"ids": [1, 2, 99]}


async def test_a_tool_layer_changing_nested_args_leaves_the_recorded_tool_call_alone() -> None:
    """`ToolCall.args` is the call's own copy at every depth; the history keeps what the model sent."""

    @tool
    def total(prices: list[int]) -> int:
        """Add up prices."""
        return sum(prices)

    async def add_fee(ctx: ToolCall, call_next: Any) -> Any:
        ctx.args["prices"].append(5)
        return await call_next(ctx)

    model = ScriptedModel([[call("total", prices=[1, 2])], "done"])
    result = await Agent(model, tools=[total], middleware=[add_fee]).run("sum")
    assert result.messages[1].tool_calls[0].args == {"prices": [1, 2]}
    assert result.messages[2].text == "8"


async def test_a_tool_layer_changing_flat_args_leaves_the_recorded_tool_call_alone() -> None:
    """Flat arguments (no nested dict, list or set) are the call's own copy too."""

    async def double(ctx: ToolCall, call_next: Any) -> Any:
        ctx.args["a"] *= 2
        return await call_next(ctx)

    @tool
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    model = ScriptedModel([[call("add", a=1, b=2)], "done"])
    result = await Agent(model, tools=[add], middleware=[double]).run("sum")
    assert result.messages[1].tool_calls[0].args == {"a": 1, "b": 2}
    assert result.messages[2].text == "4"


def test_messages_injected_from_several_threads_while_the_run_flushes_are_all_kept() -> None:
    """Four threads inject 20,000 messages each while the run flushes; every one lands, in each thread's order."""
    run = Run(Agent(ScriptedModel([])), "x", [])
    threads, per_thread = 4, 20_000
    start = threading.Barrier(threads + 1)

    def inject(name: int) -> None:
        start.wait()
        for index in range(per_thread):
            run.inject(f"{name}:{index}")

    workers = [threading.Thread(target=inject, args=(name,)) for name in range(threads)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        for worker in workers:
            worker.start()
        start.wait()
        while any(worker.is_alive() for worker in workers):
            run.flush_injected()
        for worker in workers:
            worker.join()
    finally:
        sys.setswitchinterval(interval)
    run.flush_injected()
    assert len(run.messages) == threads * per_thread
    for name in range(threads):
        mine = [m.text for m in run.messages if m.text.startswith(f"{name}:")]
        assert mine == [f"{name}:{index}" for index in range(per_thread)]


async def test_messages_injected_from_another_thread_during_a_run_land_in_its_history() -> None:
    """A thread injecting while the agent loops and flushes: every message is in the result, in order."""
    injected = 2_000
    done = threading.Event()

    def respond(ctx: ModelCall) -> Any:
        return [call("wait")] if not done.is_set() else "finished"

    @tool
    def wait() -> str:
        """Let the other thread work."""
        done.wait(0.01)
        return "ok"

    async def start_thread(ctx: Run, call_next: Any) -> Any:
        def inject() -> None:
            for index in range(injected):
                ctx.inject(f"note {index}")
            done.set()

        thread = threading.Thread(target=inject)
        thread.start()
        try:
            return await call_next(ctx)
        finally:
            await asyncio.to_thread(thread.join)

    agent = Agent(FunctionModel(respond), tools=[wait], middleware=[start_thread], max_steps=10_000)
    result = await agent.run("go")
    notes = [m.text for m in result.messages if m.text.startswith("note ")]
    assert notes == [f"note {index}" for index in range(injected)]
