"""The SDK path: the workload through the real OpenAI SDK over HTTP, onion against a hand loop on the raw SDK.

A `FakeProviderServer` in a process of its own answers Chat Completions by
step (three `add` calls after the question, the answer after their results),
as JSON or as server-sent events. onion runs `Agent(OpenAIChatModel(client=...))`
(`run`, and `stream` for the streamed case); the hand loop calls
`client.chat.completions.create` itself, validates the arguments with pydantic,
gathers the tools and sends their results back. Both share one SDK client.
A third case starts 200 runs at once on each. What is timed is the CPU time
of the client's process (`time.process_time`): the server's work and the
waits on it are the same for both systems, and would only add noise.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

from .hand_loop import AddArguments
from .table import Row
from .timing import Batch, Scale, interleaved
from .workload import FINAL, QUESTION, add

SECTION = "loop"
CONCURRENT = 200
"""Runs started at once in the concurrent case (20 at smoke size)."""

SERVER = """
import sys, threading
from onion import Message, ModelResponse, ToolRequest, Usage
from onion.testing import FakeProviderServer

CALLS = [ToolRequest(f"call_{i}", "add", {"a": a, "b": b}) for i, (a, b) in enumerate(((1, 2), (3, 4), (5, 6)))]

def respond(request):
    server.requests.clear()  # keeps nothing: one server serves every run
    if request.body["messages"][-1]["role"] == "user":
        return ModelResponse(Message.assistant("", CALLS), Usage(input_tokens=10, output_tokens=10))
    return ModelResponse(Message.assistant("sums: 3,7,11"), Usage(input_tokens=20, output_tokens=5))

server = FakeProviderServer(respond=respond, chunk_size=64).start()
print(server.openai_url, flush=True)
sys.stdin.read()
server.close()
"""

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "add",
            "description": "Add two integers.",
            "parameters": {
                "type": "object",
                "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                "required": ["a", "b"],
            },
        },
    }
]


async def hand_run(client: Any, streamed: bool) -> str:
    """The workload on the raw SDK: what a program without onion writes."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": QUESTION}]
    while True:
        if streamed:
            text, calls = await _streamed_reply(client, messages)
        else:
            reply = await client.chat.completions.create(model="gpt-test", messages=messages, tools=TOOLS)
            message = reply.choices[0].message
            text = message.content or ""
            calls = [(c.id, c.function.name, c.function.arguments) for c in message.tool_calls or ()]
        if not calls:
            return text
        messages.append(
            {
                "role": "assistant",
                "content": text or None,
                "tool_calls": [
                    {"id": i, "type": "function", "function": {"name": n, "arguments": a}} for i, n, a in calls
                ],
            }
        )
        results = await asyncio.gather(*(_tool(arguments) for _, _, arguments in calls))
        answered = zip(calls, results, strict=True)
        messages.extend({"role": "tool", "tool_call_id": i, "content": result} for (i, _, _), result in answered)


async def _tool(arguments: str) -> str:
    parsed = AddArguments.model_validate(json.loads(arguments))
    return str(await add(parsed.a, parsed.b))


async def _streamed_reply(client: Any, messages: list[dict[str, Any]]) -> tuple[str, list[tuple[str, str, str]]]:
    stream = await client.chat.completions.create(model="gpt-test", messages=messages, tools=TOOLS, stream=True)
    text: list[str] = []
    calls: dict[int, list[str]] = {}
    async for chunk in stream:
        if not chunk.choices:
            continue
        delta = chunk.choices[0].delta
        if delta.content:
            text.append(delta.content)
        for part in delta.tool_calls or ():
            call = calls.setdefault(part.index, ["", "", ""])
            if part.id:
                call[0] = part.id
            if part.function is not None:
                call[1] += part.function.name or ""
                call[2] += part.function.arguments or ""
    return "".join(text), [(c[0], c[1], c[2]) for _, c in sorted(calls.items())]


def batch_of(run: Callable[[], Awaitable[str]], at_once: int = 1) -> Batch:
    async def batch(n: int) -> float:
        start = time.process_time()
        for _ in range(n):
            if at_once == 1:
                answer = await run()
            else:
                answers = await asyncio.gather(*(run() for _ in range(at_once)))
                answer = answers[0] if len(set(answers)) == 1 else "mixed answers"
            if answer != FINAL:
                raise AssertionError(f"wrong answer over the SDK: {answer!r}")
        return time.process_time() - start

    return batch


async def measure(url: str, scale: Scale, at_once: int) -> dict[str, float]:
    from openai import AsyncOpenAI

    from onion import Agent, tool
    from onion.providers import OpenAIChatModel

    client = AsyncOpenAI(base_url=url, api_key="bench", max_retries=0)
    agent = Agent(OpenAIChatModel("gpt-test", client=client), tools=[tool(add)], checked=False)

    async def onion_run() -> str:
        return (await agent.run(QUESTION)).output

    async def onion_stream() -> str:
        final = None
        async for event in agent.stream(QUESTION):
            final = event
        return str(getattr(getattr(final, "result", None), "output", ""))

    cases: dict[str, Batch] = {
        "onion JSON": batch_of(onion_run),
        "hand JSON": batch_of(lambda: hand_run(client, False)),
        "onion stream": batch_of(onion_stream),
        "hand stream": batch_of(lambda: hand_run(client, True)),
        "onion concurrent": batch_of(onion_run, at_once),
        "hand concurrent": batch_of(lambda: hand_run(client, False), at_once),
    }
    try:
        return await interleaved(cases, rounds=max(2, scale.rounds // 2), target_s=scale.target_s * 10)
    finally:
        await client.close()


def rows(scale: Scale) -> list[Row]:
    try:
        import openai  # noqa: F401
    except ImportError:
        return [Row(SECTION, "OpenAI SDK over HTTP", skipped="the openai SDK is not installed")]
    server = subprocess.Popen([sys.executable, "-c", SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        url = server.stdout.readline().strip()
        at_once = CONCURRENT if scale.concurrent_runs >= 1000 else 20
        t = asyncio.run(measure(url, scale, at_once))
    finally:
        if server.stdin is not None:
            server.stdin.close()
        server.wait(timeout=10)
    found = []
    for case, aim in (("JSON", 1.02), ("stream", 1.04), ("concurrent", 1.05)):
        per = at_once if case == "concurrent" else 1
        what = f"{at_once} concurrent" if case == "concurrent" else case
        found.append(
            Row(
                SECTION,
                f"OpenAI SDK over HTTP, {what}, per run",
                t[f"onion {case}"] / per * 1e6,
                "µs",
                t[f"hand {case}"] / per * 1e6,
                "raw SDK loop",
                aim=aim,
            )
        )
    return found


if __name__ == "__main__":
    from .table import render
    from .timing import QUICK

    print(render(rows(QUICK)))
