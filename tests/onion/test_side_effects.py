"""Side effects once: `ToolCall.idempotency_key`, and calls in doubt after a crash (`@tool(in_doubt=, reconcile=)`)."""

from __future__ import annotations

from typing import Any

import pytest

from middleware import approve, retry
from onion import (
    Agent,
    Decisions,
    Message,
    ModelCall,
    ModelResponse,
    RunState,
    ToolCall,
    ToolNext,
    ToolResult,
    tool,
)
from onion.errors import DecisionRefused, RunStateError
from onion.stores import MemoryStore
from onion.testing import FunctionModel, ScriptedModel, call


class Crash(BaseException):
    """Stands in for the worker dying: nothing in the run catches it."""


async def crash_after(call_: ToolCall, call_next: ToolNext) -> ToolResult:
    """The worker dies right after the tool ran, before its result is recorded (the journal says it started)."""
    await call_next(call_)
    raise Crash


def answer_with_last_result(request: ModelCall) -> ModelResponse:
    """Ask for `refund` first; then answer with what the model read for it."""
    last = request.messages[-1]
    if last.role == "tool":
        return ModelResponse(Message.assistant(f"read: {last.text}"))
    return ModelResponse(Message.assistant("", [call("refund", order="o-1")]))


class Payments:
    """The outside world: a payment API that remembers the idempotency key of every refund it made."""

    def __init__(self) -> None:
        self.refunds: list[str] = []

    def tools(self, **options: Any) -> list[Any]:
        def refund(order: str, call: ToolCall) -> str:
            """Refund an order."""
            self.refunds.append(call.idempotency_key)
            return f"refunded {order}"

        return [tool(**options)(refund)]


# -- idempotency_key -----------------------------------------------------------


async def test_the_key_is_the_same_across_three_attempts_of_one_call() -> None:
    keys: list[str] = []

    @tool
    def flaky(call: ToolCall) -> str:
        """Fails twice."""
        keys.append(call.idempotency_key)
        if len(keys) < 3:
            raise ConnectionError("the payment API timed out")
        return "ok"

    async def no_wait(seconds: float) -> None:
        return None

    model = ScriptedModel([[call("flaky")], "done"])
    agent = Agent(model, tools=[flaky]).use(retry(3, tools=True, sleep=no_wait))
    assert (await agent.run("go")).output == "done"
    assert len(keys) == 3 and len(set(keys)) == 1 and keys[0].startswith("onion-")


async def test_two_calls_of_one_run_never_share_a_key_even_with_the_same_call_id() -> None:
    """Three calls in one batch, then a call whose id the model used again in the next response: four keys."""
    keys: list[str] = []

    @tool
    def note(n: int, call: ToolCall) -> str:
        """Note n."""
        keys.append(call.idempotency_key)
        return "noted"

    again = Message.assistant("", [call("note", n=9)])
    again.tool_calls[0].id = "same"
    first = Message.assistant("", [call("note", n=1), call("note", n=2), call("note", n=3)])
    first.tool_calls[0].id = "same"
    model = ScriptedModel([ModelResponse(first), ModelResponse(again), "done"])
    await Agent(model, tools=[note]).run("go")
    other = await Agent(ScriptedModel([ModelResponse(first), "done"]), tools=[note]).run("go")
    assert other.output == "done"
    assert len(keys) == 7 and len(set(keys)) == 7  # the second run's three calls have keys of their own


async def test_the_key_is_the_same_after_a_resume_from_json() -> None:
    """A layer outside `approve` sees the call before its run pauses and again once it resumed: one key."""
    payments, seen = Payments(), []

    async def note_key(call_: ToolCall, call_next: ToolNext) -> ToolResult:
        seen.append(call_.idempotency_key)
        return await call_next(call_)

    agent = Agent(FunctionModel(answer_with_last_result), tools=payments.tools()).use(note_key, approve("refund"))
    paused = await agent.run("refund o-1")
    state = RunState.from_json(paused.to_state().to_json())
    state.approve(state.pending[0].id)
    assert (await agent.resume(state)).output == "read: refunded o-1"
    assert len(seen) == 2 and seen[0] == seen[1] == payments.refunds[0]


