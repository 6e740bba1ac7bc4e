"""One uvicorn process holding 200 SSE runs open at once (each waits in a tool for a second), with its memory."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx2
from live_server import Served, sse_events

from onion import Message, ModelResponse, ToolRequest
from onion.testing import RecordedRequest

RUNS = 200
HOLD = 1.0
SSE = {"accept": "text/event-stream"}
RSS_BOUND_MB = 400
"""Generous: the server starts at about 50 MB and held about 115 MB with the 200 runs open (2026-12-01)."""


def answer(request: RecordedRequest) -> str | ModelResponse:
    """Each run waits in `slow` first, then answers with the city its question names."""
    last = request.body["messages"][-1]
    if isinstance(last["content"], list) and any(part.get("type") == "tool_result" for part in last["content"]):
        question = request.body["messages"][0]["content"]
        text = question if isinstance(question, str) else question[0]["text"]
        return f"done with {text}"
    return ModelResponse(Message.assistant("", [ToolRequest("toolu_slow", "slow", {"seconds": HOLD})]))


def rss_mb(pid: int, field: str = "VmRSS") -> float:
    """The process's resident memory (`VmRSS`) or its peak (`VmHWM`), in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no {field} in /proc/{pid}/status")


async def test_one_server_process_holds_200_concurrent_sse_runs_without_errors(
    serving: Callable[..., Served],
) -> None:
    """200 clients stream a journaled run each at the same time, all open together while their tool waits (the whole
    takes a fraction of 200 waits): every stream ends with its own run_finished, no error event, every tool ran once;
    the server's resident memory is printed and stays under a generous bound."""
    served = serving()
    served.fake.respond = answer
    pid = served.process.pid
    before = rss_mb(pid)
    peak = before
    limits = httpx2.Limits(max_connections=RUNS + 10, max_keepalive_connections=RUNS + 10)

    async def one(client: httpx2.AsyncClient, n: int) -> list[dict[str, Any]]:
        answer = await client.post("/runs", json={"input": f"city {n}"}, headers=SSE)
        assert answer.status_code == 200, answer.text
        return sse_events(answer.text)

    async def sample() -> None:
        nonlocal peak
        while True:
            peak = max(peak, rss_mb(pid))
            await asyncio.sleep(0.05)

    async with (
        served.client() as auth,
        httpx2.AsyncClient(base_url=served.url, headers=auth.headers, timeout=60, limits=limits) as client,
    ):
        sampler = asyncio.create_task(sample())
        started = time.monotonic()
        streams = await asyncio.gather(*(one(client, n) for n in range(RUNS)))
        took = time.monotonic() - started
        sampler.cancel()
    print(f"\nserver RSS: {before:.0f} MB before, {peak:.0f} MB at most with {RUNS} SSE runs open ({took:.1f} s)")
    for n, events in enumerate(streams):
        names = [e["event"] for e in events]
        assert "run_failed" not in names and names[-1] == "run_finished", (n, names)
        assert events[-1]["data"]["output"] == f"done with city {n}"
    assert served.effects_lines().count(f"slow {HOLD}") == RUNS and took < RUNS * HOLD / 10
    assert peak < RSS_BOUND_MB, f"the server held {peak:.0f} MB"
