"""`concurrency`: cap how many tool calls (and, configured, model calls) run at once, process-wide."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from typing import TypeVar

from onion import ModelCall, ModelNext, ModelResponse, ToolCall, ToolNext, ToolResult
from onion.stores import SlotStore
from onion.tracing import waited

from ._shared_slots import SharedSlots

__all__ = ["concurrency"]


C = TypeVar("C")
R = TypeVar("R")


class Slots:
    """`size` slots shared by every thread and event loop of the process; waiters are served in order.

    A waiter awaits a future of its own loop, so waiting never blocks a
    loop; a slot freed in another thread is handed over with
    `call_soon_threadsafe`. Cancellation-safe: a cancelled waiter takes no
    slot, or passes on the one it was just handed. Call `release` once per
    `acquire`, from any thread.
    """

    __slots__ = ("_free", "_lock", "_waiters")

    def __init__(self, size: int) -> None:
        self._free = size
        self._lock = threading.Lock()
        self._waiters: deque[asyncio.Future[None]] = deque()

    @property
    def waiting(self) -> int:
        """How many callers are queued for a slot right now."""
        return len(self._waiters)

    async def acquire(self) -> None:
        with self._lock:
            if self._free and not self._waiters:
                self._free -= 1
                return
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
        started = time.perf_counter()
        try:
            await waiter
            waited(time.perf_counter() - started)
        except BaseException:
            with self._lock:
                queued = waiter in self._waiters
                if queued:
                    self._waiters.remove(waiter)
            if not queued:  # a slot was handed over as this waiter was cancelled
                self.release()
            raise

    def release(self) -> None:
        while True:
            with self._lock:
                if not self._waiters:
                    self._free += 1
                    return
                waiter = self._waiters.popleft()
            loop = waiter.get_loop()
            if loop is asyncio._get_running_loop():  # None in a thread without a loop
                _hand_over(waiter)
                return
            try:
                loop.call_soon_threadsafe(_hand_over, waiter)
                return
            except RuntimeError:  # the waiter's loop is closed: the next waiter gets the slot
                continue


def _hand_over(waiter: asyncio.Future[None]) -> None:
    """Wake `waiter` with its slot (a cancelled one passes the slot on itself)."""
    if not waiter.done():
        waiter.set_result(None)


class concurrency:
    """At most `limit` tool calls in flight at once, across every run sharing this layer.

    `per_tool={"browser": 1}` adds a cap per tool name (a call waits for its
    tool's slot first, then for a global one, so it never holds a global slot
    while queued behind its own tool); `limit=None` leaves only the per-tool
    caps. `models=N` also caps concurrent model calls. The caps hold
    process-wide: runs in other threads, each with its own event loop (each
    `run_sync` starts one), share them too. Waiting is FIFO and
    cancellation-safe: a cancelled call gives back its slot, or never takes
    one.

    `store` (a `SlotStore`: `onion.stores.RedisStore`) makes the caps hold
    across every worker using that store, under keys starting with `name`:
    slots are leased for `lease` seconds and renewed while held, so a dead
    worker's slots free themselves; waiting polls the store (not FIFO).
    """

    __slots__ = ("_models", "_per_tool", "_tools", "limit", "models", "name", "per_tool", "store", "wrap_only")

    nondeterministic = "its slots are shared by every run on this worker"
    """Why a replay of a run may decide differently with this layer: engines that replay workflow code refuse it."""

    def __init__(
        self,
        limit: int | None = 8,
        *,
        per_tool: Mapping[str, int] | None = None,
        models: int | None = None,
        store: SlotStore | None = None,
        name: str = "concurrency",
        lease: float = 30.0,
    ) -> None:
        for label, value in [("limit", limit), ("models", models), *(per_tool or {}).items()]:
            if value is not None and (not isinstance(value, int) or value < 1):
                raise ValueError(f"concurrency: {label} must be an int of at least 1 (or None), got {value!r}")
        if store is not None and not isinstance(store, SlotStore):
            raise TypeError(
                f"concurrency: store must keep slots (take_slot, free_slot), like RedisStore; got {store!r}"
            )
        self.limit = limit
        self.per_tool = dict(per_tool or {})
        self.models = models
        self.store, self.name = store, name
        self.wrap_only = ("model", "tool") if models is not None else ("tool",)

        def slots(size: int | None, kind: str) -> Slots | SharedSlots | None:
            if size is None:
                return None
            return Slots(size) if store is None else SharedSlots(store, f"{name}:{kind}", size, lease=lease)

        self._tools = slots(limit, "tools")
        self._per_tool = {tool: slots(n, f"tool:{tool}") for tool, n in self.per_tool.items()}
        self._models = slots(models, "models")

    @property
    def waiting(self) -> int:
        """How many calls are queued for a slot right now, in every thread."""
        every = [self._tools, self._models, *self._per_tool.values()]
        return sum(slots.waiting for slots in every if slots is not None)

    async def wrap_tool(self, call: ToolCall, call_next: ToolNext) -> ToolResult:
        own = self._per_tool.get(call.name)
        if own is None:
            return await _within(self._tools, call, call_next)
        if isinstance(own, SharedSlots):
            async with own.hold():
                return await _within(self._tools, call, call_next)
        assert own is not None
        await own.acquire()
        try:
            return await _within(self._tools, call, call_next)
        finally:
            own.release()

    async def wrap_model(self, call: ModelCall, call_next: ModelNext) -> ModelResponse:
        return await _within(self._models, call, call_next)


async def _within(slots: Slots | SharedSlots | None, ctx: C, call_next: Callable[[C], Awaitable[R]]) -> R:
    """`call_next(ctx)`, holding one of `slots` if there are any."""
    if slots is None:
        return await call_next(ctx)
    if isinstance(slots, SharedSlots):
        async with slots.hold():
            return await call_next(ctx)
    await slots.acquire()
    try:
        return await call_next(ctx)
    finally:
        slots.release()
