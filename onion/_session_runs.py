"""Runs on a session: started from its messages, their own appended when they complete."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ._calls import Run, RunResult
from ._durable import OnSession
from ._messages import Message
from .stores._refusals import session_lost

if TYPE_CHECKING:
    from ._agent import Agent, _Chains
    from .stores import Session


def session_of(agent: Agent[Any], session: str | Session) -> Session:
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
    return agent.store.session(session)


async def run_in_session(
    agent: Agent[Any],
    chains: _Chains,
    input: str | Message | Sequence[Message],
    state: dict[str, Any] | None,
    output_type: Any,
    conversation: Session,
    emit: Callable[[Any], None] | None,
) -> RunResult[Any]:
    """A run that starts from `conversation`'s messages and appends its own once it completes.

    Journaled (the agent has a store), the append is part of the write that
    completes the run. Either way it is fenced by the session's lock:
    `LeaseLost` naming the session, and nothing appended, when the lock
    lapsed and another run took it.
    """
    async with conversation.lock() as lock:
        history = await conversation.messages()
        first = agent._first_messages(input)
        start = 1 if first and first[0].role == "system" else 0
        run = Run(agent, input, [*first[:start], *history, *first[start:]], state, output_type)
        run.emit = emit
        run.session = conversation.session_id
        start += len(history)
        result = await agent._run(chains, run, OnSession(conversation, start, lock))
        appended = agent.store is not None or result.paused  # journaled: with the run's completion
        if not appended and not await conversation.append(result.messages[start:], lock=lock):
            raise session_lost(run.id, conversation.session_id)
        return result
