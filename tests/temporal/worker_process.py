"""A worker in its own process: `python worker_process.py <temporal address> <task queue> <flows>`.

`flows` is "support" (onion_flows.Support, its agent on the fake provider
server at $ONION_FAKE_URL) or "soak" (soak_flows.Soak).
"""

from __future__ import annotations

import asyncio
import os
import sys
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import onion_flows
import soak_flows
from temporalio.client import Client
from temporalio.worker import Worker

from onion.temporal import OnionPlugin


async def main(address: str, queue: str, flows: str) -> None:
    if flows == "soak":
        plugin = OnionPlugin(soak_flows.soak, options=soak_flows.SOAK_OPTIONS)
        workflow: type = soak_flows.Soak
    else:
        plugin = OnionPlugin(onion_flows.support_agent(os.environ["ONION_FAKE_URL"]), options=onion_flows.FAST)
        workflow = onion_flows.Support
    client = await Client.connect(address, plugins=[plugin])
    sticky = timedelta(seconds=1)  # a killed worker's workflow tasks move to the others within 1 s
    async with Worker(client, task_queue=queue, workflows=[workflow], sticky_queue_schedule_to_start_timeout=sticky):
        print("ready", flush=True)
        await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
