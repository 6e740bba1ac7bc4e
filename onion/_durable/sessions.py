"""Runs on a session: started from its messages, their own appended when they complete."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from .._boundary import engine_keeps_history
from .._loop import first_messages
from .._messages import Message
from .._run import Run, RunResult
from ..errors import ForeignRun, RunStateError
from ..stores import SessionTenants
from ..stores._refusals import session_lost
from .decisions import check_tenant
from .runs import OnSession, committed, journaled, journaled_id, resume_paused
from .state import RunState
from .trust import CONSUMED, check_trusted, signing_keys

if TYPE_CHECKING:
    from .._loop import Loop
    from .._principal import Principal
    from ..stores import Session, Store
    from ..types import AgentLike


def session_of(agent: AgentLike, session: str | Session) -> Session:
    """The `Session` a run's `session=` names: a session id in `agent.store`, or a `Session` itself."""
    if not isinstance(session, str):
        if agent.store is not None and session.store is not agent.store:
            raise ValueError(
                f"{agent.name}: {session!r} is kept in another store than agent.store; a run on an agent with a "
                "store completes in the same write as it appends to its session: pass session='id' "
                "(or agent.store.session(id))"
            )
        return session
    if agent.store is None:
        raise ValueError(
            f"{agent.name}: session={session!r} needs a store to keep it in: "
            "Agent(..., store=SQLiteStore('onion.db')), or pass session=store.session(id)"
        )
    store: Store = agent.store
    return store.session(session)


async def run_in_session(
    loop: Loop,
    input: str | Message | Sequence[Message],
    state: dict[str, Any] | None,
    output_type: Any,
    conversation: Session,
    emit: Callable[[Any], None] | None,
    principal: Principal | None = None,
) -> RunResult[Any]:
    """A run that starts from `conversation`'s messages and appends its own once it completes.

    Journaled (the agent has a store), the append is part of the write that
    completes the run, and the lock is held by the run's id (so a run
    recovered after its worker died keeps its place). Either way it is fenced
    by the session's lock: `LeaseLost` naming the session, and nothing
    appended, when the lock lapsed and another run took it. Given a
    `principal`, the session must be of its tenant (`admitted`).
    """
    agent = loop.agent
    store: Store | None = agent.store
    run_id = journaled_id() if store is not None else None
    if principal is not None:
        await admitted(conversation, principal, run_id or "")
    async with conversation.lock(owner=run_id) as lock:
        history = await conversation.messages()
        first = first_messages(agent, input)
        start = 1 if first and first[0].role == "system" else 0
        run = Run(agent, input, [*first[:start], *history, *first[start:]], state, output_type, principal)
        run.emit = emit
        run.session, run.session_from = conversation.session_id, start + len(history)
        if store is not None:
            run.id = lock
            return await journaled(loop, run, store, OnSession(conversation, run.session_from, lock))
        return await _appended(loop, run, conversation, lock)


async def admitted(conversation: Session, principal: Principal, run_id: str) -> None:
    """`ForeignRun` unless `conversation` is of `principal`'s tenant: its tenant on record, else recorded now (its
    first run given a principal). Before the session's lock or history is touched; the error names nothing of it."""
    store = conversation.store
    if not isinstance(store, SessionTenants):
        if principal.tenant is None:
            return
        raise TypeError(
            f"{store!r} does not keep which tenant a session is of, so a run for tenant {principal.tenant!r} cannot "
            f"be kept apart on session {conversation.session_id!r}: give the store a claim_session method "
            "(onion.stores.SessionTenants), or use MemoryStore, SQLiteStore or RedisStore"
        )
    if await store.claim_session(conversation.session_id, principal.tenant) != principal.tenant:
        raise ForeignRun(f"no session {conversation.session_id!r} for principal {principal.id!r}", run_id=run_id)


async def resume_run(
    loop: Loop,
    state: RunState,
    output_type: Any,
    session: Session | None,
    emit: Callable[[Any], None] | None,
    by: Principal | None = None,
) -> RunResult[Any]:
    """Go on with the paused run `state` decides: the one path of every resume.

    With a store, the run the store saved goes on (`_durable.resume_paused`);
    without, the state must be trusted (`check_trusted`) and goes on in
    memory, on its session if it paused on one; a signed state goes on once in
    this process (`trust.CONSUMED`) and within the agent's `state_ttl`, unless
    a durable engine runs it (its history keeps the state, however long it
    waited for decisions, and replays the resume).
    """
    agent = loop.agent
    store: Store | None = agent.store
    if store is not None:
        return await resume_paused(loop, state, output_type, store, session, emit, by)
    keys = signing_keys(agent.state_key)
    in_engine = engine_keeps_history()
    check_trusted(state, keys, agent.name, None if in_engine else agent.state_ttl)
    check_tenant(state.run_id, state.principal, by)
    run = await loop.resumed(state, output_type, by)
    run.emit = emit
    conversation = None if run.session is None else _its_session(run, session)
    if keys and not in_engine:
        CONSUMED.take(state, agent.name, agent.state_ttl)
    if conversation is None:
        return await loop.run_through(run)
    async with conversation.lock() as lock:
        return await _appended(loop, run, conversation, lock)


def _its_session(run: Run, conversation: Session | None) -> Session:
    """`conversation`, the session of a store the agent does not have that the resumed `run` paused on."""
    if conversation is None or conversation.session_id != run.session:
        raise RunStateError(
            f"run {run.id} paused on session {run.session!r} of a store this agent does not have: "
            f"resume it with agent.resume(state, session=store.session({run.session!r})) to append its turn there"
        )
    return conversation


async def _appended(loop: Loop, run: Run, conversation: Session, lock: str) -> RunResult[Any]:
    """Run `run` (no store); append its own messages to `conversation` under `lock` once it completes."""
    result = await loop.run_through(run)
    if not result.paused and not await committed(conversation.append(result.messages[run.session_from :], lock=lock)):
        raise session_lost(run.id, conversation.session_id)
    return result
