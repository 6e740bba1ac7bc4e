"""Runs on an agent with a store: journaled as they go, resumed from the store without repeating work.

Every journaled run goes through `journaled(loop, run, store, on_session)`. A
run that goes on from where it stopped (`resume_paused`: a paused batch now
decided; `recover`: the batch a dead worker left) is rebuilt here and holds
that one batch (`run._pending`) for the loop to finish first.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from typing import TYPE_CHECKING, Any, NamedTuple

from .._committed import committed
from .._results import ToolResult
from .._run import Run, RunResult
from ..errors import ForeignRun, OnionError, RunBusy, RunNotFound, RunStateError, StoreUnavailable
from .decisions import check_owner, check_tenant
from .entries import failure_text
from .journal import Journal
from .replay import Replay, pending_batch, replay
from .state import LONE_KINDS, RunState
from .trust import CONSUMED, already_decided, check_trusted, rejection_text, signing_keys, take_decisions

if TYPE_CHECKING:
    from collections.abc import Callable

    from .._events import Event
    from .._loop import Loop
    from .._principal import Principal
    from .._tools import Tool
    from ..stores import Session, Store
    from ..types import AgentLike

__all__ = ["OnSession", "committed", "journaled", "journaled_id", "recover", "rejection_text", "resume_paused"]


class OnSession(NamedTuple):
    """Where a run on a session puts its own messages when it completes: in one write with its completion."""

    session: Session
    start: int
    """`run.messages[start:]` are the run's own (its input onwards)."""
    lock: str
    """The token of the session's lock the run holds (its run id): its turn is appended under it."""


def journal_key(agent: AgentLike) -> bytes | None:
    """The key whose HMAC each journal entry of `agent`'s runs carries: the one that signs its paused runs."""
    keys = signing_keys(agent.state_key)
    return keys[0] if keys else None


def journaled_id() -> str:
    """A fresh id for a run journaled in a store (a run on a session also holds the session's lock by it)."""
    return f"run-{uuid.uuid4().hex}"


async def journaled(
    loop: Loop, run: Run, store: Store, on_session: OnSession | None = None, journal: Journal | None = None
) -> RunResult[Any]:
    """Run `run` with a journal in `store`, ended as completed (with its session turn), paused or failed.

    A new run (no `journal`) is journaled under a fresh id (a run on a session
    has one already: `journaled_id`), created in the store when the loop
    starts, after the run layers prepared it. A renewal that finds the run
    taken over by another worker stops it: `LeaseLost`, and nothing more of it
    is recorded by this worker.
    """
    if journal is None:
        if on_session is None:
            run.id = journaled_id()
        journal = Journal(store, run.id, lease=loop.agent.lease, owner=run.id, key=journal_key(loop.agent))
        session = None if on_session is None else on_session.session.session_id
        journal.begin_when_the_loop_starts(session=session, session_from=0 if on_session is None else on_session.start)
    run.journal = journal
    try:
        with journal.stop_when_lost():
            result = await loop.run_through(run)
        await journal.begin_now(run)  # a run layer answered without the loop
        inline = journal.inline
        if result.paused:
            state = result.to_state().to_json()
            await committed(journal.end("paused", state=state, pending=len(result.pending)), inline=inline)
        elif on_session is None:
            await committed(journal.end("completed"), inline=inline)
        else:  # the turn is appended in the same write, under the session's lock
            conversation, start, lock = on_session
            turn = conversation.turn(result.messages[start:], lock)
            await committed(journal.end("completed", turn=turn), inline=inline)
    except BaseException as error:
        await asyncio.shield(_let_go(journal, error))
        raise
    return result


