"""Runs on an agent with a store: journaled as they go, resumed from the journal without repeating work."""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from ._calls import ModelResponse, Run, RunResult, ToolCall, ToolResult
from ._journal import INTERRUPTED, Journal, Replay, replay
from ._messages import Message
from ._state import RunState, already_decided, check_trusted, state_key, take_decisions
from .errors import OnionError, RunBusy, RunNotFound, RunStateError, StoreUnavailable

if TYPE_CHECKING:
    from ._agent import Agent, _Chains
    from ._tools import Tool
    from .stores import Session, Store

T = TypeVar("T")


class OnSession(NamedTuple):
    """Where a run on a session puts its own messages when it completes: in one write with its completion."""

    session: Session
    start: int
    """`run.messages[start:]` are the run's own (its input onwards)."""
    lock: str
    """The token of the session's lock the run holds (its run id): its turn is appended under it."""


def journaled_id() -> str:
    """A fresh id for a run journaled in a store (a run on a session also holds the session's lock by it)."""
    return f"run-{uuid.uuid4().hex}"


async def run_in_store(
    agent: Agent[Any], chains: _Chains, run: Run, store: Store, on_session: OnSession | None
) -> RunResult[Any]:
    """Run `run` journaled in `store` under a fresh id (a run on a session has one already: `journaled_id`)."""
    if on_session is None:
        run.id = journaled_id()
    return await run_journaled(agent, chains, run, store, on_session)


async def on_session_journaled(
    agent: Agent[Any], chains: _Chains, run: Run, store: Store, session: Session, start: int
) -> RunResult[Any]:
    """Run the resumed (or recovered) `run` holding `session`'s lock, as a new run on it would.

    The lock is taken by the run's id: a lock its dead worker left is taken
    back at once, and no newer run took it meanwhile (a store never hands a
    lock held by a run it still has running to another holder).
    """
    async with session.lock(owner=run.id) as lock:
        return await run_journaled(agent, chains, run, store, OnSession(session, start, lock))


async def run_journaled(
    agent: Agent[Any], chains: _Chains, run: Run, store: Store, on_session: OnSession | None
) -> RunResult[Any]:
    """Run `run` with a journal in `store`: created when the loop starts (after the run layers prepared the
    run), ended as completed (with its session turn) or failed.

    A renewal that finds the run taken over by another worker stops it:
    `LeaseLost`, and nothing more of it is recorded by this worker.
    """
    journal = run.journal
    if journal is None:
        journal = run.journal = Journal(store, run.id, lease=agent.lease, owner=run.id)
        session = None if on_session is None else on_session.session.session_id
        journal.begin_when_the_loop_starts(session=session, session_from=0 if on_session is None else on_session.start)
    try:
        with journal.stop_when_lost():
            result = await agent._run_chain(chains, run)
        await journal.begin_now(run)  # a run layer answered without the loop
        if result.paused:
            await committed(journal.end("paused", state=result.to_state().to_json(), pending=len(result.pending)))
        elif on_session is None:
            await committed(journal.end("completed"))
        else:  # the turn is appended in the same write, under the session's lock
            conversation, start, lock = on_session
            await committed(journal.end("completed", turn=conversation.turn(result.messages[start:], lock)))
    except BaseException:
        await asyncio.shield(_let_go(journal))
        raise
    return result


async def committed(write: Awaitable[T]) -> T:
    """Await `write`, a run's last write, to its end even if the caller is cancelled meanwhile.

    A write in flight may land whatever the caller does: once it has, the
    run is over and the caller gets its result (the cancellation came too late
    to stop anything), so a caller is never told "cancelled" of a run the
    store holds as completed. A write that fails raises as it would.
    """
    task = asyncio.ensure_future(write)
    cancelled = False
    while True:
        try:
            result = await asyncio.shield(task)
        except asyncio.CancelledError:
            if task.done():
                raise
            cancelled = True
            continue
        current = asyncio.current_task()
        if cancelled and current is not None:
            current.uncancel()
        return result


async def resume_paused(
    agent: Agent[Any], chains: _Chains, given: RunState, output_type: Any, store: Store, session: Session | None
) -> RunResult[Any]:
    """Go on with the paused run `given` decides, as the one worker holding it in `store`.

    The run is claimed first (`RunBusy` while another worker resumes it); then
    the run the store saved goes on, with `given`'s decisions only: a batch
    that was decided already (the run ended, or paused again) is a
    `RunStateError`, and the run is left as it was. A run the store never saw
    (paused on an agent without this store) is checked as a state from
    outside (`check_trusted`) and journaled from here on. Rejections are
    journaled with the batch, so a crash later never runs a rejected call.
    """
    journal = Journal(store, given.run_id, lease=agent.lease)
    try:
        record = await store.claim_run(given.run_id, journal.owner, agent.lease, paused_only=True)
    except RunNotFound:
        check_trusted(given, state_key(agent.state_key))
        run = agent._resumed_run(given, output_type, await agent._known_tools(None))
        run.journal = journal
        await journal.begin(run, session=given.session, session_from=given.session_from)
        for message in given.answered:
            content = message.text if message.content is None else message.content
            journal.hold_result(message.tool_call_id or "", ToolResult(content, is_error=message.is_error))
        return await _resumed(agent, chains, run, store, given, session)
    except RunBusy as busy:
        if busy.status == "running":
            raise
        raise already_decided(given.run_id, busy.status) from None
    try:
        saved = RunState.from_json(record.state or "")
        take_decisions(saved, given)
        run = agent._resumed_run(saved, output_type, await agent._known_tools(None))
        if record.session is not None:
            start = json.loads((await store.journal(run.id))[0])
            run.session, run.session_from = record.session, start.get("session_from", 0)
    except BaseException:  # not resumed: the run waits as it was
        await asyncio.shield(
            store.release_run(given.run_id, journal.owner, "paused", state=record.state, pending=record.pending)
        )
        raise
    run.journal = journal
    journal.renew_in_background()
    journal.mark(run.messages)
    return await _resumed(agent, chains, run, store, saved, session)


