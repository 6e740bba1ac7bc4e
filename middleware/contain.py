"""`contain`: once untrusted content is in a run, a sensitive call that it may drive waits for a person
(or is blocked); the calls the user's own content accounts for, and read-only tools, keep working."""

from __future__ import annotations

import weakref
from collections.abc import Mapping
from typing import Any, Literal

from onion import (
    Agent,
    Model,
    ModelCall,
    ModelNext,
    ModelResponse,
    Run,
    ToolCall,
    ToolNext,
    ToolResult,
    UntrustedSource,
    untrusted_sources,
)
from onion.tracing import note

from ._decisions import approved_here, ask, decided
from ._plan import plan_for
from ._provenance import Finding, Provenance, leaves
from ._quarantine import read_quarantined
from ._tool_matcher import Matcher, ToolMatcher

__all__ = ["contain"]

Action = Literal["pause", "block"]
ACTIONS = ("pause", "block")
KEY = "contain"
"""This layer's key in `run.private`: `{"vouched": [...], "plan": [...], "served": [...]}`: the pieces a person
approved in a contained call; with `plan`, the tools the run was asked to use before untrusted content arrived,
and the read-only calls it did not name (their answers are untrusted: served, not written outside)."""


class contain:
    """Contain what untrusted content may drive: `contain(sensitive=None, *, action="pause", plan=False, ...)`.

    Once the run's history holds untrusted content (`Message.untrusted`: results of `@tool(untrusted=True)`
    tools and of MCP tools), a call to a sensitive tool is contained when what drives it came from there: one
    of its string arguments carries something found only in untrusted content (an address, an id, a date, a run
    of five words), or, with `plan`, its tool was not asked for before that content arrived (see
    `docs/security.md`, "Prompt injection").
    `action="pause"` pauses the call for a person (its reason names the untrusted source: tool, call id, first
    words); `"block"` answers it with a reason the model reads. A sensitive call driven by trusted content runs
    (the user's own requests go on), and so does a call a person approved.

    `sensitive` is a matcher as `approve` takes (a name, a glob, a list, a regex, `fn(call) -> bool`);
    `None`: every tool not marked `@tool(read_only=True)`. A call that is not sensitive always runs; when it
    carries untrusted pieces (or, with `plan`, was not asked for), its result is marked untrusted too.

    `plan`: `True` asks the run's model, a `Model` or an `Agent` (under Temporal, one the plugin knows) asks that
    one, once per run when untrusted content first arrives: which of the offered tools the user's request
    needs, with only the trusted history before that content in view, no tools, answering `Plan(tools=[...])`.
    Without it (`False`) no model call is made and the layer wraps tool calls only. Per tool call it looks the
    call's arguments up in the history's texts, each message read once. Its state is the run's
    (`run.private["contain"]`).

    `quarantine`: `{tool name: schema}`; an untrusted result of a tool named there is read by a separate model call
    with no tools (`reader`, else the agent's model) answering in that schema, and only that typed answer (still
    untrusted) enters the conversation: the dual-LLM pattern.
    """

    __slots__ = ("_runs", "action", "name", "planner", "quarantine", "reader", "selects", "wrap_only")

    def __init__(
        self,
        sensitive: Matcher = None,
        *,
        action: Action = "pause",
        plan: bool | Model | Agent[Any] = False,
        quarantine: Mapping[str, Any] | None = None,
        reader: Model | Agent[Any] | None = None,
    ) -> None:
        if isinstance(sensitive, str) and sensitive in ACTIONS:
            raise TypeError(
                f"contain: {sensitive!r} names the tools to contain; the action is a keyword: "
                f"contain(action={sensitive!r})"
            )
        if action not in ACTIONS:
            raise ValueError(f"contain: action must be 'pause' or 'block', got {action!r}")
        if not (isinstance(plan, bool | Agent) or callable(getattr(plan, "request", None))):
            raise TypeError(f"contain: plan= takes True, False, a Model or an Agent, got {plan!r}")
        if quarantine is not None and not isinstance(quarantine, Mapping):
            raise TypeError(f"contain: quarantine= takes {{tool name: schema}}, got {quarantine!r}")
        for tool_name, schema in (quarantine or {}).items():
            _check_schema(tool_name, schema)
        if reader is not None and not quarantine:
            raise ValueError(
                "contain: reader= reads quarantined results; name the tools with quarantine={tool: schema}"
            )
        self.quarantine = dict(quarantine or {})
        self.reader = reader
        self.selects = None if sensitive is None else ToolMatcher(sensitive, "contain")
        self.action = action
        self.planner: bool | Model | Agent[Any] = plan
        self.wrap_only = ("model", "tool") if plan is not False else ("tool",)
        self.name = "contain" if sensitive is None else f"contain({self.selects!r})"
        self._runs: weakref.WeakKeyDictionary[Run, Provenance] = weakref.WeakKeyDictionary()

    async def wrap_model(self, call: ModelCall, call_next: ModelNext) -> ModelResponse:
        """With `plan`: the first model call after untrusted content arrived asks for the run's plan first."""
        run = call.run
        private = run.private.get(KEY)
        if private is not None and "plan" in private:
            return await call_next(call)
        provenance = self._provenance(run, private)
        if provenance.first_untrusted is not None:
            model: Any = call.model if self.planner is True else self.planner
            plan, failure = await plan_for(
                run, model, run.messages, provenance.first_untrusted, call.tools, own_from=run.session_from
            )
            kept = run.private.setdefault(KEY, {"vouched": []})
            kept["plan"] = plan
            if failure is not None:
                kept["plan_failed"] = failure
            note(f"contain: the plan made before untrusted content: {', '.join(plan) or 'no tool'}")
        return await call_next(call)

    async def wrap_tool(self, call: ToolCall, call_next: ToolNext) -> ToolResult:
        result = await self._decide(call, call_next)
        schema = self.quarantine.get(call.name) if self.quarantine else None
        if schema is None or not result.untrusted or result.is_error or call.pause_reason is not None:
            return result
        reader: Any = self.reader if self.reader is not None else getattr(call.run.agent, "model", None)
        return await read_quarantined(call.run, reader, call.name, schema, result)

    async def _decide(self, call: ToolCall, call_next: ToolNext) -> ToolResult:
        """The call run, paused or blocked, as the module docstring says."""
        tool = call.tool
        if tool is None:
            return await call_next(call)
        run = call.run
        private = run.private.get(KEY)
        provenance = self._provenance(run, private)
        if provenance.first_untrusted is None:
            return await call_next(call)
        plan = private.get("plan") if private is not None else None
        asked = plan is None or call.name in plan  # no plan yet: the model asked for it before it read the content
        selects = self.selects
        sensitive = not tool.read_only if selects is None else selects(call)
        finding = provenance.finding(call.args, delegated=sensitive and plan is not None and call.name in plan)
        if not sensitive:
            result = await call_next(call)
            if finding is not None:  # its answer may repeat what it was given
                result.untrusted = True
            elif not asked and not result.untrusted:  # it serves the content: what it answers is not the user's
                result.untrusted = True
                run.private.setdefault(KEY, {"vouched": []}).setdefault("served", []).append(call.id)
            return result
        if finding is None and asked:
            return await _let_through(
                call, call_next, "allowed after untrusted content: trusted content accounts for it"
            )
        if finding is not None and finding.delegated:
            return await _let_through(
                call,
                call_next,
                f"allowed after untrusted content: its argument {finding.argument} carries {_short(finding.piece)}, "
                "from a source the user named, under a name the user gave it",
            )
        if self.action == "pause" and approved_here(call, KEY):  # approved for another layer: not this reason
            kept = run.private.setdefault(KEY, {"vouched": []})
            if finding is not None and finding.piece not in kept["vouched"]:
                kept["vouched"].append(finding.piece)
            if not asked:
                kept["plan"].append(call.name)
            what = f"it carries {finding.piece!r}" if finding is not None else "it was not asked for"
            return await _let_through(call, call_next, f"approved by a person, though {what}")
        findings = [] if finding is None else _all_carried(provenance, call.args, finding)
        failed = private.get("plan_failed") if private is not None else None
        reason = contained_reason(call, findings, plan, untrusted_sources(run.messages), failed)
        text = f"contained ({'paused' if self.action == 'pause' else 'blocked'}): {reason}"
        note(text)
        decided(call, text)
        if self.action == "pause":
            run.private.setdefault(KEY, {"vouched": []})
            return ask(call, KEY, reason)
        blocked = call.block(f"{reason}. Ask the user to confirm it in their own words, or do without it")
        blocked.untrusted = True  # it quotes untrusted content: never trusted text a later call could lean on
        return blocked

    def _provenance(self, run: Run, private: dict[str, Any] | None) -> Provenance:
        """The run's index of its history, brought up to date (each message is indexed once)."""
        provenance = self._runs.get(run)
        if provenance is None:
            provenance = self._runs[run] = Provenance()
        if private is None:
            provenance.update(run.messages)
        else:
            provenance.update(run.messages, private.get("vouched", ()), private.get("served", ()))
        return provenance

    def __repr__(self) -> str:
        return f"<{self.name} action={self.action!r}{' plan' if self.planner is not False else ''}>"


