"""Calls in doubt: a recovered run's calls that started and have no recorded result, of tools that say what to do.

`@tool(reconcile=fn)`: `fn(call)` asks the outside world (a `ToolResult`: it happened, the model reads that; None:
run it again). `@tool(in_doubt="ask")`: a person decides (the run pauses, the call pending as kind `"in_doubt"`),
also when `reconcile` fails.
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING

from ._calls import ToolCall
from ._messages import Message
from ._results import ToolResult
from ._text import valid_text

if TYPE_CHECKING:
    from ._durable.state import Pending
    from ._run import Run
    from ._tools import Tool

MAY_HAVE_RUN = "its worker stopped after it started and before its result was recorded"
"""The reason an in-doubt call is pending with."""


async def settle_in_doubt(run: Run, pending: Pending, tools: dict[str, Tool]) -> list[ToolCall]:
    """Settle `pending`'s in-doubt calls: a reconciled result joins `pending.settled` (journaled), a call
    to run again joins `pending.requests`; the calls left for a person, paused, are returned."""
    held = []
    for request in pending.in_doubt:
        tool = tools.get(request.name)
        call = ToolCall(run, request, tool, pending.approved)
        reason = MAY_HAVE_RUN
        if tool is not None and tool.reconcile is not None:
            try:
                result = tool.reconcile(call)
                if inspect.isawaitable(result):
                    result = await result
                if result is not None and not isinstance(result, ToolResult):
                    raise TypeError(f"reconcile returned {type(result).__name__}, not a ToolResult or None")
            except Exception as error:
                if tool.in_doubt != "ask":
                    raise
                reason = valid_text(f"{MAY_HAVE_RUN}; its reconcile failed: {type(error).__name__}: {error}")
            else:
                if result is None:
                    pending.requests.append(request)
                    continue
                result.call_id = request.id
                if run.journal is not None:
                    await run.journal.finished(call, result)
                pending.settled[request.id] = Message.tool(request.id, result.content, result.is_error)
                continue
        call.pause_reason = reason
        held.append(call)
    return held
