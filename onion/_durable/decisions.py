"""The one way a paused run's calls are decided: `Decisions`, checked and applied by `apply` and `decide`.

`agent.resume`, `POST /runs/{run_id}/decisions`, `python -m onion runs approve`
and `onion.temporal.decide` all go through here and refuse the same bad
decisions with the same `DecisionRefused` (its `why`); each front end keeps
only a table from that error to an HTTP status, a CLI line or an update failure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import DecisionRefused, ForeignRun, RunNotFound, RunStateError, ToolArgumentsError
from .state import RunState, not_editable

if TYPE_CHECKING:
    from .._loop import Loop
    from .._principal import Principal
    from .._tools import Tool


@dataclass(frozen=True, slots=True)
class Decisions:
    """Decisions on a paused run's pending calls: approve these, reject those (with a reason), edit others,
    resolve calls that may have run (with the result a person checked).

    `approve_rest`: approve every pending call not named. A call is named once: approving, rejecting, editing
    or resolving one call twice is refused (`DecisionRefused`, why `"conflict"`).
    """

    approve: Sequence[str] = ()
    reject: Mapping[str, str] = field(default_factory=dict)
    edit: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    approve_rest: bool = False
    resolve: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_json(cls, data: Any, run_id: str = "") -> Decisions:
        """Decisions from JSON data `{"approve": [ids], "reject": {id: reason}, "edit": {id: args}, "resolve":
        {id: result}}`; `DecisionRefused` (why `"malformed"`) naming the field that does not fit."""

        def refused(message: str) -> DecisionRefused:
            return DecisionRefused(message, run_id=run_id, why="malformed")

        if not isinstance(data, dict):
            raise refused(f"decisions are a JSON object, not {type(data).__name__}")
        unknown = sorted(set(data) - {"approve", "reject", "edit", "approve_rest", "resolve"})
        if unknown:
            raise refused(f"unknown field {unknown[0]!r}: decisions take 'approve', 'reject', 'edit' and 'resolve'")
        approve = data.get("approve", [])
        if not isinstance(approve, list) or not all(isinstance(i, str) for i in approve):
            raise refused("field 'approve' must be a list of call ids")
        reject = data.get("reject", {})
        if not isinstance(reject, dict) or not all(isinstance(r, str) for r in reject.values()):
            raise refused("field 'reject' must be an object of call id to reason (a string)")
        edit = data.get("edit", {})
        if not isinstance(edit, dict) or not all(isinstance(a, dict) for a in edit.values()):
            raise refused("field 'edit' must be an object of call id to arguments (an object)")
        rest = data.get("approve_rest", False)
        if not isinstance(rest, bool):
            raise refused("field 'approve_rest' must be true or false")
        resolve = data.get("resolve", {})
        if not isinstance(resolve, dict) or not all(isinstance(r, str) for r in resolve.values()):
            raise refused("field 'resolve' must be an object of call id to result (a string)")
        if not (approve or reject or edit or rest or resolve):
            raise refused(
                "a set of decisions that decides nothing: give 'approve', 'reject', 'edit' or 'resolve' for the "
                "pending calls"
            )
        return cls(tuple(approve), dict(reject), {k: dict(v) for k, v in edit.items()}, rest, dict(resolve))

    def to_json(self) -> dict[str, Any]:
        """The decisions as JSON data (`from_json` reads it back)."""
        data: dict[str, Any] = {"approve": list(self.approve), "reject": dict(self.reject)}
        data["edit"] = {call_id: dict(args) for call_id, args in self.edit.items()}
        if self.approve_rest:
            data["approve_rest"] = True
        if self.resolve:
            data["resolve"] = dict(self.resolve)
        return data

    def ids(self) -> list[str]:
        """Every call id named, in order, repeats included."""
        return [*self.approve, *self.reject, *self.edit, *self.resolve]


def check(
    state: RunState, decisions: Decisions, *, tools: Mapping[str, Tool] | None = None, partial: bool = False
) -> list[str]:
    """Raise `DecisionRefused` unless `decisions` fit `state`'s paused batch; the calls `approve_rest` approves.

    Checks, each a `DecisionRefused` naming the call: the run is paused; every call named is pending and not
    decided already; no call is named twice; only a tool call is edited, with arguments its tool accepts
    (when `tools` are given); only an in-doubt call is resolved; and, unless `partial` (decisions that arrive
    one update at a time), every pending call is decided. Changes nothing.
    """
    run_id = state.run_id
    if not state.paused:
        raise DecisionRefused(
            f"run {run_id} is {state.status}: nothing waits for a decision", run_id=run_id, why="not_paused"
        )
    named = decisions.ids()
    twice = sorted({call_id for call_id in named if named.count(call_id) > 1})
    if twice:
        raise DecisionRefused(
            f"run {run_id}: call {twice[0]} is decided more than once (approve, reject or edit each call once)",
            run_id=run_id,
            why="conflict",
        )
    pending = {call.id: call for call in state.pending}
    for call_id in named:
        call = pending.get(call_id)
        if call is None or call.decision is not None:
            waiting = ", ".join(f"{c.id} ({c.name})" for c in state.pending if c.decision is None) or "none"
            what = (
                f": call {call_id!r} was decided already" if call is not None else f" has no pending call {call_id!r}"
            )
            raise DecisionRefused(
                f"run {run_id}{what}; the calls waiting for a decision: {waiting}",
                run_id=run_id,
                why="not_pending",
            )
    for call_id, args in decisions.edit.items():
        _check_edit(state, pending[call_id].kind, pending[call_id].name, call_id, args, tools)
    for call_id in decisions.resolve:
        if pending[call_id].kind != "in_doubt":
            raise DecisionRefused(
                f"run {run_id}: {call_id} is a paused {pending[call_id].kind}, not a call that may have run: only an "
                "in-doubt call is resolved with its result; approve or reject it",
                run_id=run_id,
                why="not_resolvable",
            )
    rest = [c.id for c in state.pending if c.decision is None and c.id not in named] if decisions.approve_rest else []
    if not partial:
        undecided = [c.id for c in state.pending if c.decision is None and c.id not in named and c.id not in rest]
        if undecided:
            raise DecisionRefused(
                f"run {run_id}: calls {', '.join(undecided)} have no decision: approve, reject or edit every "
                "pending call (a batch resumes once, with every call decided)",
                run_id=run_id,
                why="undecided",
            )
    return rest


def apply(
    state: RunState, decisions: Decisions, *, tools: Mapping[str, Tool] | None = None, partial: bool = False
) -> RunState:
    """Decide `state`'s pending calls as `decisions` says (in place; returns `state`), once `check` passed."""
    rest = check(state, decisions, tools=tools, partial=partial)
    for call_id in [*decisions.approve, *rest]:
        state.approve(call_id)
    for call_id, reason in decisions.reject.items():
        state.reject(call_id, reason)
    for call_id, args in decisions.edit.items():
        state.edit(call_id, dict(args))
    for call_id, result in decisions.resolve.items():
        state.resolve(call_id, result)
    return state


