"""`ToolThreads`: the threads sync tools run in, apart from asyncio's default executor.

A thread cannot be killed. When onion stops waiting for a sync tool (a
timeout, a cancelled run), the thread runs on: it is *left running*. Such a
thread no longer counts against `size`, so hung tools cannot starve the
others, and nothing waits for it (`run_sync` returns when the run ends, the
interpreter exits without it).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import threading
from collections import Counter, deque
from collections.abc import Callable
from typing import Any

from .errors import ToolThreadsExhausted


class _Job:
    """One sync call: what to run, where to deliver the outcome, and how far it got."""

    __slots__ = ("context", "function", "future", "kwargs", "loop", "name", "state")

    def __init__(
        self, name: str, function: Callable[..., Any], kwargs: dict[str, Any], loop: asyncio.AbstractEventLoop
    ) -> None:
        self.name, self.function, self.kwargs, self.loop = name, function, kwargs, loop
        self.context = contextvars.copy_context()
        self.future: asyncio.Future[Any] = loop.create_future()
        self.state = "queued"
        """queued -> running -> done; or queued -> dropped; or running -> left (running) -> done."""

    def execute(self) -> None:
        """Run the function in the caller's context; hand its value or exception to the loop, if it still runs."""
        outcome: tuple[Any, BaseException | None]
        try:
            outcome = (self.context.run(self.function, **self.kwargs), None)
        except BaseException as error:  # a tool's SystemExit is the call's outcome, never the thread's end
            outcome = (None, error)
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits for this outcome
            self.loop.call_soon_threadsafe(_deliver, self.future, *outcome)


def _deliver(future: asyncio.Future[Any], value: Any, error: BaseException | None) -> None:
    if future.done():
        return
    if error is None:
        future.set_result(value)
    else:
        future.set_exception(error)


class ToolThreads:
    """Daemon threads for sync tools: at most `size` calls run at once, more wait their turn.

    A call that onion stopped waiting for while its thread ran is *left
    running*: its thread stops counting against `size` (another takes its
    place) and counts against `max_abandoned` instead; while that many are
    left running, a new call fails at once with `ToolThreadsExhausted`
    naming the tools that hang, rather than queue behind them. One instance
    (`Agent(tool_threads=...)`, else a process-wide default of 32 and 64)
    may serve agents on any number of event loops.
    """

    __slots__ = ("_idle", "_left", "_lock", "_queue", "_wakeup", "_workers", "max_abandoned", "size")

    def __init__(self, size: int = 32, *, max_abandoned: int = 64) -> None:
        for label, value in (("size", size), ("max_abandoned", max_abandoned)):
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"ToolThreads: {label} must be a positive int, got {value!r}")
        self.size, self.max_abandoned = size, max_abandoned
        self._lock = threading.Lock()
        self._wakeup = threading.Condition(self._lock)
        self._queue: deque[_Job] = deque()
        self._workers = 0
        """Threads serving the queue (not left running)."""
        self._idle = 0
        """Of those, the ones waiting for work and not yet woken."""
        self._left: Counter[str] = Counter()
        """Tool names of the calls left running, for the error that names them."""

    @property
    def left_running(self) -> int:
        """How many threads run calls that onion stopped waiting for."""
        return self._left.total()

    async def run(self, function: Callable[..., Any], kwargs: dict[str, Any], call: Any = None) -> Any:
        """`function(**kwargs)` in one of the threads; what it returns or raises.

        If the caller is cancelled first, a call still queued never starts; a
        running one is left running, and `call` (if given) records it.
        """
        name = call.name if call is not None else getattr(function, "__name__", "tool")
        job = _Job(name, function, kwargs, asyncio.get_running_loop())
        with self._lock:
            if self.left_running >= self.max_abandoned:
                raise ToolThreadsExhausted(self._exhausted())
            self._queue.append(job)
            self._dispatch()
        try:
            return await job.future
        except asyncio.CancelledError:
            with self._lock:
                left = job.state == "running"
                if job.state == "queued":
                    self._queue.remove(job)
                    job.state = "dropped"
                elif left:
                    job.state = "left"
                    self._left[name] += 1
                    self._workers -= 1
            if left:
                # After the calls cancelled with this one have dropped out of the queue
                job.loop.call_soon(self._replace)
                if call is not None:
                    call._left_running = True
            raise

    def _replace(self) -> None:
        with self._lock:
            self._dispatch()

    def _dispatch(self) -> None:
        """Wake an idle thread, or start one, for the queue's next job (lock held)."""
        if not self._queue:
            return
        if self._idle:
            self._idle -= 1
            self._wakeup.notify()
        elif self._workers < self.size:
            self._workers += 1
            threading.Thread(target=self._serve, name="onion-tool", daemon=True).start()

    def _serve(self) -> None:
        while True:
            with self._lock:
                while not self._queue:
                    self._idle += 1
                    self._wakeup.wait()
                job = self._queue.popleft()
                if job.future.done():
                    job.state = "dropped"  # its caller was cancelled: never start it
                    continue
                job.state = "running"
            job.execute()
            with self._lock:
                if job.state == "left":
                    self._left[job.name] -= 1
                    if not self._left[job.name]:
                        del self._left[job.name]
                    if self._workers >= self.size:
                        job.state = "done"
                        return  # another thread took this one's place
                    self._workers += 1
                job.state = "done"

    def _exhausted(self) -> str:
        hung = ", ".join(f"{name} x{count}" for name, count in self._left.most_common())
        return (
            f"{self.left_running} sync tool threads that onion stopped waiting for are still running ({hung}), "
            f"the most ToolThreads(max_abandoned={self.max_abandoned}) allows: no new sync tool call starts until "
            "some end. Make those tools return (they can check `call.cancelled`), or allow more."
        )

    def __repr__(self) -> str:
        return f"<ToolThreads size={self.size} threads={self._workers} left_running={self.left_running}>"


default_tool_threads = ToolThreads()
"""The threads of every agent built without `tool_threads=`."""
