"""The plan `contain(plan=...)` asks for: which tools the user's request needs, decided before untrusted content
is in view.

A separate model call with no tools: the trusted history before the first untrusted result (cut before the model
turn that asked for it, so what it sees ends with the user's words or trusted results), then one user message
listing the tools offered. It answers `Plan(tools=[...])`; names of tools not offered are dropped. A call that
fails, or an answer that does not validate, makes an empty plan: every sensitive call after untrusted content
is then contained (fail closed).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from onion import Agent, Message, Model, Run, Tool
from onion.scrub import scrub
from onion.tracing import note

ASK = (
    "Before you go on, list the tools you will call to do what was asked above, and no other: the tools "
    "asked for or needed to get there. Answer with their names only.\n\nTools:\n{tools}"
)


@dataclass
class Plan:
    """The tools a run was asked to use, named before untrusted content arrived."""

    tools: list[str] = field(default_factory=list)
    """The names of the tools the user's request needs."""


async def plan_for(
    run: Run,
    planner: Model | Agent[Any],
    messages: Sequence[Message],
    first_untrusted: int,
    tools: Sequence[Tool],
    *,
    own_from: int = 0,
) -> tuple[list[str], str | None]:
    """The plan's tool names, asked of `planner` (a model, or an agent of the caller's: under Temporal, one the
    plugin knows) with `messages` before `first_untrusted` in view (usage added to the run's), and None; `[]` and
    what failed when the call fails. A run on a session whose history held untrusted content before the run's own
    messages (from `own_from`) is planned with its own request in view too: its trusted messages up to its first
    model turn (what the model said after untrusted content, earlier, stays out of view)."""
    cut = first_untrusted
    while cut > 0 and messages[cut - 1].role != "assistant":
        cut -= 1
    trusted = [m for m in messages[: cut - 1 if cut else first_untrusted] if not m.untrusted]
    if own_from > first_untrusted:
        request = itertools.takewhile(lambda m: m.role != "assistant", messages[own_from:])
        trusted += [m for m in request if not m.untrusted and m.role != "tool"]
    offered = {tool.name: tool for tool in tools}
    listing = "\n".join(
        f"- {name}: {(tool.description or '').splitlines()[0] if tool.description else ''}"
        for name, tool in offered.items()
    )
    asked = [*trusted, Message.user(ASK.format(tools=listing))]
    if isinstance(planner, Agent):
        agent = planner
    else:  # the run's own model (plan=True) is asked as its agent: on Temporal, that agent's model activity
        own = planner is getattr(run.agent, "model", None)
        agent = Agent(planner, name=run.agent.name if own else "contain-plan", max_steps=1)
    try:
        result = await agent.run(asked, output_type=Plan)
    except Exception as error:
        if type(error).__name__ == "NotDeterministic":  # on Temporal, a planner no worker has activities for
            raise
        note(f"contain: the plan call failed ({type(error).__name__}): every sensitive call is contained")
        return [], f"{type(error).__name__}: {scrub(str(error))[:120]}"
    run.usage.add(result.usage)
    plan: Plan = result.output
    return [name for name in dict.fromkeys(plan.tools) if name in offered], None
