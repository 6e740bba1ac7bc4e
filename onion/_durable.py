"""Runs on an agent with a store: journaled as they go, resumed from the journal without repeating work."""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

from ._calls import ModelResponse, Run, RunResult, ToolBatch, ToolCall, ToolResult
from ._journal import INTERRUPTED, Journal, Replay, replay
from ._messages import Message
from ._stack import bad_result
from .errors import OnionError, RunBusy, RunNotFound

if TYPE_CHECKING:
    from ._agent import Agent, _Chains
    from .stores import Session, Store


async def run_journaled(
    agent: Agent, chains: _Chains, run: Run, store: Store, session: Session | None, session_from: int
) -> RunResult:
    """Run `run` with a journal in `store`: created now, ended as completed or failed."""
    journal = run.journal
    if journal is None:
        journal = run.journal = Journal(store, run.id, lease=agent.lease, owner=run.id)
        await journal.begin(run, session=None if session is None else session.session_id, session_from=session_from)
    try:
        result = await agent._run_chain(chains, run)
    except BaseException:
        await asyncio.shield(_let_go(journal))
        raise
    await journal.end("completed")
    return result


async def _let_go(journal: Journal) -> None:
    """Mark the run failed (resumable); a worker that lost the run leaves it to the new holder."""
    with contextlib.suppress(RunBusy, RunNotFound):
        await journal.end("failed")


async def resume_from_store(agent: Agent, store: Store, run_id: str) -> RunResult:
    """Claim `run_id`, rebuild it from its journal, finish it.

    Raises `RunBusy` when another worker holds it (or it has ended),
    `RunNotFound` when the store never saw it.
    """
    journal = Journal(store, run_id, lease=agent.lease)
    await store.claim_run(run_id, journal.owner, agent.lease)
    journal.renew_in_background()
    try:
        replayed = replay(run_id, await store.journal(run_id))
        _check_agent(agent, run_id, replayed)
    except BaseException:
        await asyncio.shield(_let_go(journal))
        raise
    run = Run(agent, replayed.messages, replayed.messages, replayed.state)
    run.id, run.steps, run.usage, run.journal = run_id, replayed.steps, replayed.usage, journal
    journal.mark(run.messages)
    if replayed.completed:
        await journal.end("completed")
        last = run.messages[-1]
        result = RunResult(last.text, run.messages, run.usage, run.state, run_id)
    else:
        journal.recovered = replayed if replayed.unanswered else None
        result = await run_journaled(agent, agent._compiled(), run, store, None, 0)
    if replayed.session is not None:
        conversation = store.session(replayed.session)
        async with conversation.lock():
            await conversation.append(result.messages[replayed.session_from :])
    return result


def _check_agent(agent: Agent, run_id: str, replayed: Replay) -> None:
    missing = sorted({c.name for c in replayed.unanswered} - {t.name for t in agent.tools})
    if missing:
        raise OnionError(
            f"run {run_id!r} has calls to tools {missing} that agent {agent.name!r} does not have; "
            "resume it with an agent that has them"
        )


async def finish_recovered_batch(agent: Agent, run: Run, chains: _Chains) -> None:
    """Answer the batch a dead worker left: recorded results as they were, calls in doubt as interrupted
    (idempotent tools run again), calls that never started run now through the tools chain."""
    journal = run.journal
    assert journal is not None and journal.recovered is not None
    recovered, journal.recovered = journal.recovered, None
    results = dict(recovered.results)
    calls = []
    for request in recovered.unanswered:
        if request.id in results:
            continue
        tool = agent._tools_by_name.get(request.name)
        if request.id in recovered.started and not (tool is not None and tool.idempotent):
            result = results[request.id] = ToolResult(
                INTERRUPTED.format(name=request.name), is_error=True, call_id=request.id
            )
            journal.hold_result(request.id, result)
        else:
            calls.append(ToolCall(run, request, tool))
    try:
        if calls:
            produced = await chains.tools(ToolBatch(run, calls, ModelResponse(run.messages[-1])))
            if not isinstance(produced, list) or len(produced) != len(calls):
                raise bad_result(chains.stack, "tools", produced, expected_count=len(calls))
            for call, result in zip(calls, produced, strict=True):
                if not isinstance(result, ToolResult):
                    raise bad_result(chains.stack, "tools", produced, expected_count=len(calls))
                results[call.id] = result
    except BaseException as error:
        stopped = ToolResult(f"No result: the batch stopped ({type(error).__name__}).", is_error=True)
        for call in calls:
            results[call.id] = stopped
        raise
    finally:
        for request in recovered.unanswered:
            result = results[request.id]
            run.messages.append(Message.tool(request.id, result.content, result.is_error))
