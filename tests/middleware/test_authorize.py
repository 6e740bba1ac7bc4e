"""`authorize`: the first rule that matches a tool call decides it; no rule matches: the default."""

from __future__ import annotations

import logging
import re
from typing import Any

import pytest

from middleware import Allow, Ask, Deny, authorize, log
from middleware.authorize import Rule
from onion import Agent, Principal, RunState, ToolCall, ToolRequest, tool, tracing
from onion.stores import MemoryStore
from onion.testing import ScriptedModel

SUPPORT = Principal("u-1", tenant="acme", roles={"support"})
MANAGER = Principal("u-2", tenant="acme", roles={"support", "manager"})
OUTSIDER = Principal("u-3", tenant="globex", roles={"manager"})


@tool
def search(query: str) -> str:
    """Search the orders."""
    return f"found {query}"


@tool
def refund(order: int, amount: float) -> str:
    """Refund an order."""
    return f"refunded {amount} on order {order}"


@tool
def delete_order(order: int) -> str:
    """Delete an order."""
    return f"deleted order {order}"


BATCH = [
    ToolRequest("s", "search", {"query": "order 7"}),
    ToolRequest("r", "refund", {"order": 7, "amount": 20.0}),
    ToolRequest("d", "delete_order", {"order": 7}),
]
TOOLS = [search, refund, delete_order]


def agent_with(policy: authorize, *more: Any, store: MemoryStore | None = None) -> Agent[str]:
    return Agent(ScriptedModel([BATCH, "done"]), tools=TOOLS, store=store).use(*more, policy)


async def outcomes(policy: authorize, principal: Principal | None = None) -> dict[str, str]:
    """What each call of BATCH came to under `policy`: `ran`, `blocked: <reason>` or `paused: <reason>`."""
    result = await agent_with(policy).run("help with order 7", principal=principal)
    found = {pending.id: f"paused: {pending.reason}" for pending in result.pending}
    if result.paused:
        return found
    for message in result.messages:
        if message.role == "tool":
            blocked = re.match(r"Tool call \w+ was blocked: (.*)", message.text)
            found[message.tool_call_id or ""] = f"blocked: {blocked[1]}" if blocked else "ran"
    return found


async def test_the_first_rule_that_matches_decides_and_later_rules_are_not_read() -> None:
    """Rules read top to bottom: a Deny above an Allow of every tool blocks; below it, it is never reached."""
    deny_first = authorize(Deny("delete_*", reason="deleting is not allowed"), Allow("*"))
    assert await outcomes(deny_first) == {"s": "ran", "r": "ran", "d": "blocked: deleting is not allowed"}
    allow_first = authorize(Allow("*"), Deny("delete_*", reason="deleting is not allowed"))
    assert await outcomes(allow_first) == {"s": "ran", "r": "ran", "d": "ran"}


async def test_no_rule_matching_falls_to_the_default_deny_unless_told_allow_or_ask() -> None:
    """By default a call no rule matches is blocked; `default="allow"` runs it, `default="ask"` pauses it."""
    assert await outcomes(authorize(Allow("search"))) == {
        "s": "ran",
        "r": "blocked: no rule of the policy allows refund",
        "d": "blocked: no rule of the policy allows delete_order",
    }
    assert await outcomes(authorize(Deny("delete_order"), default="allow")) == {
        "s": "ran",
        "r": "ran",
        "d": "blocked: denied by policy",
    }
    assert await outcomes(authorize(Allow(["search", "delete_order"]), default="ask")) == {
        "r": "paused: refund needs approval"
    }


async def test_roles_and_tenants_narrow_a_rule_to_the_principals_that_hold_one_of_them() -> None:
    """`roles=` matches a principal with one of the roles, `tenants=` one of the tenants; both must hold."""
    policy = authorize(
        Allow("search"),
        Allow("refund", roles={"manager"}, tenants="acme"),
        Deny("refund", roles="support", reason="refunds need a manager"),
    )
    assert (await outcomes(policy, SUPPORT))["r"] == "blocked: refunds need a manager"
    assert (await outcomes(policy, MANAGER))["r"] == "ran"
    assert (await outcomes(policy, OUTSIDER))["r"] == "blocked: no rule of the policy allows refund"


