"""What resuming a `RunState` checks and goes on with: its signature, its fit with the agent, its batch."""

from __future__ import annotations

import datetime
import hashlib
import heapq
import hmac
import json
import math
import os
import time
from typing import TYPE_CHECKING, Any

from .. import clock
from .._messages import Message, ToolRequest
from .._principal import DecisionRecord, Principal, now_utc
from ..errors import BatchDecided, RunStateError, ToolArgumentsError
from .state import LONE_KINDS, Pending, RunState

if TYPE_CHECKING:
    from collections.abc import Mapping

    from .._tools import Tool
    from ..types import StateKey

KEY_VARIABLE = "ONION_STATE_KEY"
"""The environment variable that gives the key of agents without a `state_key`."""

SHORTEST_KEY = 16
"""The fewest bytes a key that signs may have: a shorter one is guessable, and an empty one a variable left unset."""


def signing_keys(given: StateKey) -> tuple[bytes, ...]:
    """The keys of an agent's `state_key` (`given`), else of `ONION_STATE_KEY`: the first signs, each is believed
    when checking; `()` when there is neither.

    Raises `ValueError` naming the key (`state_key`, `state_key[1]`, the variable) that is under 16 bytes, empty
    included, or an empty list of keys; `TypeError` for a key that is not str or bytes.
    """
    if given is None:
        value = os.environ.get(KEY_VARIABLE)
        return () if value is None else (_key(value, f"the environment variable {KEY_VARIABLE}"),)
    if isinstance(given, str | bytes):
        return (_key(given, "state_key"),)
    keys = tuple(_key(key, f"state_key[{index}]") for index, key in enumerate(given))
    if not keys:
        raise ValueError(
            "state_key is an empty list: give the key that signs first, then the older keys still believed"
        )
    return keys


def _key(key: object, where: str) -> bytes:
    if isinstance(key, str):
        key = key.encode()
    if not isinstance(key, bytes):
        raise TypeError(f"{where} must be str or bytes, not {type(key).__name__}")
    if len(key) < SHORTEST_KEY:
        unset = f" (unset {KEY_VARIABLE} to sign nothing)" if where.endswith(KEY_VARIABLE) else ""
        raise ValueError(
            f"{where} is {len(key)} bytes, too short to sign paused runs: give at least {SHORTEST_KEY} "
            f"(32 random ones: python -c 'import secrets; print(secrets.token_urlsafe(32))'){unset}; an empty key "
            "is usually a variable left unset"
        )
    return key


def sign(state: RunState, keys: tuple[bytes, ...]) -> None:
    """Sign `state` with the first of `keys`: the time now (`signed_at`) and everything but its decisions."""
    state.signed_at = _time_text(clock.time())
    state.signature = signature(state, keys[0])


def signature(state: RunState, key: bytes) -> str:
    """HMAC-SHA256 of everything in `state` but its decisions (and the signature itself), as hex."""
    return hmac.new(key, _signed_text(state), hashlib.sha256).hexdigest()


