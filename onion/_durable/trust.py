"""What resuming a `RunState` checks and goes on with: its signature, its fit with the agent, its batch."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from typing import TYPE_CHECKING, Any

from .._messages import Message, ToolRequest
from .._principal import DecisionRecord, Principal, now_utc
from ..errors import BatchDecided, RunStateError, ToolArgumentsError
from .state import Pending, RunState

if TYPE_CHECKING:
    from collections.abc import Mapping

    from .._tools import Tool


def state_key(given: bytes | str | None) -> bytes | None:
    """The key that signs paused runs: the agent's `state_key`, else `ONION_STATE_KEY`, else None."""
    key = given if given is not None else os.environ.get("ONION_STATE_KEY") or None
    return key.encode() if isinstance(key, str) else key


def signature(state: RunState, key: bytes) -> str:
    """HMAC-SHA256 of everything in `state` but its decisions (and the signature itself), as hex."""
    data = state.to_dict()
    del data["signature"]
    for added in ("principal", "decisions"):  # as states signed before principals were
        if not data[added]:
            del data[added]
    for call in data["pending"]:
        del call["decision"], call["edited_args"], call["rejection"]
        if call["kind"] == "tool":  # as states signed before paused model calls and runs were
            del call["kind"]
    text = json.dumps(data, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hmac.new(key, text.encode(), hashlib.sha256).hexdigest()


def check_trusted(state: RunState, key: bytes | None, agent: str) -> None:
    """Raise `RunStateError` unless `state`, come from outside with no store to hold it against, can be believed
    by agent `agent`.

    With `key`, its signature must be intact and name that agent. Without, what can be checked is:
    its pending calls are the calls the model asked for (names and arguments),
    steps and usage are not negative.
    """
    if key is not None:
        if state.signature is None:
            raise RunStateError(
                f"run {state.run_id}: this agent signs paused runs (state_key) and the state is not signed; "
                "resume only states that agent.run(...).to_state() of an agent with the same key gave"
            )
        if not hmac.compare_digest(state.signature, signature(state, key)):
            raise RunStateError(
                f"run {state.run_id}: the state's signature does not match: it was altered after it was saved "
                "(only decisions may change), or signed with another state_key"
            )
        if state.agent != agent:
            raise RunStateError(
                f"run {state.run_id} was paused by agent {state.agent!r}, not {agent!r}: a signed state resumes on "
                "the agent that paused it (give agents that share a key their own names)"
            )
    if any(call.kind != "tool" for call in state.pending):
        check_lone_pause(state)
    asked = {r.id: r for r in _last_calls(state)}
    for call in state.pending:
        if call.kind != "tool":
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
            call.decision, call.edited_args, call.rejection = (
                decision.decision,
                decision.edited_args,
                decision.rejection,
            )


def pending_batch(state: RunState) -> Pending:
    """The batch `state` (decided: `check_resumable`) goes on with: answers so far and rejections settled, the
    approved and edited calls (with their arguments) to run; for a paused model call or run, its decision."""
    first = state.pending[0] if state.pending else None
    if first is not None and first.kind != "tool":
        rejection = (first.rejection or "not approved") if first.decision == "rejected" else None
        return Pending({}, [], approved=True, kind=first.kind, rejection=rejection)
    settled = {message.tool_call_id: message for message in state.answered}
    requests = []
    for call in state.pending:
        if call.decision == "rejected":
            settled[call.id] = Message.tool(call.id, rejection_text(call.name, call.rejection), True)
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
        or call.kind not in ("model", "run")
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
    if state.pending and state.pending[0].kind != "tool":
        check_lone_pause(state)
        return
    missing = sorted({c.name for c in state.pending if c.decision != "rejected"} - tools.keys())
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
