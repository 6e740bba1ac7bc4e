"""`Session`: a conversation kept in a store under an id, and the lock that serialises its runs; `SessionStore`,
what a store does for it."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from .._committed import committed
from .._messages import Message

logger = logging.getLogger("onion.stores")


@dataclass(frozen=True, slots=True)
class SessionTurn:
    """A completed run's new messages (JSON text), appended to its session with the run's completion.

    `lock` is the owner token of the session's lock (`Session.lock()`): the
    turn is written only while that token still holds the lock.
    """

    session_id: str
    messages: Sequence[str]
    lock: str


@runtime_checkable
class SessionStore(Protocol):
    """Conversations kept per session id, and a lock that serialises runs on one session."""

    def session(self, session_id: str) -> Session:
        """The conversation `session_id` kept in this store."""
        ...

    async def session_messages(self, session_id: str) -> list[str]:
        """The session's messages, oldest first."""
        ...

    async def session_append(self, session_id: str, messages: Sequence[str], *, lock: str | None = None) -> bool:
        """Append messages in one transaction.

        With `lock` (an owner token of `lock_session`): only while that token
        holds the session's lock; False, and nothing appended, when it does not.
        """
        ...

    async def session_clear(self, session_id: str) -> None:
        """Forget the session's messages."""
        ...

    async def lock_session(self, session_id: str, owner: str, lease: float, *, renew: bool = False) -> bool:
        """Take (or extend) the session's lock for `owner` for `lease` seconds; False if someone else holds it.

        `renew`: only extend a lock `owner` still holds (its lease may have
        lapsed, as long as no one took it since); False when it does not.
        """
        ...

    async def unlock_session(self, session_id: str, owner: str) -> None:
        """Release the lock if `owner` holds it."""
        ...


@runtime_checkable
class SessionTenants(Protocol):
    """Which tenant each session is of: a run given a principal of another tenant is refused on it.

    `MemoryStore`, `SQLiteStore` and `RedisStore` keep it; a store of yours without it serves runs whose
    principals have no tenant (docs/security.md, "Tenants").
    """

    async def claim_session(self, session_id: str, tenant: str | None) -> str | None:
        """The session's tenant (None: of no tenant): the one on record, else `tenant`, recorded now, atomically.

        A session with messages and none on record (kept before stores knew tenants, or appended to without
        a run) is recorded as of no tenant. The record outlives `session_clear`: a session id once a tenant's
        stays that tenant's.
        """
        ...


class Session:
    """The conversation `session_id` in `store`.

    `agent.run(..., session=...)` starts from its messages and appends the
    run's new ones when the run completes. Runs on one session take its
    lock, so they run one after the other, across processes too; a lock
    whose holder died lapses after `lease` seconds (renewed while held).
    """

    __slots__ = ("lease", "poll", "session_id", "store")

    def __init__(self, store: SessionStore, session_id: str, *, lease: float = 30.0, poll: float = 0.01) -> None:
        if not isinstance(session_id, str) or not session_id:
            raise ValueError(f"a session id must be a non-empty string, got {session_id!r}")
        self.store = store
        self.session_id = session_id
        self.lease = lease
        self.poll = poll

    async def messages(self) -> list[Message]:
        """The conversation so far, oldest first."""
        return [Message.from_dict(json.loads(text)) for text in await self.store.session_messages(self.session_id)]

    async def append(self, messages: Sequence[Message], *, lock: str | None = None) -> bool:
        """Append `messages` in one transaction.

        With `lock` (the token `lock()` gave): only while it still holds the
        session's lock; False, and nothing appended, once another run took it.
        """
        if not messages and lock is None:
            return True
        return await self.store.session_append(self.session_id, _encoded(messages), lock=lock)

    def turn(self, messages: Sequence[Message], lock: str) -> SessionTurn:
        """`messages` as a turn to append with a run's completion (`RunStore.release_run`), fenced by `lock`."""
        return SessionTurn(self.session_id, _encoded(messages), lock)

    async def clear(self) -> None:
        """Forget the conversation."""
        await self.store.session_clear(self.session_id)

    @contextlib.asynccontextmanager
    async def lock(self, *, owner: str | None = None) -> AsyncIterator[str]:
        """Hold the session's lock, yielding its owner token: wait for it (polling, never blocking the loop).

        `owner` is the token to hold it by (default: a fresh one). A journaled
        run holds it by its run id: a store never hands such a lock on while
        it has that run running, even once the lock lapsed (its worker died),
        so the run, when recovered, takes it back and keeps its place.

        The lock is renewed while held. If it lapsed and another run took it,
        renewing stops (it is never taken back): an append fenced by the token
        (`append(..., lock=token)`, `turn(...)`) is then refused. A caller
        cancelled while taking the lock gives it back, should the store have
        taken it. Once the block inside has ended, letting go of the lock
        finishes even if the caller is cancelled meanwhile, and the block's
        outcome stands (a run that completed is not reported as cancelled).
        """
        owner = owner or uuid.uuid4().hex
        wait = self.poll
        try:
            while not await self.store.lock_session(self.session_id, owner, self.lease):
                await asyncio.sleep(wait)
                wait = min(wait * 2, 0.25)
        except BaseException:  # cancelled (or failed) after the store may have taken the lock for us
            with contextlib.suppress(Exception):  # a store that cannot unlock lets the lock lapse
                await asyncio.shield(self.store.unlock_session(self.session_id, owner))
            raise
        renewing = asyncio.create_task(self._renew(owner))
        try:
            yield owner
        except BaseException:
            await self._let_go(renewing, owner)
            raise
        await committed(self._let_go(renewing, owner))  # the work inside is done: a late cancel stops nothing

    async def _let_go(self, renewing: asyncio.Task[None], owner: str) -> None:
        """Stop renewing and give the lock back."""
        renewing.cancel()
        try:
            await asyncio.gather(renewing, return_exceptions=True)
        finally:  # cancelled again while the renewal stops: unlock all the same
            await asyncio.shield(self.store.unlock_session(self.session_id, owner))

    async def _renew(self, owner: str) -> None:
        while True:
            await asyncio.sleep(self.lease / 3)
            try:
                if not await self.store.lock_session(self.session_id, owner, self.lease, renew=True):
                    logger.warning("session %s: its lock lapsed and another run took it", self.session_id)
                    return
            except Exception as error:  # a store blip must not let the lock lapse while the run goes on
                logger.warning("session %s: renewing its lock failed (%s); trying again", self.session_id, error)

    def __repr__(self) -> str:
        return f"<Session {self.session_id!r}>"


class SessionOpener:
    """Gives a `SessionStore` its `session(id)`; mixed into every store."""

    def session(self: SessionStore, session_id: str) -> Session:
        """The conversation `session_id` kept in this store."""
        return Session(self, session_id)


def _encoded(messages: Sequence[Message]) -> list[str]:
    return [json.dumps(m.to_dict(), ensure_ascii=False) for m in messages]
