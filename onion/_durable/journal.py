"""The journal: a run's steps recorded in its store as they happen (`onion._durable.replay` reads them back).

Entries (`onion._durable.entries`) are JSON objects, one per store row. A model entry is held back and written
with the next write (a tool starting, a result, the run's end), so a step costs one round trip. Each entry is
chained to the one before it (`onion._durable.chain`) as it is handed to the store, in the order it keeps them.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import types
import uuid
from collections.abc import Awaitable, Coroutine
from typing import TYPE_CHECKING, Any

from .._committed import going_on, inline_writes
from .._messages import Message
from .._results import ModelResponse, ToolResult
from ..errors import LeaseLost, RunBusy, RunNotFound
from .chain import Chain
from .entries import dumps, encode, end_entry, json_string, result_entry
from .renewals import Renewals, deleted, renewals_for, taken_over

logger = logging.getLogger("onion.journal")

if TYPE_CHECKING:
    from .._calls import ToolCall
    from .._principal import DecisionRecord
    from .._run import Run
    from ..stores import RunStatus, RunStore, SessionTurn


class Journal:
    """Records one run's steps in `store` under `run_id`, as the worker `owner` holding its lease.

    The lease (`lease` seconds) is extended by every write and by renewals
    at most `lease / 3` seconds apart while the run goes on; a worker
    that lost it gets `LeaseLost` on its next write, and a renewal that finds
    it lost cancels the run where it is (`stop_when_lost`). `key` (the agent's
    `state_key`): the last entry of each write carries an HMAC too. A run that goes on from the
    store (resumed, recovered) follows its stored entries first (`chain.follow`).
    """

    __slots__ = (
        "_beginning",
        "_flush",
        "_held",
        "_known",
        "_last",
        "_renewals",
        "_renewed",
        "_renewing",
        "_stoppable",
        "_waiters",
        "_writing",
        "chain",
        "inline",
        "lease",
        "lost",
        "owner",
        "run_id",
        "store",
    )

    def __init__(
        self, store: RunStore, run_id: str, *, lease: float, owner: str | None = None, key: bytes | None = None
    ) -> None:
        self.store = store
        self.run_id = run_id
        self.lease = lease
        self.owner = owner or uuid.uuid4().hex
        self._beginning: tuple[str | None, int] | None = None
        self._held: list[str] = []
        self._flush: asyncio.Task[None] | None = None
        self._writing = False
        self.inline = inline_writes(store)
        """The store's writes may begin outside their own task (MemoryStore, SQLiteStore): one that ends without
        waiting then costs no task."""
        self._waiters: list[asyncio.Future[None]] = []
        self._known = 0
        self._last: Message | None = None
        self._renewals: Renewals | None = None
        self._renewed = 0.0
        self._renewing: asyncio.Task[None] | None = None
        self._stoppable: asyncio.Task[Any] | None = None
        self.lost: LeaseLost | RunNotFound | None = None
        """Set when a renewal found the run taken over by another worker, or deleted."""
        self.chain = Chain(run_id, key)
        """Where the run's journal stands: what its next entry names as the one before it."""

    async def begin(self, run: Run, *, session: str | None = None, session_from: int = 0) -> None:
        """Create the run in the store, with its first messages and state."""
        entry = {
            "k": "start",
            "agent": run.agent.name,
            "messages": [m.to_dict() for m in run.messages],
            "state": run.state,
            "steps": run.steps,
            "usage": run.usage.to_dict(),
            "session": session,
            "session_from": session_from,
        }
        if run.principal is not None:
            entry["principal"] = run.principal.to_dict()
        if run._private:
            entry["private"] = run._private
        if run.decisions:
            entry["decisions"] = [record.to_dict() for record in run.decisions]
        self.mark(run.messages)
        tenant = None if run.principal is None else run.principal.tenant
        await self.store.start_run(
            self.run_id,
            agent=run.agent.name,
            owner=self.owner,
            lease=self.lease,
            entries=self.chain.seal([encode(entry, run)]),
            session=session,
            **({} if tenant is None else {"tenant": tenant}),  # a store of yours without tenants serves runs of none
        )
        self.renew_in_background()

    def begin_when_the_loop_starts(self, *, session: str | None = None, session_from: int = 0) -> None:
        """Create the run in the store (`begin`) once its run layers have prepared it: at `begin_now`."""
        self._beginning = (session, session_from)

    async def begin_now(self, run: Run) -> None:
        """`begin`, if `begin_when_the_loop_starts` put it off: the first messages as the run layers left them
        (`pseudonymize` has replaced the values it hides)."""
        if self._beginning is not None:
            session, session_from = self._beginning
            self._beginning = None
            await self.begin(run, session=session, session_from=session_from)

    def model(self, run: Run, response: ModelResponse) -> None:
        """Hold back the entry of `response` (already appended to the history) until the next write."""
        messages = run.messages
        known = self._known
        reset = not (known <= len(messages) and (known == 0 or messages[known - 1] is self._last))
        added = messages if reset else messages[known:-1]
        entry: dict[str, Any] = {
            "k": "model",
            "before": [m.to_dict() for m in added if m is not response.message],
            "response": response.message.to_dict(),
            "usage": response.usage.to_dict(),
            "state": run.state,
        }
        if run._private is not None:
            entry["private"] = run._private
        if reset:
            entry["reset"] = True
        self._held.append(encode(entry, run))
        self.mark(messages)

    async def started(self, call: ToolCall) -> None:
        """Record that `call` is about to run (with what was held back): one round trip."""
        await self._write(f'{{"k":"tool","id":{json_string(call.id)},"name":{json_string(call.name)}}}')

    async def finished(self, call: ToolCall, result: ToolResult) -> None:
        """Record what `call` answered: one round trip."""
        await self._write(result_entry(call.id, result))

    def hold_result(self, call_id: str, result: ToolResult) -> None:
        """Record a result that no tool produced, with the next write."""
        self._held.append(result_entry(call_id, result))

    def hold_decision(self, call_id: str, edited_args: dict[str, Any] | None) -> None:
        """Record, with the next write, that a person approved `call_id` (with `edited_args`, if they edited it)."""
        self._held.append(dumps({"k": "decided", "id": call_id, "args": edited_args}))

    def hold_record(self, record: DecisionRecord) -> None:
        """Record, with the next write, who decided a paused call, when, and what (`DecisionRecord`)."""
        self._held.append(dumps({"k": "decision", "record": record.to_dict()}))

    async def decided_pause(self, call_id: str, kind: str, rejected: str | None) -> None:
        """Record that a person decided the paused model call or run `call_id`: now when approved (a crash in
        the call it lets through then does not ask again), with the next write when `rejected`."""
        entry = {"k": "decided", "id": call_id, "kind": kind, "rejected": rejected}
        if rejected is None:
            await self._write(dumps(entry))
        else:
            self._held.append(dumps(entry))

    async def end(
        self,
        status: RunStatus,
        *,
        state: str | None = None,
        pending: int = 0,
        turn: SessionTurn | None = None,
        error: str | None = None,
    ) -> None:
        """Write what is held, set the status (and a failed run's `error`) and let go, with the session `turn`."""
        self._stop_renewing()
        if self._writing:
            await self._written()
        held, self._held = self._held, []
        try:
            if not self.chain.known:
                await self._follow_store()
            entries = self.chain.seal([*held, end_entry(status, error)])
            await self.store.release_run(
                self.run_id, self.owner, status, state=state, pending=pending, entries=entries, turn=turn
            )
        except BaseException:
            self._held[:0] = held  # not written: a later end (the run failing) writes them
            self.chain.known = False
            raise

    @property
    def renewing(self) -> bool:
        """The run is held and its lease renewed: it has neither ended (`end`) nor been lost."""
        return self._renewals is not None

    async def give_back(self, state: str | None, pending: int) -> None:
        """Let go of a paused run claimed to resume as it was (its `state`), writing only its end entry."""
        self._stop_renewing()
        self._held = []
        try:
            if not self.chain.known:
                await self._follow_store()
            entries = self.chain.seal([end_entry("paused")])
            await self.store.release_run(
                self.run_id, self.owner, "paused", state=state, pending=pending, entries=entries
            )
        except BaseException:
            self.chain.known = False
            raise

    async def _follow_store(self) -> None:
        """Go on from the entries the store holds: after a write that failed (it may or may not have landed)."""
        self.chain.follow(await self.store.journal(self.run_id))

    def stop_when_lost(self) -> Journal:
        """While inside (`with`), a renewal that finds the run taken over (or deleted) cancels this task; it then
        raises `self.lost`.

        Only while inside: the task is then suspended inside the run, so the
        cancellation lands there (the model call, the running tools) and
        nowhere else.
        """
        return self

    def __enter__(self) -> None:
        self._stoppable = asyncio.current_task()

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, trace: object) -> None:
        task, self._stoppable = self._stoppable, None
        cancelled = isinstance(error, asyncio.CancelledError)
        if cancelled and self.lost is not None and task is not None and task.uncancel() == 0:
            raise self.lost from None

    async def _write(self, entry: str) -> None:
        """Write `entry` (JSON text) with everything held; the calls of one batch writing at once share one round
        trip."""
        self._held.append(entry)
        await self._written()

    def _written(self) -> asyncio.Future[None]:
        """A future settled once what is held now is written, by the one write this run has going.

        The write starts at the loop's next pass, once the batch's other calls
        held theirs. Each caller waits on a future of its own, so a caller
        cancelled while waiting leaves the write, and the others, going on.
        """
        loop = asyncio.get_running_loop()
        done = loop.create_future()
        self._waiters.append(done)
        if not self._writing:
            self._writing = True
            if self.inline:  # the write begins in a callback: a task only if it has to wait
                loop.call_soon(self._write_now, loop)
            else:
                self._flush = loop.create_task(self._write_held(None))
        return done

    def _write_now(self, loop: asyncio.AbstractEventLoop, write: Coroutine[Any, Any, None] | None = None) -> None:
        """Write what is held, in order (after `write`, begun already), as the store's writes allow: a write that
        waits on a future of this loop goes on from that future's callback, any other in a task."""
        try:
            while True:
                if write is None:
                    if not self._held:
                        break
                    if not self.chain.known:  # a write failed: the store's entries are read first, in a task
                        self._flush = loop.create_task(self._write_held(None))
                        return
                    held, self._held = self._held, []
                    begun = self.store.append_journal(self.run_id, self.owner, self.chain.seal(held), self.lease)
                    if type(begun) is not types.CoroutineType:
                        self._flush = loop.create_task(self._write_held(begun))
                        return
                    write = begun
                try:
                    step = write.send(None)
                except StopIteration:
                    write = None
                    continue
                if type(step) is asyncio.Future and step._asyncio_future_blocking and step.get_loop() is loop:
                    step._asyncio_future_blocking = False
                    step.add_done_callback(functools.partial(self._went_on, loop, write))
                else:
                    self._flush = loop.create_task(self._write_held(going_on(write, step)))
                return
        except Exception as error:
            self._settle(error)
        except asyncio.CancelledError:  # the store's future was cancelled: so are the callers
            self._settle(None, cancelled=True)
        except BaseException:
            self._settle(None, cancelled=True)
            raise
        else:
            self._settle(None)

    def _went_on(self, loop: asyncio.AbstractEventLoop, write: Coroutine[Any, Any, None], _: object) -> None:
        self._write_now(loop, write)

    async def _write_held(self, write: Awaitable[None] | None) -> None:
        """Write what is held, in order, until nothing is (after `write`, begun already); then settle the waiting
        callers."""
        try:
            if write is not None:
                await write
            while self._held:
                if not self.chain.known:
                    await self._follow_store()
                held, self._held = self._held, []
                await self.store.append_journal(self.run_id, self.owner, self.chain.seal(held), self.lease)
        except Exception as error:
            self._settle(error)
        except BaseException:
            self._settle(None, cancelled=True)
            raise
        else:
            self._settle(None)

    def _settle(self, error: Exception | None, *, cancelled: bool = False) -> None:
        self._flush, self._writing = None, False
        if error is not None or cancelled:  # the write may or may not have landed
            self.chain.known = False
        waiters, self._waiters = self._waiters, []
        for done in waiters:
            if done.done():
                continue
            if cancelled:
                done.cancel()
            elif error is not None:
                done.set_exception(error)
            else:
                done.set_result(None)

    def mark(self, messages: list[Message]) -> None:
        """The journal holds `messages`: the next model entry records what comes after them."""
        self._known = len(messages)
        self._last = messages[-1] if messages else None

    def renew_in_background(self) -> None:
        """Renew the lease at most `lease / 3` seconds apart until the run ends (`Renewals`: one timer per loop
        and lease for all its runs)."""
        loop = asyncio.get_running_loop()
        self._renewed = loop.time()
        group = renewals_for(loop, self.lease)
        group.add(self)
        self._renewals = group

    def _renew_now(self, now: float) -> None:
        self._renewed = now
        self._renewing = asyncio.get_running_loop().create_task(self._renew())

    async def _renew(self) -> None:
        try:
            await self.store.renew_run(self.run_id, self.owner, self.lease)
        except RunBusy:
            self._stop(taken_over(self.run_id))
            return
        except RunNotFound:  # nothing more of it can be recorded
            self._stop(deleted(self.run_id))
            return
        except Exception as error:  # a store blip must not let the lease lapse while the run goes on
            logger.warning("run %s: renewing its lease failed (%s); trying again", self.run_id, error)
            self._renewed -= self.lease / 6  # due again at the next tick
        self._renewing = None

    def _stop(self, lost: LeaseLost | RunNotFound) -> None:
        """Stop the run where it is (inside `stop_when_lost`), to raise `lost`; renew no more."""
        self._stop_renewing()
        self.lost = lost
        if self._stoppable is not None:
            self._stoppable.cancel()

    def _stop_renewing(self) -> None:
        if self._renewals is not None:
            self._renewals.journals.discard(self)
            self._renewals = None
        if self._renewing is not None:
            if self._renewing is not asyncio.current_task():
                self._renewing.cancel()
            self._renewing = None