async def resume_paused(
    loop: Loop,
    given: RunState,
    output_type: Any,
    store: Store,
    session: Session | None,
    emit: Callable[[Event], None] | None = None,
    by: Principal | None = None,
) -> RunResult[Any]:
    """Go on with the paused run `given` decides, as the one worker holding it in `store`; the decisions on
    record as `by`'s.

    `RunBusy` while another worker resumes it; `RunStateError` when its batch
    was decided already (the run is left as it was), or when the store never
    saw the run and `given` is not signed with the agent's key
    (`check_trusted`: a state that paused in a store never is) or this process took
    it over already; `ForeignRun` when the run is another agent's,
    or of another tenant than `by`. The decisions are journaled with the batch
    (`docs/durable.md`, "Paused runs in a store").
    """
    agent = loop.agent
    journal = Journal(store, given.run_id, lease=agent.lease, key=journal_key(agent))
    try:
        record = await store.claim_run(given.run_id, journal.owner, agent.lease, paused_only=True)
    except RunNotFound:
        keys = signing_keys(agent.state_key)
        if not keys and not given.stored:
            raise RunStateError(
                f"run {given.run_id} is not in this agent's store: with a store, resume goes on with the runs the "
                "store saved (a state from elsewhere could say anything); to take over a run paused on an agent "
                "without a store, sign its states with the same state_key on both agents "
                "(Agent(state_key=...) or ONION_STATE_KEY)"
            ) from None
        check_trusted(given, keys, agent.name, agent.state_ttl)
        check_tenant(given.run_id, given.principal, by)
        run = await loop.resumed(given, output_type, by)
        run.emit, run.journal = emit, journal
        CONSUMED.take(given, agent.name, agent.state_ttl)  # the store remembers it from here, until purged
        try:
            await journal.begin(run, session=given.session, session_from=given.session_from)
        except BaseException:  # not adopted: it may be delivered again
            CONSUMED.give_back(given, agent.name)
            raise
        for message in given.answered:
            content = message.text if message.content is None else message.content
            journal.hold_result(
                message.tool_call_id or "", ToolResult(content, is_error=message.is_error, untrusted=message.untrusted)
            )
        return await _resumed(loop, run, journal, store, given, session)
    except RunBusy as busy:
        if busy.status == "running":
            raise
        raise already_decided(given.run_id, busy.status) from None
    try:
        saved = RunState.from_json(record.state or "")
        check_owner(saved, agent.name, by)
        take_decisions(saved, given)
        run = await loop.resumed(saved, output_type, by)
        run.emit = emit
        written = await store.journal(run.id)
        journal.chain.follow(written)  # its entries go on from the last one stored
        if record.session is not None:
            start = json.loads(written[0])
            run.session, run.session_from = record.session, start.get("session_from", 0)
        if session is not None and session.session_id != run.session:
            raise RunStateError(
                f"run {run.id} is on session {run.session!r}, not {session.session_id!r}: resume it without "
                "session= (its store keeps which session it is on)"
            )
    except BaseException:  # not resumed: the run waits as it was
        await asyncio.shield(
            store.release_run(given.run_id, journal.owner, "paused", state=record.state, pending=record.pending)
        )
        raise
    journal.renew_in_background()
    journal.mark(run.messages)
    try:
        return await _resumed(loop, run, journal, store, saved, session)
    except BaseException:  # before the run went on (a decided write, its session's lock): it waits as it was
        if journal.renewing:
            await asyncio.shield(_given_back(journal, record.state, record.pending))
        raise


async def _resumed(
    loop: Loop, run: Run, journal: Journal, store: Store, state: RunState, session: Session | None
) -> RunResult[Any]:
    """Run the resumed `run` (decided `state`), on its session if it has one."""
    for record in run.decisions[len(state.decisions) :]:
        journal.hold_record(record)
    for call in state.pending:
        if call.kind in LONE_KINDS:  # a paused model call or run
            rejected = (call.rejection or "not approved") if call.decision == "rejected" else None
            await journal.decided_pause(call.id, call.kind, rejected)
        elif call.decision == "rejected":
            journal.hold_result(call.id, ToolResult(rejection_text(call.name, call.rejection), is_error=True))
        elif call.decision == "resolved":  # a call that may have run: a person recorded what it did
            journal.hold_result(call.id, ToolResult(call.result or ""))
        else:
            journal.hold_decision(call.id, call.edited_args if call.decision == "edited" else None)
    if run.session is None:
        return await journaled(loop, run, store, None, journal)
    conversation = store.session(run.session) if session is None else session
    return await _on_session(loop, run, journal, store, conversation, run.session_from)


