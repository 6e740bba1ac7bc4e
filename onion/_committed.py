"""`committed(write)`: await a last write to its end, whatever cancellations reach the caller meanwhile."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")


async def committed(write: Awaitable[T]) -> T:
    """Await `write`, the last write of a piece of work, to its end even if the caller is cancelled meanwhile.

    A write in flight may land whatever the caller does: once it has, the
    work is over and the caller gets its result (the cancellation came too
    late to stop anything), so a caller is never told "cancelled" of a run
    the store holds as completed. A write that fails, or is cancelled
    itself, raises as it would.
    """
    task = asyncio.ensure_future(write)
    cancelled = False
    while not task.done():
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            cancelled = True
    current = asyncio.current_task()
    if cancelled and not task.cancelled() and current is not None:
        current.uncancel()
    return task.result()
