"""`GET /runs/{run_id}/trace`: the trace of a run this server process ran, as onion's HTML trace page.

While the app runs (its lifespan), tracing captures the runs each request
starts (`onion.tracing.capture()`, without its `with` block: the request's
context names where the runs go, so runs started elsewhere in the process are
not kept). The last `keep` runs are kept in memory; a run resumed after a
decision is a run of its own, so a paused and decided run shows both. The
page is `onion.tracing`'s, arguments scrubbed of secrets; its script is
allowed by its hash, nothing else.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
from collections import deque
from collections.abc import AsyncIterator
from typing import Any

from starlette.types import ASGIApp, Receive, Scope, Send

from onion.tracing import Span
from onion.tracing._chains import count_capture
from onion.tracing._html import SCRIPT, page
from onion.tracing._spans import capturing

CSP = (
    f"default-src 'none'; style-src 'unsafe-inline'; script-src 'sha256-"
    f"{base64.b64encode(hashlib.sha256(SCRIPT.encode()).digest()).decode()}'; form-action 'self'; "
    "frame-ancestors 'none'; base-uri 'none'"
)
"""The trace page's policy: the page's own script (by its hash) may run; nothing is fetched."""


class Traces:
    """The runs this server process ran, captured: the last `keep` of them (0: none, tracing stays off)."""

    def __init__(self, keep: int) -> None:
        if keep < 0:
            raise ValueError(f"serve(traces={keep!r}): keep 0 or more runs' traces")
        self.keep = keep
        self.runs: deque[Span] = deque(maxlen=keep or 1)

    @contextlib.asynccontextmanager
    async def lifespan(self, app: Any) -> AsyncIterator[None]:
        """Tracing on (chains rebuilt with it) while the app is served; off again after."""
        if not self.keep:
            yield
            return
        count_capture(+1)
        try:
            yield
        finally:
            count_capture(-1)

    def of(self, run_id: str) -> list[Span]:
        """The captured runs with id `run_id`, in the order they started (a run, then its resumes)."""
        return [span for span in list(self.runs) if span.kind == "run" and span.ctx.id == run_id]

    def page(self, run_id: str) -> str | None:
        """onion's trace page of `run_id`; None when this process kept no trace of it."""
        runs = self.of(run_id)
        return page(runs) if runs else None


class Traced:
    """ASGI middleware: each request's runs are captured into `traces` (a context variable, per request)."""

    def __init__(self, app: ASGIApp, traces: Traces) -> None:
        self.app = app
        self.traces = traces

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self.traces.keep:
            await self.app(scope, receive, send)
            return
        token = capturing.set(self.traces.runs)
        try:
            await self.app(scope, receive, send)
        finally:
            capturing.reset(token)