async def test_the_key_is_the_same_after_a_crash_and_recovery() -> None:
    store = MemoryStore()
    payments = Payments()
    worker = Agent(FunctionModel(answer_with_last_result), tools=payments.tools(idempotent=True), store=store)
    with pytest.raises(Crash):
        await worker.use(crash_after).run("refund o-1")
    (record,) = await store.runs()
    later = Agent(FunctionModel(answer_with_last_result), tools=payments.tools(idempotent=True), store=store)
    result = await later.recover(record.run_id)
    assert result.output == "read: refunded o-1"
    assert len(payments.refunds) == 2 and payments.refunds[0] == payments.refunds[1]


# -- in doubt ------------------------------------------------------------------


async def crashed(store: MemoryStore, payments: Payments, **options: Any) -> tuple[str, Agent[Any]]:
    """A run whose worker died inside `refund`; and an agent of another worker, to recover it."""
    worker = Agent(FunctionModel(answer_with_last_result), tools=payments.tools(**options), store=store)
    with pytest.raises(Crash):
        await worker.use(crash_after).run("refund o-1")
    (record,) = await store.runs()
    return record.run_id, Agent(FunctionModel(answer_with_last_result), tools=payments.tools(**options), store=store)


async def test_a_call_in_doubt_pauses_the_recovered_run_as_one_that_may_have_run() -> None:
    store, payments = MemoryStore(), Payments()
    run_id, later = await crashed(store, payments, in_doubt="ask")
    paused = await later.recover(run_id)
    assert paused.paused and len(payments.refunds) == 1
    (pending,) = paused.pending
    assert (pending.kind, pending.name, pending.args) == ("in_doubt", "refund", {"order": "o-1"})
    assert "its worker stopped after it started and before its result was recorded" in pending.reason
    assert pending.to_dict()["kind"] == "in_doubt"
    record = await store.run_record(run_id)
    assert record is not None and record.status == "paused" and record.pending == 1


async def test_approving_a_call_in_doubt_runs_it_again_with_the_same_key() -> None:
    store, payments = MemoryStore(), Payments()
    run_id, later = await crashed(store, payments, in_doubt="ask")
    paused = await later.recover(run_id)
    state = await later.decide(run_id, Decisions(approve=[paused.pending[0].id]))
    result = await later.resume(state)
    assert result.output == "read: refunded o-1"
    assert len(payments.refunds) == 2 and payments.refunds[0] == payments.refunds[1]


async def test_rejecting_a_call_in_doubt_tells_the_model_why_and_runs_nothing() -> None:
    store, payments = MemoryStore(), Payments()
    run_id, later = await crashed(store, payments, in_doubt="ask")
    paused = await later.recover(run_id)
    state = await later.decide(run_id, Decisions(reject={paused.pending[0].id: "the refund went through"}))
    result = await later.resume(state)
    assert result.output == "read: Tool call refund was rejected: the refund went through"
    assert len(payments.refunds) == 1


async def test_resolving_a_call_in_doubt_records_what_a_person_checked_and_runs_nothing() -> None:
    store, payments = MemoryStore(), Payments()
    run_id, later = await crashed(store, payments, in_doubt="ask")
    paused = await later.recover(run_id)
    state = await later.decide(run_id, Decisions(resolve={paused.pending[0].id: "refunded o-1 (checked by Ana)"}))
    result = await later.resume(state)
    assert result.output == "read: refunded o-1 (checked by Ana)"
    assert len(payments.refunds) == 1
    assert [(d.decision, d.result) for d in result.decisions] == [("resolved", "refunded o-1 (checked by Ana)")]


async def test_state_resolve_answers_only_a_call_in_doubt() -> None:
    store, payments = MemoryStore(), Payments()
    run_id, later = await crashed(store, payments, in_doubt="ask")
    paused = await later.recover(run_id)
    state = paused.to_state()
    with pytest.raises(RunStateError, match="not run with other arguments; approve, reject or resolve it"):
        state.edit(state.pending[0].id, {"order": "o-2"})
    with pytest.raises(TypeError):
        state.resolve(state.pending[0].id, 5)  # type: ignore[arg-type]
    state.resolve(state.pending[0].id, "done by hand")
    assert state.pending[0].decision == "resolved"
    assert RunState.from_json(state.to_json()).pending[0].result == "done by hand"
    agent = Agent(ScriptedModel([[call("refund", order="o-1")]]), tools=payments.tools()).use(approve("refund"))
    tool_pause = (await agent.run("go")).to_state()
    with pytest.raises(RunStateError, match="only an in-doubt call is resolved"):
        tool_pause.resolve(tool_pause.pending[0].id, "x")
    with pytest.raises(DecisionRefused, match="only an in-doubt call is resolved") as refused:
        from onion._durable.decisions import apply

        apply(tool_pause, Decisions(resolve={tool_pause.pending[0].id: "x"}))
    assert refused.value.why == "not_resolvable"


