"""`authorize`: a policy read top to bottom, like a firewall's rules: the first rule that matches a tool call
decides it (run it, block it, or ask a person)."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from typing import Any, ClassVar, Literal, Never

from onion import Principal, ToolCall, ToolNext, ToolResult
from onion.tracing import note

from ._decisions import approved_here, ask, decided
from ._tool_matcher import Matcher, ToolMatcher, describe

__all__ = ["Allow", "Ask", "Deny", "Rule", "authorize"]

Verdict = Literal["allow", "deny", "ask"]
Names = str | Iterable[str]
"""One role (or tenant) name, or several: the rule matches a principal that has one of them."""
ArgsCheck = Callable[[dict[str, Any]], bool]
"""`fn(args) -> bool` on the call's arguments (as the tool would get them)."""

_Step = tuple[int, "Rule", Callable[[ToolCall], bool] | None, ArgsCheck | None, str]
"""One rule to read: its number, itself, its function of the call and its `args=` (None: it reads neither),
and the decision its match makes, in words."""
_Plan = tuple[_Step, ...]
"""The rules to read for one tool name and principal, in order."""
_CONDITIONS = ("roles", "tenants", "args")
_MEMO_SIZE = 1024
KEY = "authorize"
"""This layer's key in `run.private`: `{"asked": [...]}`, the calls an `Ask` rule paused (their idempotency keys)."""
_DONE = {"allow": "allowed", "deny": "denied", "ask": "asked"}


class Rule:
    """One line of a policy: which tool calls it matches, and what it decides (`Allow`, `Deny`, `Ask`).

    `tools` is a matcher as `approve` takes it: a tool name, a glob
    (`"refund_*"`), a list of them, a compiled regex (the whole name),
    `fn(call) -> bool`, or `None` (every tool). The conditions narrow it:
    `roles=` (the run's principal has one of them), `tenants=` (the
    principal's tenant is one of them), `args=fn(args) -> bool`. A run
    without a principal matches no rule with `roles=` or `tenants=`.
    """

    __slots__ = ("_repr", "args", "reason", "roles", "tenants", "tools")
    verdict: ClassVar[Verdict]

    def __init__(
        self,
        tools: Matcher,
        reason: str | None,
        roles: Names | None,
        tenants: Names | None,
        args: ArgsCheck | None,
        unknown: dict[str, Any],
    ) -> None:
        kind = type(self).__name__
        if unknown:
            names = ", ".join(repr(name) for name in sorted(unknown))
            conditions = "condition" if len(unknown) == 1 else "conditions"
            raise TypeError(
                f"{kind}({_quoted(tools)}, ...): unknown {conditions} {names}; a rule is narrowed by "
                f"{', '.join(f'{name}=' for name in _CONDITIONS)}" + _hint(unknown)
            )
        self.tools = ToolMatcher(tools, kind)
        self.roles = _names(roles, kind, "roles")
        self.tenants = _names(tenants, kind, "tenants")
        if args is not None and (not callable(args) or inspect.iscoroutinefunction(args)):
            raise TypeError(f"{kind}: args= takes a plain function fn(args) -> bool, got {args!r}")
        self.args = args
        if reason is not None and (not isinstance(reason, str) or not reason):
            raise TypeError(f"{kind}: reason must be a non-empty str, got {reason!r}")
        self.reason = reason
        shown = [repr(self.tools)]
        for name, value in (("roles", self.roles), ("tenants", self.tenants)):
            if value is not None:
                shown.append(f"{name}={{{', '.join(map(repr, sorted(value)))}}}")
        if args is not None:
            shown.append(f"args={describe(args)}")
        if reason is not None:
            shown.append(f"reason={reason!r}")
        self._repr = f"{kind}({', '.join(shown)})"

    def may_match(self, name: str, principal: Principal | None) -> bool:
        """Whether a call of the tool `name` for `principal` may match: the part that is the same for every call."""
        roles = self.roles
        if roles is not None and (principal is None or roles.isdisjoint(principal.roles)):
            return False
        tenants = self.tenants
        if tenants is not None and (principal is None or principal.tenant not in tenants):
            return False
        return self.tools.named(name)

    def __repr__(self) -> str:
        return self._repr


class Allow(Rule):
    """Run the tool calls this rule matches (see `Rule` for `tools` and the conditions)."""

    __slots__ = ()
    verdict = "allow"

    def __init__(
        self,
        tools: Matcher,
        /,
        *,
        roles: Names | None = None,
        tenants: Names | None = None,
        args: ArgsCheck | None = None,
        **unknown: Never,
    ) -> None:
        if "reason" in unknown:
            raise TypeError(f"Allow({_quoted(tools)}, reason=...): an Allow runs the call, it gives no reason")
        super().__init__(tools, None, roles, tenants, args, unknown)


class Deny(Rule):
    """Block the tool calls this rule matches; the model reads `reason` (by default "denied by policy")."""

    __slots__ = ()
    verdict = "deny"

    def __init__(
        self,
        tools: Matcher,
        /,
        *,
        roles: Names | None = None,
        tenants: Names | None = None,
        args: ArgsCheck | None = None,
        reason: str = "denied by policy",
        **unknown: Never,
    ) -> None:
        super().__init__(tools, "denied by policy" if reason is None else reason, roles, tenants, args, unknown)


