"""The layers that cannot run in workflow code, refused at a run's first model call by what they declare.

Workflow code must make the same decisions when Temporal replays it. A
layer that reads the clock or shares state across runs in one process
decides differently on replay; it says so with an attribute,
`nondeterministic = "why"` (the built-in `rate_limit`, `cache` and
`concurrency` do), as layers say `covers_sub_agents`.
"""

from __future__ import annotations

from typing import Any

from ..errors import OnionError


class NotDeterministic(OnionError):
    """A layer of the agent cannot run inside a Temporal workflow (see docs/temporal.md)."""


def refuse_nondeterministic(agent: Any) -> None:
    """Raises `NotDeterministic` naming the first layer of `agent` that says it is `nondeterministic`, and why."""
    for layer in agent.stack.layers():
        why = getattr(layer.source, "nondeterministic", None)
        if why:
            raise NotDeterministic(
                f"agent {agent.name}: layer {layer.name} cannot run inside a Temporal workflow: {why}, so a replay "
                "would decide differently. Leave it out of agents run on Temporal"
            )
