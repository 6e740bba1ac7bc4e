"""A person's client in its own process: `python decide_process.py <address> <workflow id> <decision JSON>`.

The decision is `{"approve": [...], "reject": {...}, "edit": {...}}`; an empty
one (`{}`) decides the one pending call's approval. Prints `decided <ids>`, or
`refused: <message>` when the workflow's validator refused it.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys

from temporalio.client import Client, WorkflowUpdateFailedError

import onion.temporal


async def main(address: str, workflow_id: str, decision: str) -> None:
    client = await Client.connect(address)
    handle = client.get_workflow_handle(workflow_id)
    chosen = json.loads(decision) or {"approve": [call.id for call in await onion.temporal.pending(handle)]}
    try:
        await onion.temporal.decide(handle, **chosen)
    except WorkflowUpdateFailedError as refused:
        print(f"refused: {refused.cause}", flush=True)
        return
    print("decided", *chosen.get("approve", []), *chosen.get("reject", {}), *chosen.get("edit", {}), flush=True)


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
    sys.stdout.flush()
    os._exit(0)  # the Temporal client's native core can crash while the interpreter tears down (seen: SIGSEGV)