def _signed_text(state: RunState) -> bytes:
    data = state.to_dict()
    del data["signature"]
    for added in ("principal", "decisions", "signed_at", "stored"):  # as states signed before these were
        if not data[added]:
            del data[added]
    for call in data["pending"]:
        del call["decision"], call["edited_args"], call["rejection"], call["result"]
        if call["kind"] == "tool":  # as states signed before paused model calls and runs were
            del call["kind"]
    return json.dumps(data, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode()


def check_trusted(state: RunState, keys: tuple[bytes, ...], agent: str, ttl: float | None) -> None:
    """Raise `RunStateError` unless `state`, come from outside with no store to hold it against, can be believed
    by agent `agent`.

    A state paused in a store is never believed from outside it. With `keys`, its signature must be one of them,
    intact, name that agent, and be at most `ttl` seconds old (None: any age). Without, what can be checked is:
    its pending calls are the calls the model asked for (names and arguments), steps and usage are not negative.
    """
    if state.stored:
        raise paused_in_a_store(state)
    if keys:
        if state.signature is None:
            raise RunStateError(
                f"run {state.run_id}: this agent signs paused runs (state_key) and the state is not signed; "
                "resume only states that agent.run(...).to_state() of an agent with the same key gave"
            )
        text = _signed_text(state)
        signed = state.signature
        if not any(hmac.compare_digest(signed, hmac.new(key, text, hashlib.sha256).hexdigest()) for key in keys):
            raise RunStateError(
                f"run {state.run_id}: the state's signature does not match: it was altered after it was saved "
                "(only decisions may change), or signed with another state_key (to roll a key, give "
                "state_key=[new, old] until the states signed with the old one are resumed or expired)"
            )
        if state.agent != agent:
            raise RunStateError(
                f"run {state.run_id} was paused by agent {state.agent!r}, not {agent!r}: a signed state resumes on "
                "the agent that paused it (give agents that share a key their own names)"
            )
        _check_fresh(state, ttl)
    if any(call.kind in LONE_KINDS for call in state.pending):
        check_lone_pause(state)
    asked = {r.id: r for r in _last_calls(state)}
    for call in state.pending:
        if call.kind in LONE_KINDS:
            continue
        request = asked.get(call.id)
        if request is None or request.name != call.name or request.args != call.args:
            raise RunStateError(
                f"run {state.run_id}: pending call {call.id} ({call.name}) and the state's history do not fit together "
                "(it is not the call the model asked for): the state was changed; "
                "change a call's arguments with state.edit(id, args)"
            )
    if state.steps < 0 or state.session_from < 0 or any(v < 0 for v in state.usage.to_dict().values()):
        raise RunStateError(f"run {state.run_id}: the state's steps, usage or session_from are negative (damaged)")
    if any(m.role != "tool" for m in state.answered):
        raise RunStateError(f"run {state.run_id}: the state's answered results are not all tool results (damaged)")


def take_decisions(saved: RunState, given: RunState) -> None:
    """Decide `saved`'s pending calls as `given` decided them, by call id; `RunStateError` if `given` is not
    the pause `saved` is in (its batch was decided already)."""
    if given.run_id != saved.run_id or given.batch != saved.batch:
        raise already_decided(saved.run_id, "paused")
    decided = {call.id: call for call in given.pending}
    unknown = sorted(decided.keys() - {call.id for call in saved.pending})
    if unknown:
        raise RunStateError(f"run {saved.run_id} has no pending calls {', '.join(unknown)}: the state was changed")
    for call in saved.pending:
        decision = decided.get(call.id)
        if decision is not None:
            call.decision, call.edited_args, call.rejection, call.result = (
                decision.decision,
                decision.edited_args,
                decision.rejection,
                decision.result,
            )


def pending_batch(state: RunState) -> Pending:
    """The batch `state` (decided: `check_resumable`) goes on with: answers so far and rejections settled, the
    approved and edited calls (with their arguments) to run; for a paused model call or run, its decision."""
    first = state.pending[0] if state.pending else None
    if first is not None and first.kind in LONE_KINDS:
        rejection = (first.rejection or "not approved") if first.decision == "rejected" else None
        return Pending({}, [], approved=True, kind=first.kind, rejection=rejection)
    settled = {message.tool_call_id: message for message in state.answered}
    requests = []
    for call in state.pending:
        if call.decision == "rejected":
            settled[call.id] = Message.tool(call.id, rejection_text(call.name, call.rejection), True)
        elif call.decision == "resolved":
            settled[call.id] = Message.tool(call.id, call.result or "")
        else:
            args = call.edited_args if call.decision == "edited" else call.args
            requests.append(ToolRequest(call.id, call.name, dict(args or {})))
    return Pending(settled, requests, approved=True)


def recorded(state: RunState, by: Principal | None) -> list[DecisionRecord]:
    """The decisions of `state`'s pending calls not on record yet, on record as `by`'s, now."""
    known = {record.call_id for record in state.decisions}
    if all(call.decision is None or call.id in known for call in state.pending):
        return []  # on record already (Temporal records each update's own decider)
    at = now_utc()
    return [
        DecisionRecord(
            call.id,
            call.decision,
            by,
            at,
            args=call.edited_args if call.decision == "edited" else None,
            reason=call.rejection if call.decision == "rejected" else None,
            result=call.result if call.decision == "resolved" else None,
            asked=call.reason,
        )
        for call in state.pending
        if call.decision is not None and call.id not in known
    ]


def check_lone_pause(state: RunState) -> None:
    """Raise `RunStateError` unless `state`'s paused model call or run is all it waits for, where it can be:
    its one pending call, nothing answered, no tool call of the history left unanswered."""
    call = state.pending[0]
    last = state.messages[-1] if state.messages else None
    if (
        len(state.pending) != 1
        or call.kind not in LONE_KINDS
        or call.args
        or state.answered
        or (last is not None and last.role == "assistant" and last.tool_calls)
        or (call.kind == "run" and state.steps != 0)
    ):
        raise RunStateError(
            f"run {state.run_id}: its paused {call.kind} and the state's history do not fit together "
            "(a paused model call or run is the state's only pending call, after every tool result): "
            "the state was changed or damaged"
        )


def rejection_text(name: str, reason: str | None) -> str:
    """What the model reads for a rejected call."""
    return f"Tool call {name} was rejected: {reason}"


def already_decided(run_id: str, status: str | None = None) -> BatchDecided:
    """The error for decisions on a batch that was decided already: the run is no longer paused there."""
    return BatchDecided(
        f"run {run_id} is no longer paused at this batch: it was already decided and resumed (decisions "
        "delivered twice run nothing); load the run's state again (store.load) to see what it waits for now",
        run_id=run_id,
        status=status,
    )


def paused_in_a_store(state: RunState) -> RunStateError:
    """The error for a state whose run paused in a store, given to an agent whose store does not have that run."""
    return RunStateError(
        f"run {state.run_id} paused in a store and is not in this agent's store (the agent has none, or another "
        "one, or the run was purged or deleted from it): a run paused in a store goes on only from that store, so "
        "its state, signed or not, is not believed elsewhere; resume it on an agent with that store, or start the "
        "run again"
    )


def _check_fresh(state: RunState, ttl: float | None) -> None:
    """Raise `RunStateError` when the signed `state` is older than `ttl` seconds (None: any age will do)."""
    if ttl is None:
        return
    if state.signed_at is None:
        raise RunStateError(
            f"run {state.run_id}: the state does not say when it was signed (an onion before signed_at, or an "
            f"agent with state_ttl=None signed it) and this agent believes signed states for state_ttl={ttl:g} s "
            "only: resume it on an agent with state_ttl=None, or start the run again"
        )
    try:
        age = time.time() - datetime.datetime.fromisoformat(state.signed_at).timestamp()
    except ValueError:
        raise RunStateError(f"run {state.run_id}: the state's signed_at is not a time (damaged)") from None
    if age > ttl:
        raise RunStateError(
            f"run {state.run_id}: the state was signed {age:.0f} s ago, longer than this agent's state_ttl "
            f"({ttl:g} s), so it is refused (an old state delivered again could otherwise run its calls again "
            "where nothing remembers it); start the run again, or give the agents a longer state_ttl"
        )


def _time_text(seconds: float) -> str:
    return (
        datetime.datetime.fromtimestamp(seconds, datetime.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    )


class Consumed:
    """The batches of signed states this process went on with, each kept until its state is too old to be
    believed: a decided signed state goes on once per process, whichever agent object it is given to.

    (A store remembers the runs it keeps for every process that shares it; this is for what no store holds.)
    """

    __slots__ = ("_expiring", "_until")

    def __init__(self) -> None:
        self._until: dict[tuple[str, str, str], float] = {}
        self._expiring: list[tuple[float, tuple[str, str, str]]] = []

    def take(self, state: RunState, agent: str, ttl: float | None) -> None:
        """Mark `state`'s batch gone on with; `BatchDecided` when it was already, in this process."""
        now = time.time()
        expiring = self._expiring
        while expiring and expiring[0][0] < now:
            expires, gone = heapq.heappop(expiring)
            if self._until.get(gone) == expires:  # not given back (nor taken again since)
                del self._until[gone]
        batch = (agent, state.run_id, state.batch or "")
        if batch in self._until:
            raise already_decided(state.run_id, "paused")
        signed = state.signed_at
        until = math.inf
        if ttl is not None and signed is not None:
            until = datetime.datetime.fromisoformat(signed).timestamp() + ttl
        self._until[batch] = until
        if until != math.inf:
            heapq.heappush(expiring, (until, batch))

    def give_back(self, state: RunState, agent: str) -> None:
        """Forget that `state`'s batch was taken (it did not go on after all); expiring, it is dropped then."""
        self._until.pop((agent, state.run_id, state.batch or ""), None)


CONSUMED = Consumed()
"""This process's record of the signed states it went on with."""


def _last_calls(state: RunState) -> list[Any]:
    last = state.messages[-1] if state.messages else None
    return list(last.tool_calls) if last is not None and last.role == "assistant" else []


def check_resumable(state: RunState, agent: str, tools: Mapping[str, Tool]) -> None:
    """Raise `RunStateError` saying what to do unless agent `agent`, with `tools`, can resume `state`."""
    if not state.paused:
        raise RunStateError(
            f"run {state.run_id} is {state.status}: there is nothing to resume; start a new run with agent.run()"
        )
    undecided = [f"{call.id} ({call.name})" for call in state.pending if call.decision is None]
    if undecided:
        raise RunStateError(
            f"run {state.run_id} has undecided pending calls: {', '.join(undecided)}; decide each with "
            "state.approve(id), state.edit(id, args) or state.reject(id, reason=...) (or state.approve_all())"
        )
    if state.pending and state.pending[0].kind in LONE_KINDS:
        check_lone_pause(state)
        return
    missing = sorted({c.name for c in state.pending if c.decision not in ("rejected", "resolved")} - tools.keys())
    if missing:
        raise RunStateError(
            f"run {state.run_id} has approved calls of tool(s) {', '.join(missing)} that agent {agent} "
            f"does not have (its tools: {', '.join(tools) or 'none'}); resume with an agent "
            "that has them, or reject those calls"
        )
    for call in state.pending:
        if call.decision == "edited":
            try:
                tools[call.name].validate(call.edited_args or {})
            except ToolArgumentsError as error:
                raise RunStateError(
                    f"run {state.run_id}: the edited arguments of call {call.id} do not fit: {error}; "
                    f"fix them with state.edit({call.id!r}, args)"
                ) from None
    asked = state.messages[-1].tool_calls if state.messages and state.messages[-1].role == "assistant" else []
    known = {m.tool_call_id for m in state.answered} | {c.id for c in state.pending}
    if not state.pending or {r.id for r in asked} != known:
        raise RunStateError(
            f"run {state.run_id}: the state's last message, answered and pending calls do not fit together "
            "(it was changed or damaged); save states with RunState.to_json() and load them with from_json()"
        )
