"""A fresh process's first model call under `timeout(0.5)`, with an event-loop lag monitor; prints JSON.

`python first_call_script.py <api> <where>`: the agent is made before the event loop starts
(`where` = "before-loop", as a module-level agent is) or inside it ("in-loop").
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from typing import Any

from middleware import timeout
from onion import Agent, Handler, ModelCall, ModelResponse
from onion.testing import Delay, FakeProviderServer

API, WHERE = sys.argv[1], sys.argv[2]
SDK = "anthropic" if API == "anthropic" else "openai"
MODEL = "anthropic:claude-test" if API == "anthropic" else f"{API}:gpt-test"


class lag_monitor:
    """A task measuring how late each of its own sleeps ends: a stalled loop shows as a large overshoot."""

    def __init__(self, tick: float = 0.005) -> None:
        self.tick = tick
        self.lags: list[tuple[float, float]] = []  # (when the sleep began, its overshoot)

    async def watch(self) -> None:
        while True:
            start = time.perf_counter()
            await asyncio.sleep(self.tick)
            self.lags.append((start, time.perf_counter() - start - self.tick))

    def worst(self, since: float = 0.0, until: float = float("inf")) -> float:
        return max((lag for start, lag in self.lags if since <= start <= until), default=0.0)


class clocked:
    """A model layer noting when the model call began and ended (outside `timeout`)."""

    began = ended = 0.0

    async def wrap_model(self, call: ModelCall, call_next: Handler) -> ModelResponse:
        clocked.began = time.perf_counter()
        try:
            response: ModelResponse = await call_next(call)
            return response
        finally:
            clocked.ended = time.perf_counter()


def made() -> Agent[Any]:
    return Agent(MODEL).use(clocked(), timeout(0.5))


async def main(server: FakeProviderServer, agent: Agent[Any] | None) -> dict[str, object]:
    monitor = lag_monitor()
    watching = asyncio.ensure_future(monitor.watch())
    await asyncio.sleep(0.02)
    imported_before = SDK in sys.modules
    start = time.perf_counter()
    agent = agent or made()
    try:
        result = await agent.run("hi")
        output, error = result.output, None
    except Exception as failure:
        output, error = None, f"{type(failure).__name__}: {failure}"
    took = time.perf_counter() - start
    watching.cancel()
    await agent.aclose()
    return {
        "imported_before_run": imported_before,
        "output": output,
        "error": error,
        "run_seconds": took,
        "call_seconds": clocked.ended - clocked.began,
        "max_lag_in_call": monitor.worst(clocked.began, clocked.ended),
        "max_lag_in_run": monitor.worst(start),
        "requests": len(server.requests),
    }


if __name__ == "__main__":
    with FakeProviderServer([Delay(0.05, "hello")]) as server:
        os.environ["ANTHROPIC_BASE_URL"] = server.url
        os.environ["OPENAI_BASE_URL"] = server.openai_url
        os.environ["ANTHROPIC_API_KEY"] = os.environ["OPENAI_API_KEY"] = "test-key"
        agent = made() if WHERE == "before-loop" else None
        print(json.dumps(asyncio.run(main(server, agent))))
