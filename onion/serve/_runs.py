"""The runs of a served agent: run one (JSON or streamed), list them, show one, decide a paused one.

Decisions go through `agent.resume(state)`, which claims the run in the
store: of two requests deciding one batch, one runs it and the other gets
409, whatever the number of tabs, retries or workers.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

from onion import Agent, Decisions, Event, OnionError, Principal, RunFinished, RunResult, RunState, RunStateError
from onion._durable.entries import failure_of
from onion._principal import by_json
from onion.errors import DecisionRefused, ForeignRun, RunBusy, RunNotFound
from onion.scrub import scrub
from onion.stores import RunRecord, Store

from ._bodies import Problem, RunRequest, event_json, event_name
from ._channel import Channel, Channels, current
from ._filters import Filters
from ._page import PER_PAGE, Card, Inbox


def error_json(error: BaseException) -> dict[str, str]:
    """A failed run as JSON: its error's type and message, secrets scrubbed."""
    return {"error": type(error).__name__, "message": scrub(str(error))}


def start(agent: Agent[Any], channels: Channels, request: RunRequest, principal: Principal | None) -> Channel:
    """Stream the run (for `principal`) in a task of its own, into a new channel (it goes on when the client
    leaves)."""
    channel = Channel()
    stream = agent.stream(request.input, state=request.state, session=request.session, principal=principal)

    async def pump() -> None:
        current.set((channels, channel))
        try:
            async for event in stream:
                if isinstance(event, RunFinished):
                    channels.bind(channel, event.result.run_id)
                channel.put(event_name(event), event_json(event))
        except Exception as error:
            channel.put("run_failed", error_json(error))
        finally:
            channels.ended(channel)

    channel.task = channels.keep_running(asyncio.create_task(pump()))
    return channel


async def follow(channel: Channel, after: int, heartbeat: float, *, cancel_on_leave: bool) -> AsyncIterator[bytes]:
    """The channel's events for one client; `cancel_on_leave`: a client leaving early cancels the run."""
    try:
        async for chunk in channel.follow(after, heartbeat):
            yield chunk
    finally:
        if cancel_on_leave and not channel.ended and channel.task is not None:
            channel.task.cancel()


def store_of(agent: Agent[Any]) -> Store:
    if agent.store is None:
        raise Problem(404, "this agent has no store: runs are kept only with Agent(store=...) (see docs/serve.md)")
    return agent.store


async def listed(
    store: Store, agent: str, status: str | None, limit: int, principal: Principal | None
) -> list[dict[str, Any]]:
    """Agent `agent`'s runs in the store, most recently updated first, with their pending calls: those of
    `principal`'s tenant (a principal without one: runs without one), every tenant's on a server without
    credentials."""
    records = await (store.runs(limit=limit) if principal is None else store.runs(limit=limit, tenant=principal.tenant))
    return [summary(r) for r in records if r.agent == agent and (status is None or r.status == status)]


def summary(record: RunRecord) -> dict[str, Any]:
    pending = []
    if record.status == "paused" and record.state:
        pending = [call.to_dict() for call in RunState.from_json(record.state).pending]
    return {
        "run_id": record.run_id,
        "status": record.status,
        "pending": pending,
        "agent": record.agent,
        "session": record.session,
        "tenant": record.tenant,
        "created": record.created,
        "updated": record.updated,
    }


async def shown(store: Store, agent: str, run_id: str, principal: Principal | None) -> dict[str, Any]:
    """One run of agent `agent`: its status, messages, pending calls, output, usage, principal and decisions on
    record (messages only once paused or ended); 404 for another agent's run or another tenant's, as for one
    the store never saw."""
    record = await store.run_record(run_id)
    if record is None or record.agent != agent or (principal is not None and record.tenant != principal.tenant):
        raise Problem(404, f"no run {run_id!r} in the store: GET /runs lists the runs")
    shown: dict[str, Any] = {"run_id": run_id, "status": record.status, "messages": [], "pending": []}
    shown.update(output=None, usage=None, session=record.session, agent=record.agent, principal=None, decisions=[])
    if record.status in ("paused", "completed"):
        state = await store.load(run_id)
        shown["principal"] = None if state.principal is None else by_json(state.principal)
        shown["decisions"] = [decision.to_dict() for decision in state.decisions]
        shown["messages"] = [m.to_dict() for m in [*state.messages, *state.answered]]
        shown["pending"] = [call.to_dict() for call in state.pending]
        shown["output"] = state.output if record.status == "completed" else None
        shown["usage"] = {
            k: v for k, v in state.usage.to_dict().items() if k in ("input_tokens", "output_tokens", "requests")
        }
    elif record.status == "failed":
        shown["error"] = failure_of(await store.journal(run_id))
    return shown