async def _let_through(call: ToolCall, call_next: ToolNext, text: str) -> ToolResult:
    note(text)
    decided(call, text)
    return await call_next(call)


def contained_reason(
    call: ToolCall,
    findings: list[tuple[Finding, str]],
    plan: list[str] | None,
    sources: list[UntrustedSource],
    plan_failed: str | None = None,
) -> str:
    """Why `call` is contained: the untrusted source it follows (tool, call id, first words) and what it carries
    (each argument carrying a piece, the piece as the argument writes it), or that the plan made before that
    content did not ask for it (or could not be made)."""
    at = findings[0][0].source if findings else None
    source = next((s for s in sources if s.index == at), sources[0] if sources else None)
    more = len(sources) - 1
    also = f" (and {more} more untrusted result{'s' if more != 1 else ''})" if more > 0 else ""
    if findings:
        carried = " and ".join(f"{finding.argument} carries {_short(written)}" for finding, written in findings)
        why = f"its argument {carried}, found only there"
    elif plan_failed is not None:
        why = f"it was not asked for before that content arrived (the plan could not be made: {plan_failed})"
    else:
        why = f"it was not asked for before that content arrived (the plan then: {', '.join(plan or []) or 'none'})"
    return f"{call.name} follows untrusted content from {source}{also}; {why}"