async def _resumed(
    agent: Agent[Any], chains: _Chains, run: Run, store: Store, state: RunState, session: Session | None
) -> RunResult[Any]:
    """Run the resumed `run` (decided `state`), on its session if it has one."""
    assert run.journal is not None
    for call in state.pending:
        if call.decision == "rejected":
            run.journal.hold_result(call.id, ToolResult(rejection_text(call.name, call.rejection), is_error=True))
    if run.session is None:
        return await run_journaled(agent, chains, run, store, None)
    conversation = store.session(run.session) if session is None else session
    return await on_session_journaled(agent, chains, run, store, conversation, run.session_from)


def rejection_text(name: str, reason: str | None) -> str:
    """What the model reads for a rejected call."""
    return f"Tool call {name} was rejected: {reason}"


async def _let_go(journal: Journal) -> None:
    """Mark the run failed (resumable); a worker that lost the run, or its store, leaves it as it is."""
    with contextlib.suppress(RunBusy, RunNotFound, StoreUnavailable):
        await journal.end("failed")


async def resume_from_store(agent: Agent[Any], store: Store, run_id: str, output_type: Any) -> RunResult[Any]:
    """Claim `run_id`, rebuild it from its journal, finish it (its final answer validated as `output_type`).

    Raises `RunBusy` when another worker holds it (or it has ended),
    `RunNotFound` when the store never saw it.
    """
    record = await store.run_record(run_id)
    if record is not None and record.status == "paused":
        raise RunStateError(
            f"run {run_id!r} is paused, waiting for decisions on {record.pending} call(s): "
            "load it with `state = await store.load(run_id)`, decide (state.approve(id), state.reject(id, reason=...), "
            "state.edit(id, args)), then `await agent.resume(state)`"
        )
    journal = Journal(store, run_id, lease=agent.lease)
    await store.claim_run(run_id, journal.owner, agent.lease)
    journal.renew_in_background()
    try:
        replayed = replay(run_id, await store.journal(run_id))
        _check_agent(agent, run_id, replayed, await agent._known_tools(None))
    except BaseException:
        await asyncio.shield(_let_go(journal))
        raise
    run = Run(agent, replayed.messages, replayed.messages, replayed.state, output_type)
    run.id, run.steps, run.usage, run.journal = run_id, replayed.steps, replayed.usage, journal
    run.session = replayed.session
    journal.mark(run.messages)
    journal.recovered = replayed if replayed.unanswered or replayed.completed else None
    chains = agent._compiled()
    if replayed.session is None:
        return await run_journaled(agent, chains, run, store, None)
    session = store.session(replayed.session)
    return await on_session_journaled(agent, chains, run, store, session, replayed.session_from)


def _check_agent(agent: Agent[Any], run_id: str, replayed: Replay, tools: dict[str, Tool]) -> None:
    missing = sorted({c.name for c in replayed.unanswered} - tools.keys())
    if missing:
        raise OnionError(
            f"run {run_id!r} has calls to tools {missing} that agent {agent.name!r} does not have; "
            "resume it with an agent that has them"
        )


async def finish_recovered_batch(agent: Agent[Any], run: Run, chains: _Chains) -> bool:
    """Answer the batch a dead worker left: recorded results as they were, calls in doubt as interrupted
    (idempotent tools run again), calls that never started run now through the tools chain.

    Returns True when a layer paused one of those calls (the run then pauses, as `_tool_step` says).
    """
    journal = run.journal
    assert journal is not None and journal.recovered is not None
    recovered, journal.recovered = journal.recovered, None
    settled: dict[str | None, Message] = {
        call_id: Message.tool(call_id, result.content, result.is_error) for call_id, result in recovered.results.items()
    }
    requests = []
    tools = await agent._known_tools(run)
    for request in recovered.unanswered:
        if request.id in settled:
            continue
        tool = tools.get(request.name)
        if request.id in recovered.started and not (tool is not None and tool.idempotent):
            interrupted = ToolResult(INTERRUPTED.format(name=request.name), is_error=True, call_id=request.id)
            journal.hold_result(request.id, interrupted)
            settled[request.id] = Message.tool(request.id, interrupted.content, True)
        else:
            requests.append(request)
    calls = [ToolCall(run, request, tools.get(request.name)) for request in requests]
    return await agent._tool_step(run, ModelResponse(run.messages[-1]), chains, calls, requests, settled)
