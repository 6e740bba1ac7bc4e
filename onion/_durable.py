"""Runs on an agent with a store: journaled as they go, resumed from the journal without repeating work."""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from typing import TYPE_CHECKING, Any, NamedTuple

from ._calls import ModelResponse, Run, RunResult, ToolCall, ToolResult
from ._journal import INTERRUPTED, Journal, Replay, replay
from ._messages import Message
from .errors import OnionError, RunBusy, RunNotFound, RunStateError, StoreUnavailable

if TYPE_CHECKING:
    from ._agent import Agent, _Chains
    from ._state import RunState
    from ._tools import Tool
    from .stores import Session, Store


class OnSession(NamedTuple):
    """Where a run on a session puts its own messages when it completes: in one write with its completion."""

    session: Session
    start: int
    """`run.messages[start:]` are the run's own (its input onwards)."""
    lock: str | None
    """The token of the session's lock the run holds; None: the lock is taken to complete the run."""


async def run_in_store(
    agent: Agent[Any], chains: _Chains, run: Run, store: Store, on_session: OnSession | None
) -> RunResult[Any]:
    """Run `run` journaled in `store`: a new run under a fresh id, or a paused one going on."""
    if run._resumed is not None:
        return await resume_paused(agent, chains, run, store, run._resumed)
    run.id = f"run-{uuid.uuid4().hex}"
    return await run_journaled(agent, chains, run, store, on_session)


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
            await journal.end("paused", state=result.to_state().to_json(), pending=len(result.pending))
        else:
            await _complete(journal, result.messages, on_session)
    except BaseException:
        await asyncio.shield(_let_go(journal))
        raise
    return result


async def _complete(journal: Journal, messages: list[Message], on_session: OnSession | None) -> None:
    """End the run as completed; a run on a session appends its turn in the same write (under the session's lock)."""
    if on_session is None:
        await journal.end("completed")
        return
    session, start, lock = on_session
    if lock is not None:
        await journal.end("completed", turn=session.turn(messages[start:], lock))
        return
    async with session.lock() as lock:
        await journal.end("completed", turn=session.turn(messages[start:], lock))


async def resume_paused(agent: Agent[Any], chains: _Chains, run: Run, store: Store, state: RunState) -> RunResult[Any]:
    """Go on with a paused run (decided `state`) as the one worker holding it in `store`.

    The run is claimed first: `RunBusy` when another worker resumed it (or
    holds it). A run the store never saw (paused on an agent without this
    store) is journaled from here on. Rejections are journaled with the
    batch, so a crash later never runs a rejected call. A run on a session
    appends its turn when it completes.
    """
    journal = run.journal = Journal(store, run.id, lease=agent.lease)
    on_session = None
    try:
        record = await store.claim_run(run.id, journal.owner, agent.lease, paused_only=True)
    except RunNotFound:
        await journal.begin(run)
        for message in state.answered:
            content = message.text if message.content is None else message.content
            journal.hold_result(message.tool_call_id or "", ToolResult(content, is_error=message.is_error))
    else:
        journal.renew_in_background()
        journal.mark(run.messages)
        run.session = record.session
        if record.session is not None:
            start = json.loads((await store.journal(run.id))[0])
            on_session = OnSession(store.session(record.session), start.get("session_from", 0), None)
    for call in state.pending:
        if call.decision == "rejected":
            journal.hold_result(call.id, ToolResult(rejection_text(call.name, call.rejection), is_error=True))
    return await run_journaled(agent, chains, run, store, on_session)


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
    on_session = None
    if replayed.session is not None:
        on_session = OnSession(store.session(replayed.session), replayed.session_from, None)
    if not replayed.completed:
        journal.recovered = replayed if replayed.unanswered else None
        return await run_journaled(agent, agent._compiled(), run, store, on_session)
    text = run.messages[-1].text
    try:
        output = text if run._output is None else run._output.validate(text)
        await _complete(journal, run.messages, on_session)
    except BaseException:
        await asyncio.shield(_let_go(journal))
        raise
    return RunResult(output, run.messages, run.usage, run.state, run_id)


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