async def _on_session(
    loop: Loop, run: Run, journal: Journal, store: Store, session: Session, start: int
) -> RunResult[Any]:
    """Run the resumed (or recovered) `run` holding `session`'s lock, as a new run on it would.

    The lock is taken by the run's id: a lock its dead worker left is taken
    back at once, and no newer run took it meanwhile (a store never hands a
    lock held by a run it still has running to another holder).
    """
    async with session.lock(owner=run.id) as lock:
        return await journaled(loop, run, store, OnSession(session, start, lock), journal)


async def _given_back(journal: Journal, state: str | None, pending: int) -> None:
    """Give the paused run back as it was; a worker that lost it, or its store, leaves it as it is."""
    with contextlib.suppress(RunBusy, RunNotFound, StoreUnavailable):
        await journal.give_back(state, pending)


async def _let_go(journal: Journal, error: BaseException) -> None:
    """Mark the run failed (resumable) with what it failed with; a worker that lost the run, or its store, leaves
    it as it is."""
    with contextlib.suppress(RunBusy, RunNotFound, StoreUnavailable):
        await journal.end("failed", error=failure_text(error))


async def recover(
    loop: Loop,
    store: Store,
    run_id: str,
    output_type: Any,
    emit: Callable[[Event], None] | None = None,
    by: Principal | None = None,
) -> RunResult[Any]:
    """Claim `run_id`, rebuild it from its journal, finish it (its final answer validated as `output_type`).

    Raises `RunBusy` when another worker holds it (or it has ended),
    `RunNotFound` when the store never saw it, `ForeignRun` when it is another
    agent's, or of another tenant than `by`.
    """
    agent = loop.agent
    record = await store.run_record(run_id)
    if record is not None and record.agent != agent.name:
        raise ForeignRun(
            f"run {run_id} belongs to agent {record.agent!r}, not {agent.name!r}: a run is resumed, decided and "
            "recovered only by the agent that started it",
            run_id=run_id,
        )
    if record is not None and by is not None:
        check_tenant(run_id, replay(run_id, (await store.journal(run_id))[:1]).principal, by)
    if record is not None and record.status == "paused":
        raise RunStateError(
            f"run {run_id!r} is paused, waiting for decisions on {record.pending} call(s): "
            "load it with `state = await store.load(run_id)`, decide (state.approve(id), state.reject(id, reason=...), "
            "state.edit(id, args)), then `await agent.resume(state)`"
        )
    journal = Journal(store, run_id, lease=agent.lease, key=journal_key(agent))
    await store.claim_run(run_id, journal.owner, agent.lease)
    journal.renew_in_background()
    try:
        written = await store.journal(run_id)
        journal.chain.follow(written)  # its entries go on from the last one stored
        replayed = replay(run_id, written)
        tools = await loop.known_tools(None)
        _check_agent(agent.name, run_id, replayed, tools)
    except BaseException as error:
        await asyncio.shield(_let_go(journal, error))
        raise
    try:
        run = Run(agent, replayed.messages, replayed.messages, replayed.state, output_type, replayed.principal)
        run.id, run.steps, run.usage = run_id, replayed.steps, replayed.usage
        run.private, run.decisions = replayed.private, replayed.decisions
        run.session, run.emit = replayed.session, emit
        journal.mark(run.messages)
        if replayed.unanswered or replayed.completed or replayed.decided_pause:
            run._pending = pending = pending_batch(replayed, tools, journal)
            run.approved = pending.kind == "run" and pending.rejection is None
        if replayed.session is None:
            return await journaled(loop, run, store, None, journal)
        session = store.session(replayed.session)
        return await _on_session(loop, run, journal, store, session, replayed.session_from)
    except BaseException as error:  # before the run went on (waiting for its session's lock, say): failed, resumable
        if journal.renewing:
            await asyncio.shield(_let_go(journal, error))
        raise


def _check_agent(agent: str, run_id: str, replayed: Replay, tools: dict[str, Tool]) -> None:
    missing = sorted({c.name for c in replayed.unanswered} - tools.keys())
    if missing:
        raise OnionError(
            f"run {run_id!r} has calls to tools {missing} that agent {agent!r} does not have; "
            "resume it with an agent that has them"
        )