async def test_a_run_without_a_principal_matches_no_rule_with_roles_or_tenants() -> None:
    """Without a principal, `roles=` and `tenants=` rules never match; a rule without them still does."""
    policy = authorize(
        Allow("*", roles={"support"}),
        Allow("*", tenants={"acme"}),
        Allow("search"),
    )
    assert await outcomes(policy) == {
        "s": "ran",
        "r": "blocked: no rule of the policy allows refund",
        "d": "blocked: no rule of the policy allows delete_order",
    }
    assert await outcomes(policy, SUPPORT) == {"s": "ran", "r": "ran", "d": "ran"}


async def test_args_narrows_a_rule_by_the_calls_arguments() -> None:
    """`args=fn(args)` sees the call's arguments: small refunds run, large ones fall through to the next rule."""

    def small(args: dict[str, Any]) -> bool:
        return bool(args["amount"] <= 50)

    policy = authorize(Allow("refund", args=small), Deny("refund", reason="refunds over 50 need a person"))
    assert (await outcomes(policy))["r"] == "ran"
    big = authorize(Allow("refund", args=lambda args: args["amount"] <= 10), Deny("refund", reason="too big"))
    assert (await outcomes(big))["r"] == "blocked: too big"


async def test_a_rule_whose_check_raises_denies_and_the_reason_names_the_rule_and_the_error() -> None:
    """Fail closed: a matcher or `args=` that raises (or returns no bool) blocks the call, naming rule and error;
    the rules below are not read."""

    def currency(args: dict[str, Any]) -> bool:
        return bool(args["currency"] == "EUR")

    def flaky(call: ToolCall) -> bool:
        raise RuntimeError("policy service down")

    raising_args = await outcomes(authorize(Allow("search"), Allow("refund", args=currency), default="allow"))
    assert raising_args["r"] == (
        "blocked: rule 2 Allow('refund', args=test_a_rule_whose_check_raises_denies_and_the_reason_names_the_rule_"
        "and_the_error.currency) failed (KeyError: 'currency'), so denied"
    )
    assert raising_args["s"] == raising_args["d"] == "ran"
    raising_matcher = await outcomes(authorize(Allow("search"), Allow(flaky), Allow("*")))
    assert raising_matcher["r"].startswith("blocked: rule 2 Allow(")
    assert raising_matcher["r"].endswith("flaky) failed (RuntimeError: policy service down), so denied")
    not_a_bool = await outcomes(authorize(Allow("refund", args=lambda args: None), default="allow"))  # type: ignore[arg-type,return-value]
    assert "failed (TypeError: args= returned None, not a bool), so denied" in not_a_bool["r"]


async def test_the_model_reads_the_reason_of_a_deny_in_the_calls_result() -> None:
    """What the next request sends for a denied call is an error result with the rule's reason."""
    model = ScriptedModel([BATCH, "done"])
    agent = Agent(model, tools=TOOLS).use(authorize(Allow("search"), Deny("*", reason="ask a manager instead")))
    await agent.run("go")
    sent = {m.tool_call_id: m for m in model.requests[1].messages if m.role == "tool"}
    assert sent["r"].is_error and sent["r"].text == "Tool call refund was blocked: ask a manager instead"
    assert not sent["s"].is_error and sent["s"].text == "found order 7"


async def test_ask_pauses_the_call_and_an_approved_call_runs_after_a_resume_from_json() -> None:
    """An Ask pauses its call (the batch's others run); approved, it runs through the same policy, which lets it."""
    policy = authorize(Allow("search"), Ask("refund", reason="a person checks every refund"), Deny("*"))
    agent = agent_with(policy)
    result = await agent.run("go", principal=SUPPORT)
    assert [(p.id, p.reason) for p in result.pending] == [("r", "a person checks every refund")]
    state = RunState.from_json(result.to_state().to_json())
    state.approve("r")
    done = await agent.resume(state)
    texts = {m.tool_call_id: m.text for m in done.messages if m.role == "tool"}
    assert texts == {
        "s": "found order 7",
        "d": "Tool call delete_order was blocked: denied by policy",
        "r": "refunded 20.0 on order 7",
    }
    assert done.output == "done"