async def inbox_of(
    agent: Agent[Any],
    store: Store,
    principal: Principal | None,
    number: int,
    decided_run: str | None,
    filters: Filters | None = None,
    *,
    resumed: bool = False,
) -> Inbox:
    """What the page shows `principal`: page `number` of the waiting runs (oldest first, none ever dropped),
    the most recent runs, those that pass `filters` only, and, after a decision on `decided_run`, what came of
    it (`resumed`: it was resumed from the page, not decided)."""
    filters = filters or Filters()
    every = await (
        store.runs(limit=2**31 - 1) if principal is None else store.runs(limit=2**31 - 1, tenant=principal.tenant)
    )
    records = [r for r in every if r.agent == agent.name]
    now = time.time()
    rows = []
    for record in records:
        row = summary(record)
        if record.status == "running" and record.lease_expires is not None and record.lease_expires < now:
            row["shown_status"] = "resumable (its worker stopped)"
        rows.append((record, row))
    if filters:
        rows = [(r, row) for r, row in rows if filters.keeps(row, principal_id(r) if filters.principal else None)]
    waiting = sorted((r for r, _ in rows if r.status == "paused" and r.state), key=lambda r: r.created)
    pages = max(1, -(-len(waiting) // PER_PAGE))
    number = min(number, pages)
    tools = {tool.name: tool.description for tool in agent.tools}
    cards = [
        Card(summary(r), RunState.from_json(r.state or ""), tools)
        for r in waiting[(number - 1) * PER_PAGE : number * PER_PAGE]
    ]
    for record, row in rows[:100]:
        if record.status == "failed":
            row["error"] = failure_of(await store.journal(record.run_id))
    inbox = Inbox(agent.name, cards, [row for _, row in rows[:100]], len(waiting), number, pages)
    inbox.filters, inbox.agents = filters, [agent.name]
    inbox.every_waiting = sum(1 for r in records if r.status == "paused" and r.state)
    if decided_run is not None:
        did = "Resumed" if resumed else "Decided"
        inbox.notice, inbox.running = await decided_notice(store, agent.name, decided_run, principal, did)
    return inbox


def principal_id(record: RunRecord) -> str | None:
    """The id of the principal a run is for, from its saved state (None: none, or no state saved yet)."""
    if not record.state:
        return None
    state = RunState.from_json(record.state)
    return None if state.principal is None else state.principal.id


async def decided_notice(
    store: Store, agent: str, run_id: str, principal: Principal | None, did: str = "Decided"
) -> tuple[str, bool]:
    """What came of a decision on `run_id` (`did`: "Resumed" for the Resume button), for the page: still running
    (the page refreshes), what the decided calls returned and the run's answer, or that it waits again."""
    try:
        run = await shown(store, agent, run_id, principal)
    except Problem:
        return f"Run {run_id} is not here any more.", False
    if run["status"] == "running":
        return f"{did} run {run_id}: it is running now (this page refreshes until it ends).", True
    decided = {d["call_id"]: d for d in run["decisions"]}
    ran = [
        f"{m['tool_call_id']} returned {str(m.get('text', ''))[:200]!r}"
        for m in run["messages"]
        if m.get("role") == "tool"
        and m.get("tool_call_id") in decided
        and decided[m["tool_call_id"]]["decision"] != "rejected"
    ]
    what = ("; ".join(ran) + ". ") if ran else ""
    if run["status"] == "completed":
        return f"{did} run {run_id}. {what}It completed: {scrub(str(run['output']))[:500]}", False
    if run["status"] == "paused":
        return f"{did} run {run_id}. {what}It waits for another decision (below).", False
    return f"{did} run {run_id}. {what}It failed: the Resume button below goes on with it.", False


async def already_decided(store: Store, agent: str, run_id: str) -> str:
    """Who decided `run_id`'s batch already, and when, for a second submit of the same form."""
    try:
        run = await shown(store, agent, run_id, None)
    except Problem:
        return f"Run {run_id} was decided already; nothing ran twice."
    last = run["decisions"][-1] if run["decisions"] else None
    if last is None:
        return f"Run {run_id} was decided already (it is {run['status']} now); nothing ran twice."
    who = "someone" if last["by"] is None else last["by"]["id"]
    return f"Run {run_id} was already decided by {who} at {last['at']}; nothing ran twice (it is {run['status']} now)."


REFUSED = {
    "not_paused": 409,
    "not_pending": 409,
    "not_editable": 409,
    "not_resolvable": 409,
    "undecided": 422,
    "conflict": 422,
}
"""The status of each `DecisionRefused.why`: 409 when the run is not (or no longer) waiting for that, else 422."""


def problem_of(error: OnionError) -> Problem | None:
    """The answer to an onion error of the decide path (`agent.decide`, `agent.resume`), else None: the table
    from the core's refusals to HTTP statuses."""
    if isinstance(error, RunNotFound | ForeignRun):
        return Problem(404, f"{error}: GET /runs lists the runs" if isinstance(error, RunNotFound) else str(error))
    if isinstance(error, DecisionRefused):
        hint = f" (a failed run: POST /runs/{error.run_id}/resume)" if error.why == "not_paused" else ""
        return Problem(REFUSED.get(error.why, 422), f"{error}{hint}")
    if isinstance(error, RunBusy):  # BatchDecided too: another request decided this batch first
        return Problem(409, str(error))
    if isinstance(error, RunStateError):
        return Problem(422, str(error))
    return None


async def decided(agent: Agent[Any], run_id: str, decisions: Decisions, principal: Principal | None) -> RunState:
    """The paused run's state with `principal`'s `decisions` applied (`agent.decide`), its refusals as
    `Problem`s."""
    store_of(agent)
    try:
        return await agent.decide(run_id, decisions, principal=principal)
    except OnionError as error:
        answer = problem_of(error)
        if answer is None:
            raise
        raise answer from None


async def decide(agent: Agent[Any], run_id: str, decisions: Decisions, principal: Principal | None) -> RunResult[Any]:
    """Apply `decisions` to the paused run and resume it, on record as `principal`'s (`decided`'s errors; 409 when
    another request won)."""
    state = await decided(agent, run_id, decisions, principal)
    try:
        return await agent.resume(state, principal=principal)
    except (RunBusy, RunStateError) as error:
        raise problem_of(error) or error from None


async def resumed(agent: Agent[Any], state: RunState, principal: Principal | None) -> AsyncIterator[Event]:
    """`agent.resume_stream(state)`'s events; a claim refused before the first event is a `Problem` (409:
    another request decided this batch or resumes the run; or as `decide` answers it)."""
    first = True
    try:
        async for event in agent.resume_stream(state, principal=principal):
            first = False
            yield event
    except (RunBusy, RunStateError) as error:
        if first:
            raise problem_of(error) or error from None
        raise


async def resume_streamed(
    agent: Agent[Any], channels: Channels, state: RunState, principal: Principal | None
) -> Channel:
    """Stream the decided run's resume in a task of its own, into a new channel bound to the run id (it goes on
    when the client leaves). Answers once the resume has claimed the run (and its first event is in the store,
    when it keeps events): a claim refused raises `Problem` before anything is sent."""
    channel = Channel()
    await channels.continue_from_store(channel, state.run_id)
    claimed: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def begin() -> None:
        if not claimed.done():
            channels.bind(channel, state.run_id)
            claimed.set_result(None)

    async def pump() -> None:
        try:
            async for event in resumed(agent, state, principal):
                begin()
                channel.put(event_name(event), event_json(event))
        except Problem as problem:
            if not claimed.done():
                claimed.set_exception(problem)
            else:
                channel.put("run_failed", {"error": "Problem", "message": problem.message})
        except Exception as error:
            begin()
            channel.put("run_failed", error_json(error))
        finally:
            if not claimed.done():  # cancelled before its first event
                claimed.cancel()
            channels.ended(channel)

    channel.task = channels.keep_running(asyncio.create_task(pump()))
    await claimed
    await channel.in_store(channel.first + 1)  # a client that got the resume's first event may follow it anywhere
    return channel