async def test_a_call_in_doubt_never_runs_twice_without_approval_even_when_the_rerun_crashes_too() -> None:
    """Approved, it runs again; its worker dies in it again: recovered, it pauses again instead of a third run."""
    store, payments = MemoryStore(), Payments()
    run_id, later = await crashed(store, payments, in_doubt="ask")
    paused = await later.recover(run_id)
    state = await later.decide(run_id, Decisions(approve=[paused.pending[0].id]))
    dying = Agent(FunctionModel(answer_with_last_result), tools=payments.tools(in_doubt="ask"), store=store)
    with pytest.raises(Crash):
        await dying.use(crash_after).resume(state)
    assert len(payments.refunds) == 2
    again = await later.recover(run_id)
    assert again.paused and again.pending[0].kind == "in_doubt" and len(payments.refunds) == 2


async def test_reconcile_answers_from_the_outside_world_when_the_call_happened() -> None:
    store, payments = MemoryStore(), Payments()
    asked: list[str] = []

    def check(call: ToolCall) -> ToolResult | None:
        asked.append(call.idempotency_key)
        found = call.idempotency_key in payments.refunds
        return ToolResult("refunded o-1 (found at the payment API)") if found else None

    run_id, later = await crashed(store, payments, reconcile=check)
    result = await later.recover(run_id)
    assert result.output == "read: refunded o-1 (found at the payment API)"
    assert len(payments.refunds) == 1 and asked == payments.refunds


async def test_reconcile_that_finds_nothing_runs_the_call_again() -> None:
    store, payments = MemoryStore(), Payments()

    async def nothing_found(call: ToolCall) -> ToolResult | None:
        return None

    run_id, later = await crashed(store, payments, reconcile=nothing_found)
    payments.refunds.clear()  # the payment API never got the first one
    result = await later.recover(run_id)
    assert result.output == "read: refunded o-1" and len(payments.refunds) == 1


async def test_a_reconcile_that_fails_asks_a_person_when_the_tool_says_so() -> None:
    store, payments = MemoryStore(), Payments()

    def down(call: ToolCall) -> ToolResult | None:
        raise ConnectionError("the payment API is down")

    run_id, later = await crashed(store, payments, reconcile=down, in_doubt="ask")
    paused = await later.recover(run_id)
    assert paused.pending[0].kind == "in_doubt" and "the payment API is down" in paused.pending[0].reason


async def test_without_in_doubt_or_reconcile_the_model_reads_that_the_call_was_interrupted() -> None:
    store, payments = MemoryStore(), Payments()
    run_id, later = await crashed(store, payments)
    result = await later.recover(run_id)
    assert result.output.startswith("read: Tool refund was interrupted") and len(payments.refunds) == 1


def test_an_idempotent_tool_takes_neither_in_doubt_nor_reconcile() -> None:
    def refund(order: str) -> str:
        """Refund."""
        return order

    with pytest.raises(TypeError, match="an idempotent tool runs again"):
        tool(idempotent=True, in_doubt="ask")(refund)
    with pytest.raises(ValueError, match="in_doubt is 'ask' or None"):
        tool(in_doubt="maybe")(refund)  # type: ignore[arg-type]


async def test_the_inbox_and_runs_show_name_a_call_in_doubt_as_one_that_may_have_run(tmp_path: Any) -> None:
    from onion._runs_cli import show_run
    from onion.serve._page import call_fieldset
    from onion.stores import SQLiteStore

    path = tmp_path / "onion.db"
    payments = Payments()
    with SQLiteStore(path) as store:
        worker = Agent(FunctionModel(answer_with_last_result), tools=payments.tools(in_doubt="ask"), store=store)
        with pytest.raises(Crash):
            await worker.use(crash_after).run("refund o-1")
        (record,) = await store.runs()
        later = Agent(FunctionModel(answer_with_last_result), tools=payments.tools(in_doubt="ask"), store=store)
        (pending,) = (await later.recover(record.run_id)).pending
    shown = await show_run(path, record.run_id)
    assert f'{pending.id}  refund("order": "o-1")  may have run: its worker stopped after it started' in shown
    assert f"id='kind--{pending.id}'>may have run<" in call_fieldset(pending, "")  # ids: kind-RUN-CALL, no run here