async def test_ask_with_a_store_is_decided_from_store_load_and_runs_on_resume() -> None:
    """With a MemoryStore: `store.load` gives the paused run, `state.approve` decides, `agent.resume` runs it."""
    store = MemoryStore()
    agent = agent_with(authorize(Allow("search"), Ask("refund"), Ask("delete_order")), store=store)
    paused = await agent.run("go", principal=SUPPORT)
    assert [p.id for p in paused.pending] == ["r", "d"]
    state = await store.load(paused.run_id)
    state.approve("r")
    state.reject("d", reason="never delete orders")
    done = await agent.resume(state, principal=MANAGER)
    texts = {m.tool_call_id: m.text for m in done.messages if m.role == "tool"}
    assert texts["r"] == "refunded 20.0 on order 7"
    assert texts["d"] == "Tool call delete_order was rejected: never delete orders"
    assert done.output == "done"
    assert [(d.call_id, d.decision, d.by) for d in done.decisions] == [
        ("r", "approved", MANAGER),
        ("d", "rejected", MANAGER),
    ]


async def test_an_approved_call_is_decided_again_so_an_edit_that_a_deny_matches_is_blocked() -> None:
    """Approval lets an Ask'ed call through, not past the rules above it: edited arguments are read again."""
    policy = authorize(Deny("refund", args=lambda args: args["amount"] > 1000, reason="over the limit"), Ask("*"))
    agent = Agent(ScriptedModel([[BATCH[1]], "done"]), tools=TOOLS).use(policy)
    state = (await agent.run("go")).to_state()
    state.edit("r", {"order": 7, "amount": 5000.0})
    done = await agent.resume(state)
    assert done.messages[-2].text == "Tool call refund was blocked: over the limit"


async def test_each_decision_is_on_the_record_of_a_log_outside() -> None:
    """A `log` outside the policy puts the decision (verdict, rule number, rule as written) in `decision`."""
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    logger = logging.getLogger("test.authorize")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    policy = authorize(Allow("search"), Ask("refund", roles={"support"}), Deny("delete_*", reason="no deletes"))
    await agent_with(policy, log(logger)).run("go", principal=SUPPORT)
    decisions = {r.what: (r.outcome, getattr(r, "decision", None)) for r in records if r.kind == "tool"}  # type: ignore[attr-defined]
    assert decisions == {
        "search": ("ok", "allowed by rule 1: Allow('search')"),
        "refund": ("paused", "asked by rule 2: Ask('refund', roles={'support'})"),
        "delete_order": ("blocked", "denied by rule 3: Deny('delete_*', reason='no deletes')"),
    }
    refund = next(r for r in records if getattr(r, "what", "") == "refund")
    assert "policy: asked by rule 2" in refund.getMessage()
    assert all(not hasattr(r, "decision") for r in records if r.kind != "tool")  # type: ignore[attr-defined]


async def test_each_decision_is_noted_in_the_trace_on_the_policy_layer() -> None:
    """A captured trace shows, next to `authorize`, which rule decided each call (or the default)."""
    policy = authorize(Allow("search"), Deny("delete_order"))
    with tracing.capture() as trace:
        await agent_with(policy).run("go")
    (run,) = trace.runs
    notes = {}
    stack = [run]
    while stack:
        span = stack.pop()
        stack.extend(span.children)
        if span.kind == "layer" and span.name == "authorize":
            notes[span.ctx.name] = span.notes
    assert notes == {
        "search": ["allowed by rule 1: Allow('search')"],
        "refund": ["denied by default (no rule matched)"],
        "delete_order": ["denied by rule 2: Deny('delete_order', reason='denied by policy')"],
    }
    assert "denied by rule 2: Deny('delete_order'" in str(trace)


