"""An agent served over HTTP: run it with a POST, see it wait for approval, approve it with another POST.

`python examples/serve_app.py` starts the app on uvicorn (a free local port),
asks it to tidy up (the delete pauses for a person), lists the paused runs,
approves the call and prints each answer. A scripted model stands in for a
real one. To serve your own agent: `python -m onion serve mymodule:agent --db onion.db`.
"""

from __future__ import annotations

import asyncio
import json
import urllib.request
from typing import Any

import uvicorn

from middleware import approve
from onion import Agent, tool
from onion.serve import serve
from onion.stores import MemoryStore
from onion.testing import ScriptedModel, call

TOKEN = "example-token"


@tool
def delete_file(path: str) -> str:
    """Delete a file."""
    return f"deleted {path}"


def build() -> Agent[str]:
    model = ScriptedModel([[call("delete_file", path="old-draft.txt")], "Deleted old-draft.txt."])
    agent = Agent(model, tools=[delete_file], store=MemoryStore(), name="tidy")
    return agent.use(approve("delete_file", reason="deleting needs a person"))


def request(base: str, method: str, path: str, body: Any = None) -> Any:
    """One JSON request with the token (a blocking call: run it in a thread)."""
    data = None if body is None else json.dumps(body).encode()
    headers = {"authorization": f"Bearer {TOKEN}", "content-type": "application/json"}
    with urllib.request.urlopen(urllib.request.Request(base + path, data, headers, method=method)) as answer:
        return json.load(answer)


async def main() -> list[str]:
    server = uvicorn.Server(uvicorn.Config(serve(build(), token=TOKEN), port=0, log_level="warning"))
    running = asyncio.create_task(server.serve())
    while not server.started:
        await asyncio.sleep(0.01)
    base = f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"
    try:
        paused = await asyncio.to_thread(request, base, "POST", "/runs", {"input": "tidy up"})
        pending = paused["pending"][0]
        waiting = await asyncio.to_thread(request, base, "GET", "/runs?status=paused")
        decided = await asyncio.to_thread(
            request, base, "POST", f"/runs/{paused['run_id']}/decisions", {"approve": [pending["id"]]}
        )
    finally:
        server.should_exit = True
        await running
    return [
        f"{paused['status']}: {pending['name']}({pending['args']['path']}): {pending['reason']}",
        f"waiting: {len(waiting['runs'])} run(s)",
        f"{decided['status']}: {decided['output']}",
    ]


if __name__ == "__main__":
    print("\n".join(asyncio.run(main())))
