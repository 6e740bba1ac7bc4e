"""Serving: the cost per run of `onion.serve` over HTTP, against a bare Starlette endpoint and `agent.run` itself.

A one-call run (the model answers at once, no tool) is asked over one
keep-alive connection (an httpx client, one request at a time), as JSON
(`POST /runs`) and as SSE (`Accept: text/event-stream`), of a real uvicorn
serving `serve(agent)` in a subprocess. The baseline is a bare Starlette
app, in a uvicorn subprocess of its own, whose endpoint calls `agent.run`
(JSON) or streams `agent.stream` (SSE, one event per onion event). The
wall time per run includes the client's own work (httpx is pure Python, on
the same cores). The server's own cost is the CPU time its process spends
per run (`/proc/PID/stat`, over a longer series of runs) less `agent.run`
(or consuming `agent.stream`) in this process; the aim is under 1 ms.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from onion import Agent, Message, ModelCall, ModelResponse, RunFinished, Usage

from .table import Row
from .timing import Batch, Scale, interleaved

SECTION = "serve"
ANSWER = "hello"
QUESTION = "say hello"
AIM_US = 1000.0
ROOT = Path(__file__).resolve().parent.parent
SSE = {"accept": "text/event-stream"}


class AnswerModel:
    """A fake model that answers every request with `ANSWER` at once (a one-call run); it records nothing."""

    name = "answer"

    async def request(self, call: ModelCall) -> ModelResponse:
        return ModelResponse(Message.assistant(ANSWER), Usage(input_tokens=3, output_tokens=1, requests=1))


def agent() -> Agent[str]:
    return Agent(AnswerModel(), name="bench", checked=False)


def onion_app() -> Any:
    """`serve(agent)`, no store, no token (`uvicorn --factory bench.serve:onion_app`)."""
    from onion.serve import serve

    return serve(agent())


def bare_app() -> Any:
    """Starlette with `POST /runs` calling `agent.run` (JSON) or streaming `agent.stream` (SSE), nothing else."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
    from starlette.routing import Route

    bare = agent()

    async def runs(request: Request) -> Response:
        body = await request.json()
        if "text/event-stream" in request.headers.get("accept", ""):
            return StreamingResponse(events(body["input"]), media_type="text/event-stream")
        result = await bare.run(body["input"])
        return JSONResponse({"run_id": result.run_id, "status": result.status, "output": result.output})

    async def events(question: str) -> AsyncIterator[bytes]:
        async for event in bare.stream(question):
            data = {"output": event.result.output} if isinstance(event, RunFinished) else {}
            yield f"event: {type(event).__name__}\ndata: {json.dumps(data)}\n\n".encode()

    async def ready(request: Request) -> Response:
        return PlainTextResponse("ok")

    return Starlette(routes=[Route("/runs", runs, methods=["POST"]), Route("/ready", ready)])


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def cpu_seconds(pid: int) -> float:
    """User and system CPU time of process `pid` so far (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextmanager
def uvicorn(factory: str) -> Iterator[tuple[str, int]]:
    """A uvicorn subprocess serving `bench.serve:<factory>` on a free port: its base URL and pid, until the end."""
    port = free_port()
    command = [sys.executable, "-m", "uvicorn", "--factory", f"bench.serve:{factory}", "--port", str(port)]
    command += ["--log-level", "warning", "--no-access-log"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen(command, cwd=ROOT, env=env, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while True:
            if process.poll() is not None:
                raise RuntimeError(
                    f"uvicorn {factory} exited: {process.stderr.read().decode() if process.stderr else ''}"
                )
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"uvicorn {factory} did not listen within 30 s") from None
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}", process.pid
    finally:
        process.terminate()
        process.wait(10)


async def measure(scale: Scale) -> tuple[dict[str, float], dict[str, float]]:
    """Median wall seconds per run of each case, interleaved; and each server's CPU seconds per run."""
    import httpx2

    inproc = agent()
    with uvicorn("onion_app") as (onion_url, onion_pid), uvicorn("bare_app") as (bare_url, bare_pid):
        async with httpx2.AsyncClient(timeout=30) as client:

            async def json_run(url: str) -> Any:
                response = await client.post(f"{url}/runs", json={"input": QUESTION})
                response.raise_for_status()
                return response.json()

            async def sse_run(url: str) -> bytes:
                async with client.stream("POST", f"{url}/runs", json={"input": QUESTION}, headers=SSE) as response:
                    response.raise_for_status()
                    return b"".join([chunk async for chunk in response.aiter_bytes()])

            async def stream_in_process() -> str:
                async for event in inproc.stream(QUESTION):
                    if isinstance(event, RunFinished):
                        return str(event.result.output)
                raise AssertionError("agent.stream ended without RunFinished")

            await check(json_run, sse_run, onion_url, bare_url)
            if (await inproc.run(QUESTION)).output != ANSWER or await stream_in_process() != ANSWER:
                raise AssertionError("the in-process agent did not answer")

            def batch(one: Any, *args: str) -> Batch:
                async def run(n: int) -> float:
                    start = time.perf_counter()
                    for _ in range(n):
                        await one(*args)
                    return time.perf_counter() - start

                return run

            async def run_in_process() -> Any:
                return await inproc.run(QUESTION)

            cases = {
                "serve json": batch(json_run, onion_url),
                "bare json": batch(json_run, bare_url),
                "serve sse": batch(sse_run, onion_url),
                "bare sse": batch(sse_run, bare_url),
                "agent.run": batch(run_in_process),
                "agent.stream": batch(stream_in_process),
            }
            wall = await interleaved(cases, rounds=scale.rounds, target_s=scale.target_s * 3)
            cpu = {}
            runs = max(20, round(scale.target_s * 25 / wall["serve json"]))
            for name, pid in (("serve", onion_pid), ("bare", bare_pid)):
                for kind, one in (("json", json_run), ("sse", sse_run)):
                    url = onion_url if name == "serve" else bare_url
                    before = cpu_seconds(pid)
                    await batch(one, url)(runs)
                    cpu[f"{name} {kind}"] = (cpu_seconds(pid) - before) / runs
            return wall, cpu