class Ask(Rule):
    """Pause the tool calls this rule matches for a person; a call they approved runs.

    `reason` is what the person reads (`PendingCall.reason`; by default
    "<tool> needs approval"). Only an approval of this pause counts: a call
    a person approved when another layer paused it (they read that layer's
    reason, not this one) is paused again, with this reason.
    """

    __slots__ = ()
    verdict = "ask"

    def __init__(
        self,
        tools: Matcher,
        /,
        *,
        roles: Names | None = None,
        tenants: Names | None = None,
        args: ArgsCheck | None = None,
        reason: str | None = None,
        **unknown: Never,
    ) -> None:
        super().__init__(tools, reason, roles, tenants, args, unknown)


class authorize:
    """Decide every tool call by the first of `rules` that matches it; no rule matches: `default`.

    `Allow` runs the call, `Deny` blocks it with its reason (the model reads
    it), `Ask` pauses it for a person (`result.pending`; approved on resume,
    it runs). `default` is `"deny"`, `"allow"` or `"ask"`. A rule whose
    function raises (or whose `args=` returns no bool) denies the call (fail
    closed), the reason naming the rule and the error. Each decision is noted
    in the trace (`onion.tracing.note`) and on the record of a `log` outside
    (its `decision` field): which rule, by number and as written. Calls of
    unknown tools never run: an `Ask` lets them be answered as unknown.
    """

    __slots__ = ("_by_default", "_plans", "default", "rules")

    def __init__(self, *rules: Rule, default: Verdict = "deny") -> None:
        for number, rule in enumerate(rules, 1):
            if not isinstance(rule, Rule):
                raise TypeError(
                    f"authorize: rule {number} is {rule!r}, not a rule: write Allow(tools), Deny(tools, reason=...) "
                    "or Ask(tools)"
                )
        if default not in _DONE:
            raise ValueError(f'authorize: default must be "deny", "allow" or "ask", got {default!r}')
        self.rules: tuple[Rule, ...] = rules
        self.default: Verdict = default
        self._plans: dict[tuple[str, str | None, frozenset[str] | None], _Plan] = {}
        self._by_default = f"{_DONE[default]} by default (no rule matched)"

    @property
    def name(self) -> str:
        return "authorize"

    def _plan(self, name: str, principal: Principal | None) -> _Plan:
        """The rules that may match a call of the tool `name` for `principal`, in order, up to the first that
        matches every such call; memoised per tool name, tenant and roles (all the rules read besides the call)."""
        key = (name, None, None) if principal is None else (name, principal.tenant, principal.roles)
        plan = self._plans.get(key)
        if plan is None:
            found: list[_Step] = []
            for number, rule in enumerate(self.rules, 1):
                if rule.may_match(name, principal):
                    function, check = rule.tools.function, rule.args
                    found.append((number, rule, function, check, f"{_DONE[rule.verdict]} by rule {number}: {rule!r}"))
                    if function is None and check is None:
                        break  # it matches every such call: the rules below it are never read
            plan = tuple(found)
            if len(self._plans) < _MEMO_SIZE:
                self._plans[key] = plan
        return plan

    async def wrap_tool(self, call: ToolCall, call_next: ToolNext) -> ToolResult:
        verdict, reason, decision = self.default, None, self._by_default
        step, args = None, None
        try:
            for step in self._plan(call.name, call.run.principal):
                _, rule, function, check, decides = step
                if function is not None and not function(call):
                    continue
                if check is not None:
                    if args is None:
                        args = call.args
                    answer = check(args)
                    if answer is False:
                        continue
                    if answer is not True:
                        raise TypeError(f"args= returned {answer!r}, not a bool")
                verdict, reason, decision = rule.verdict, rule.reason, decides
                break
        except Exception as error:
            assert step is not None
            failing = f"rule {step[0]} {step[1]!r}"
            failure = f"{type(error).__name__}: {error}"
            return self._told(
                call, f"denied: {failing} raised {failure}", call.block(f"{failing} failed ({failure}), so denied")
            )
        if verdict == "deny":
            return self._told(call, decision, call.block(reason or f"no rule of the policy allows {call.name}"))
        if verdict == "ask":
            if call.tool is not None and not approved_here(call, KEY):  # approved for another layer: not seen
                return self._told(call, decision, ask(call, KEY, reason or f"{call.name} needs approval"))
            decision = ("approved, " if call.approved else "unknown tool, ") + decision
        note(decision)
        decided(call, decision)
        result = await call_next(call)
        return result

    @staticmethod
    def _told(call: ToolCall, decision: str, result: ToolResult) -> ToolResult:
        note(decision)
        decided(call, decision)
        return result

    def __repr__(self) -> str:
        lines = [f"    {rule!r},  # {number}" for number, rule in enumerate(self.rules, 1)]
        return "\n".join(["authorize(", *lines, f"    default={self.default!r},", ")"])


def _names(value: Names | None, kind: str, what: str) -> frozenset[str] | None:
    if value is None:
        return None
    names = frozenset((value,) if isinstance(value, str) else value) if isinstance(value, str | Iterable) else None
    if not names or not all(isinstance(name, str) and name for name in names):
        raise TypeError(f"{kind}: {what}= takes a name or a set of non-empty names, got {value!r}")
    return names


def _quoted(tools: object) -> str:
    return repr(tools) if isinstance(tools, str) else "..."


def _hint(unknown: dict[str, Any]) -> str:
    for name in unknown:
        for condition in _CONDITIONS:
            if name != condition and name.rstrip("s") == condition.rstrip("s"):
                return f" (did you mean {condition}=?)"
    return ""
