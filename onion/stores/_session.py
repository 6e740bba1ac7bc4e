"""`Session`: a conversation kept in a store under an id, and the lock that serialises its runs."""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import AsyncIterator, Sequence

from .._messages import Message
from ._protocols import SessionStore


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

    async def append(self, messages: Sequence[Message]) -> None:
        """Append `messages` in one transaction."""
        if messages:
            await self.store.session_append(
                self.session_id, [json.dumps(m.to_dict(), ensure_ascii=False) for m in messages]
            )

    async def clear(self) -> None:
        """Forget the conversation."""
        await self.store.session_clear(self.session_id)

    @contextlib.asynccontextmanager
    async def lock(self) -> AsyncIterator[None]:
        """Hold the session's lock: wait for it (polling, never blocking the loop), renew it while held."""
        owner = uuid.uuid4().hex
        wait = self.poll
        while not await self.store.lock_session(self.session_id, owner, self.lease):
            await asyncio.sleep(wait)
            wait = min(wait * 2, 0.25)
        renewing = asyncio.create_task(self._renew(owner))
        try:
            yield
        finally:
            renewing.cancel()
            await asyncio.gather(renewing, return_exceptions=True)
            await asyncio.shield(self.store.unlock_session(self.session_id, owner))

    async def _renew(self, owner: str) -> None:
        while True:
            await asyncio.sleep(self.lease / 3)
            await self.store.lock_session(self.session_id, owner, self.lease)

    def __repr__(self) -> str:
        return f"<Session {self.session_id!r}>"


class SessionOpener:
    """Gives a `SessionStore` its `session(id)`; mixed into every store."""

    def session(self: SessionStore, session_id: str) -> Session:
        """The conversation `session_id` kept in this store."""
        return Session(self, session_id)