async def check(json_run: Any, sse_run: Any, onion_url: str, bare_url: str) -> None:
    """Both servers answer the run, JSON and SSE, before anything is timed."""
    for url in (onion_url, bare_url):
        if (await json_run(url))["output"] != ANSWER:
            raise AssertionError(f"{url}: wrong JSON answer")
    streamed = (await sse_run(onion_url)).decode()
    last = streamed.strip().split("\n\n")[-1]
    if "event: run_finished" not in last or json.loads(last.split("data: ", 1)[1])["output"] != ANSWER:
        raise AssertionError(f"serve's SSE did not end with run_finished and the answer: {last!r}")
    if f'"output": "{ANSWER}"' not in (await sse_run(bare_url)).decode():
        raise AssertionError("the bare SSE endpoint did not answer")


def rows(scale: Scale) -> list[Row]:
    import asyncio

    try:
        import httpx2  # noqa: F401
        import starlette  # noqa: F401
        import uvicorn as _  # noqa: F401
    except ImportError as error:
        return [Row(SECTION, "onion.serve per run", skipped=f"needs the serve extra and httpx2 ({error.name})")]
    if not Path(f"/proc/{os.getpid()}/stat").exists():
        return [Row(SECTION, "onion.serve per run", skipped="needs Linux's /proc for the server's CPU time")]
    wall, cpu = asyncio.run(measure(scale))
    us = {name: seconds * 1e6 for name, seconds in wall.items()}
    made: list[Row] = []
    for kind, inproc in (("json", "agent.run"), ("sse", "agent.stream")):
        served, bare = us[f"serve {kind}"], us[f"bare {kind}"]
        name = f"POST /runs {kind.upper()}, keep-alive, wall per run ({1e6 / served:,.0f} req/s)"
        made.append(Row(SECTION, name, served, "µs", bare, f"bare Starlette ({1e6 / bare:,.0f} req/s)", aim=1.2))
        own = cpu[f"serve {kind}"] * 1e6 - us[inproc]
        bare_cpu = cpu[f"bare {kind}"] * 1e6
        cost = f"{kind.upper()}: server CPU per run over {inproc} ({us[inproc]:.0f} µs; bare: {bare_cpu:.0f} µs)"
        made.append(Row(SECTION, cost, own, "µs", AIM_US, "aim", aim=1.0))
    return made
