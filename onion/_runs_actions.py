"""What `python -m onion runs` changes in a store: decisions on a paused run, recovery of a failed one, deletion.

Deciding goes the way `POST /runs/{run_id}/decisions` goes (`store.load`,
the decisions, `agent.resume(state)`): the resume claims the run in the
store, so of two operators (or an operator and a browser tab) deciding one
batch, one runs it and the other is told nothing ran.
"""

from __future__ import annotations

import getpass
import time
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

from ._durable.decisions import Decisions
from ._principal import Principal
from ._runs_cli import Refused, age, label, printable, scrubbed
from .errors import DecisionRefused, ForeignRun, RunBusy, RunNotFound, RunStateError
from .stores import RunRecord, Store

if TYPE_CHECKING:
    from ._agent import Agent
    from ._run import RunResult


async def decide(agent: Agent[Any], run_id: str, decisions: Decisions, *, by: str | None = None) -> str:
    """Decide the paused run's calls and resume it, as `POST /runs/{run_id}/decisions` does (`agent.decide`, then
    `agent.resume(state)`, which claims the run: of two deciders, one runs it, the other gets an error).

    The decisions are on record as `by`'s (the operator's login name by default), acting within the run's own
    tenant: whoever holds the store is not kept out of a tenant's runs by onion.
    """
    store = agent_store(agent)
    try:
        state = await agent.decide(run_id, decisions)
    except RunNotFound:
        raise Refused(f"no run {run_id!r} in {label(store)}: `python -m onion runs` lists them") from None
    except ForeignRun as error:
        raise Refused(f"{error}: pass its --agent") from None
    except DecisionRefused as error:
        raise Refused(f"{error}{HINTS.get(error.why, '')}") from None
    owner = state.principal
    principal = Principal(by or operator(), tenant=None if owner is None else owner.tenant)
    return await resumed(agent, run_id, agent.resume(state, principal=principal))


HINTS = {
    "not_paused": " (someone resumed it, or its worker holds it; a failed run: runs resume RUN)",
    "undecided": " (name them too, or add --approve-rest)",
}
"""What the operator can do about a refusal (`DecisionRefused.why`), after the core's own words."""


def operator() -> str:
    """The operator's login name: who a decision from the command line is on record as, unless `--as NAME`."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no login name (a container's uid without a passwd entry)
        return "operator"


async def recover(agent: Agent[Any], run_id: str) -> str:
    """Go on with a run that failed or whose worker died (`agent.resume(run_id)`); a paused run is decided first."""
    store = agent_store(agent)
    record = await store.run_record(run_id)
    if record is None:
        raise Refused(f"no run {run_id!r} in {label(store)}: `python -m onion runs` lists them")
    if record.status == "paused":
        raise Refused(
            f"run {run_id} is paused: decide its pending calls first (runs approve, reject, edit or resolve "
            f"{run_id} ...; runs show {run_id} lists them)"
        )
    if record.status == "completed":
        raise Refused(f"run {run_id} has completed: there is nothing to resume")
    check_agent(agent, record)
    return await resumed(agent, run_id, agent.resume(run_id))


async def resumed(agent: Agent[Any], run_id: str, resume: Awaitable[RunResult[Any]]) -> str:
    """What the resumed run came to, in one line; `Refused` when another decider won or the run failed."""
    try:
        result = await resume
    except RunBusy as error:  # BatchDecided too: another operator, tab or worker decided it first
        raise Refused(f"{scrubbed(str(error))} (nothing ran here)") from None
    except RunStateError as error:  # the decisions do not fit (an edit's arguments the tool refuses): still paused
        raise Refused(f"{scrubbed(str(error))} (the run still waits)") from None
    except Exception as error:
        raise Refused(
            f"run {run_id} failed: {type(error).__name__}: {scrubbed(str(error))} (runs resume {run_id})"
        ) from None
    if result.paused:
        waiting = ", ".join(f"{call.id} {call.name}" for call in result.pending)
        return printable(f"run {run_id} paused again: {waiting} wait for a decision (runs show {run_id})")
    output = scrubbed(str(result.output))
    return printable(f"run {run_id} completed: {output[:200] + '…' if len(output) > 200 else output}")


async def delete(store: Store, run_id: str) -> str:
    """Forget the run and its journal (a running one is stopped at its next lease renewal)."""
    record = await store.run_record(run_id)
    if record is None:
        raise Refused(f"no run {run_id!r} in {label(store)}: `python -m onion runs` lists them")
    await store.delete_run(run_id)
    return printable(f"deleted run {run_id} ({record.status})")


async def purge(store: Store, older_than: float, *, every_status: bool = False, now: float | None = None) -> str:
    """Delete the runs not updated for `older_than` seconds: completed and failed ones, or all with
    `every_status`. Each is read again just before it goes, so a run resumed meanwhile stays."""
    cutoff = (time.time() if now is None else now) - older_than
    ended = ("completed", "failed")
    gone = 0
    for record in await store.runs(limit=2**31 - 1):
        if record.updated >= cutoff or not (every_status or record.status in ended):
            continue
        again = await store.run_record(record.run_id)
        if again is not None and again.updated == record.updated and again.status == record.status:
            await store.delete_run(record.run_id)
            gone += 1
    which = "runs" if every_status else "completed and failed runs"
    return f"deleted {gone} {which} not updated for {age(older_than)} from {printable(label(store))}"


def agent_store(agent: Agent[Any]) -> Store:
    assert agent.store is not None  # carry_out keeps the agent in the store the command names
    return agent.store


def check_agent(agent: Agent[Any], record: RunRecord) -> None:
    """A run goes on only with the agent that ran it (its tools, its layers)."""
    if record.agent != agent.name:
        raise Refused(f"run {record.run_id} was run by agent {record.agent!r}, not {agent.name!r}: pass its --agent")
