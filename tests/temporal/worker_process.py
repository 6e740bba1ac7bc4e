"""A worker in its own process: `python worker_process.py <temporal address> <task queue> <fake server url>`."""

from __future__ import annotations

import asyncio
import sys
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import onion_flows
from temporalio.client import Client
from temporalio.worker import Worker

from onion.temporal import OnionPlugin


async def main(address: str, queue: str, url: str) -> None:
    plugin = OnionPlugin(onion_flows.support_agent(url), options=onion_flows.FAST)
    client = await Client.connect(address, plugins=[plugin])
    sticky = timedelta(seconds=1)  # a killed worker's workflow tasks move to the others within 1 s
    async with Worker(
        client, task_queue=queue, workflows=[onion_flows.Support], sticky_queue_schedule_to_start_timeout=sticky
    ):
        print("ready", flush=True)
        await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
