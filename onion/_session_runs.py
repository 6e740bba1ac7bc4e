"""Runs on a session: started from its messages, their own appended when they complete."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ._calls import Run, RunResult
from ._messages import Message

if TYPE_CHECKING:
    from ._agent import Agent, _Chains
    from .stores import Session


def session_of(agent: Agent[Any], session: str | Session) -> Session:
    """The `Session` a run's `session=` names: a session id in `agent.store`, or a `Session` itself."""
    if not isinstance(session, str):
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
    """A run that starts from `conversation`'s messages and appends its own once it completes."""
    async with conversation.lock():
        history = await conversation.messages()
        first = agent._first_messages(input)
        start = 1 if first and first[0].role == "system" else 0
        run = Run(agent, input, [*first[:start], *history, *first[start:]], state, output_type)
        run.emit = emit
        run.session = conversation.session_id
        start += len(history)
        result = await agent._run(chains, run, conversation, start)
        if not result.paused:
            await conversation.append(result.messages[start:])
        return result