def _all_carried(provenance: Provenance, args: dict[str, Any], first: Finding) -> list[tuple[Finding, str]]:
    """`first` and a piece from each other argument that carries one (three at most), as the arguments write
    them: what a person deciding the call needs to see, not only the first piece found."""
    found = [first]
    for name, value in args.items():
        if len(found) == 3:
            break
        if name != first.argument.partition(".")[0].partition("[")[0]:
            more = provenance.finding({name: value})
            if more is not None and not more.delegated:
                found.append(more)
    return [(finding, _as_written(args, finding)) for finding in found]


def _as_written(args: dict[str, Any], finding: Finding) -> str:
    """`finding.piece` (case-folded) as the argument holding it writes it."""
    for path, value in leaves(args, ""):
        if path == finding.argument:
            folded = value.casefold()
            at = folded.find(finding.piece)
            if at >= 0 and len(folded) == len(value):
                return value[at : at + len(finding.piece)]
    return finding.piece


def _check_schema(tool: str, schema: Any) -> None:
    """A quarantine schema pydantic can validate an answer against, or a `TypeError` naming the tool."""
    import pydantic

    try:
        pydantic.TypeAdapter(schema)
    except Exception as error:
        raise TypeError(
            f"contain: quarantine={{{tool!r}: {schema!r}}} is no schema pydantic can read ({type(error).__name__}): "
            "give a type, such as a pydantic model or a dataclass"
        ) from None


def _short(piece: str, limit: int = 60) -> str:
    text = repr(piece)
    return text if len(text) <= limit else text[: limit - 4] + "...'"
