"""`committed(write)`: await a last write to its end, whatever cancellations reach the caller meanwhile."""

from __future__ import annotations

import asyncio
import types
from collections.abc import Awaitable, Coroutine, Generator
from typing import Any, TypeVar

T = TypeVar("T")


async def committed(write: Awaitable[T], *, inline: bool = False) -> T:
    """Await `write`, the last write of a piece of work, to its end even if the caller is cancelled meanwhile.

    Once the write has landed the caller gets its result (a cancellation
    then came too late to stop anything); a write that fails, or is
    cancelled itself, raises as it would. `inline`: `write` is a coroutine
    that may begin in the caller's task and end in a task of its own
    (`docs/durable.md`, "Cost"); one that ends without waiting costs no task.
    """
    if inline and type(write) is types.CoroutineType:
        try:
            step = write.send(None)
        except StopIteration as done:  # ended without waiting: nothing could cancel it
            value: T = done.value
            return value
        task = asyncio.ensure_future(going_on(write, step))
    else:
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
    result: T = task.result()
    return result


async def going_on(write: Coroutine[Any, Any, T], step: Any) -> T:
    """The rest of `write`, begun elsewhere up to where it waits (`step`, what it yielded to the loop)."""
    return await _rest(write, step)


@types.coroutine
def _rest(write: Coroutine[Any, Any, T], step: Any) -> Generator[Any, Any, T]:
    while True:
        try:
            sent = yield step
        except BaseException as error:
            try:
                step = write.throw(error)
            except StopIteration as done:
                value: T = done.value
                return value
        else:
            try:
                step = write.send(sent)
            except StopIteration as done:
                value = done.value
                return value


def inline_writes(store: object) -> bool:
    """Whether `store`'s journal writes may begin outside a task of their own: the class that says so
    (`_inline_writes`) says it of its own `append_journal` and `release_run`; a subclass overriding either (with an
    `asyncio.timeout` inside, say) gets a task per write unless it says so again."""
    kind = type(store)
    for owner in kind.__mro__:
        if "_inline_writes" in vars(owner):
            own = all(getattr(kind, name) is getattr(owner, name) for name in ("append_journal", "release_run"))
            return bool(vars(owner)["_inline_writes"]) and own
    return False