async def test_with_instrument_each_decision_is_an_event_of_the_tool_calls_span() -> None:
    """With OpenTelemetry (`tracing.instrument()`, no layer spans) the decision is an `onion.note` event of the
    tool call's `execute_tool` span."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.instrument(provider)
    try:
        await agent_with(authorize(Allow("search"), Ask("refund"))).run("go")
    finally:
        tracing.uninstrument()
    noted = {
        span.name: [event.attributes["onion.note"] for event in span.events if event.attributes]
        for span in exporter.get_finished_spans()
        if span.name.startswith("execute_tool")
    }
    assert noted == {
        "execute_tool search": ["allowed by rule 1: Allow('search')"],
        "execute_tool refund": ["asked by rule 2: Ask('refund')"],
        "execute_tool delete_order": ["denied by default (no rule matched)"],
    }


def test_rules_read_like_a_firewalls_and_a_deny_without_a_reason_gets_one() -> None:
    """Each rule's repr is the rule as written; the policy's lists them numbered, as decisions name them."""
    policy = authorize(
        Allow("search"),
        Allow(["refund", re.compile(r"refund_\w+")], roles={"support", "manager"}, tenants="acme"),
        Ask(None, args=len, reason="a person looks"),
        Deny("delete_*"),
        default="allow",
    )
    assert repr(policy) == (
        "authorize(\n"
        "    Allow('search'),  # 1\n"
        "    Allow(['refund', re.compile('refund_\\\\w+')], roles={'manager', 'support'}, tenants={'acme'}),  # 2\n"
        "    Ask(None, args=len, reason='a person looks'),  # 3\n"
        "    Deny('delete_*', reason='denied by policy'),  # 4\n"
        "    default='allow',\n"
        ")"
    )
    assert Deny("x").reason == Deny("x", reason=None).reason == "denied by policy"  # type: ignore[arg-type]
    assert Ask("x").reason is None


def test_a_rule_or_policy_that_cannot_work_is_refused_when_built_naming_what_to_fix() -> None:
    """Unknown conditions, a reason on an Allow, bad matchers, names or functions, a non-rule, a bad default."""
    with pytest.raises(
        TypeError,
        match=r"unknown condition 'role'; a rule is narrowed by roles=, tenants=, args= \(did you mean roles=\?\)",
    ):
        Allow("refund", role="manager")  # type: ignore[arg-type]
    with pytest.raises(
        TypeError,
        match=r"unknown conditions 'tenant', 'when'; a rule is narrowed by .* \(did you mean tenants=\?\)",
    ):
        Deny("refund", when=1, tenant="acme")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="an Allow runs the call, it gives no reason"):
        Allow("refund", reason="why")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="Ask: 42 is not a tool name"):
        Ask(42)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="roles= takes a name or a set of non-empty names"):
        Allow("x", roles=[])
    with pytest.raises(TypeError, match="args= takes a plain function"):
        Allow("x", args="amount < 5")  # type: ignore[arg-type]

    async def async_check(call: ToolCall) -> bool:
        return True

    with pytest.raises(TypeError, match="is async; a matcher is a plain function"):
        Allow(async_check)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="reason must be a non-empty str"):
        Deny("x", reason="")
    with pytest.raises(TypeError, match=r"rule 2 is 'refund', not a rule: write Allow\(tools\)"):
        authorize(Allow("search"), "refund")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match='default must be "deny", "allow" or "ask"'):
        authorize(default="block")  # type: ignore[arg-type]
    assert all(isinstance(rule, Rule) for rule in (Allow("a"), Deny("b"), Ask("c")))


async def test_a_call_of_an_unknown_tool_is_answered_as_unknown_not_paused() -> None:
    """An Ask never asks a person about a tool the agent does not have: it never runs, the model is told."""
    agent = Agent(ScriptedModel([[ToolRequest("x", "shred", {})], "done"]), tools=TOOLS).use(authorize(Ask("*")))
    result = await agent.run("go")
    assert not result.paused and "shred" in result.messages[2].text and result.messages[2].is_error
