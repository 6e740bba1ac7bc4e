"""`serve(..., notify=URL)`: tell someone when a run pauses, with a message a Slack or Teams webhook shows.

A run layer beside the served agent: once a run comes back paused, a task
posts `{"text": ..., "run_id", "pending": [...], "url"}` to the URL (Slack's
and Teams' incoming webhooks show `text`), retried with backoff; the run
never waits for it, and a webhook that keeps failing is logged, scrubbed.
Posts run in two threads of their own: a webhook that hangs never takes the
threads `asyncio.to_thread` gives everything else (a cache, a client's setup).
"""

from __future__ import annotations

import asyncio
import json
import logging
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from tenacity import AsyncRetrying, stop_after_attempt, wait_exponential

from onion import Run, RunNext
from onion.scrub import scrub, scrub_value

logger = logging.getLogger("onion.serve")


class Notify:
    """Posts a message to `url` for each run that pauses; `page` is the inbox's address, for the link."""

    def __init__(self, url: str, page: str | None = None, *, attempts: int = 5, timeout: float = 10.0) -> None:
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"serve(notify=...): give an http(s) URL of a webhook, not {url!r}")
        self.url = url
        self.page = page
        self.attempts = attempts
        self.timeout = timeout
        self.sending: set[asyncio.Task[None]] = set()
        self.threads = ThreadPoolExecutor(max_workers=2, thread_name_prefix="onion-notify")

    async def wrap_run(self, ctx: Run, call_next: RunNext) -> Any:
        result = await call_next(ctx)
        if getattr(result, "paused", False):
            task = asyncio.create_task(self.send(message(ctx, result, self.page)))
            self.sending.add(task)
            task.add_done_callback(self.sending.discard)
        return result

    async def send(self, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        try:
            async for attempt in AsyncRetrying(
                stop=stop_after_attempt(self.attempts), wait=wait_exponential(multiplier=0.5, max=30), reraise=True
            ):
                with attempt:
                    await asyncio.get_running_loop().run_in_executor(self.threads, self.post, data)
        except Exception as error:
            logger.error(
                "notify: the webhook refused run %s %d times: %s", body["run_id"], self.attempts, scrub(str(error))
            )

    def post(self, data: bytes) -> None:
        request = urllib.request.Request(self.url, data, {"content-type": "application/json"}, method="POST")
        with urllib.request.urlopen(request, timeout=self.timeout) as answer:
            answer.read()


def message(run: Run, result: Any, page: str | None) -> dict[str, Any]:
    """What a person reads: which run waits, on which calls, why, and where to decide."""
    pending = [{**call.to_dict(), "args": scrub_value(call.args)} for call in result.pending]
    calls = "; ".join(f"{p['name']} ({p['id']}): {scrub(p['reason'])}" for p in pending)
    who = "" if run.principal is None else f" for {run.principal.id}"
    where = f" Decide at {page}#run-{result.run_id}" if page else ""
    text = f"Run {result.run_id} of {run.agent.name}{who} waits for a decision: {calls}.{where}"
    return {"text": text, "run_id": result.run_id, "pending": pending, "url": page}