def _check_edit(
    state: RunState, kind: str, name: str, call_id: str, args: Any, tools: Mapping[str, Tool] | None
) -> None:
    run_id = state.run_id
    if kind != "tool":
        raise DecisionRefused(f"run {run_id}: {call_id} {not_editable(kind)}", run_id=run_id, why="not_editable")
    if not isinstance(args, Mapping):
        raise DecisionRefused(
            f"run {run_id}: the edit of call {call_id} must be an object of arguments, not {type(args).__name__}",
            run_id=run_id,
            why="malformed",
        )
    tool = None if tools is None else tools.get(name)
    if tool is None:
        return
    try:
        tool.validate(dict(args))
    except ToolArgumentsError as error:
        raise DecisionRefused(
            f"run {run_id}: the edited arguments of call {call_id} ({name}) do not fit: {error}",
            run_id=run_id,
            why="invalid_edit",
        ) from None


async def decide(loop: Loop, run_id: str, decisions: Decisions, *, principal: Principal | None = None) -> RunState:
    """The paused run `run_id` of the loop's agent's store, decided as `decisions` says: `agent.resume(state)`
    goes on with it.

    Raises `RunNotFound` (no such run), `ForeignRun` (the run is another agent's, or another tenant's than
    `principal`'s), and `apply`'s `DecisionRefused`.
    """
    agent = loop.agent
    store = agent.store
    if store is None:
        raise RunStateError(f"{agent.name}: deciding run {run_id!r} needs the store it is kept in: Agent(store=...)")
    try:
        state = await store.load(run_id)
    except RunNotFound:
        raise
    except RunStateError:  # running or failed
        raise DecisionRefused(
            f"run {run_id} is not paused: it runs or has failed, nothing waits for a decision",
            run_id=run_id,
            why="not_paused",
        ) from None
    check_owner(state, agent.name, principal)
    tools = await loop.known_tools(None)
    return apply(state, decisions, tools=tools)


def check_owner(state: RunState, agent: str, principal: Principal | None) -> None:
    """`ForeignRun` unless `state`'s run is agent `agent`'s and, when `principal` is given, of its tenant."""
    if state.agent != agent:
        raise ForeignRun(
            f"run {state.run_id} belongs to agent {state.agent!r}, not {agent!r}: a run is resumed, decided and "
            "recovered only by the agent that started it",
            run_id=state.run_id,
        )
    check_tenant(state.run_id, state.principal, principal)


def check_tenant(run_id: str, owner: Principal | None, principal: Principal | None) -> None:
    """`ForeignRun` when `principal` (given) is of another tenant than the run's `owner`; it names nothing of it."""
    if principal is None:
        return
    tenant = None if owner is None else owner.tenant
    if principal.tenant != tenant:
        raise ForeignRun(f"no run {run_id!r} for principal {principal.id!r}", run_id=run_id)
