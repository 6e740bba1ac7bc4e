"""The built-in layers that cannot run in workflow code, refused by name at a run's first model call.

Workflow code must make the same decisions when Temporal replays it. A
layer that reads the clock or shares state across runs in one process
decides differently on replay: `rate_limit` (token buckets in time),
`cache` (a hit depends on what else ran on this worker), `concurrency`
(slots shared by every run in the process).
"""

from __future__ import annotations

from typing import Any

from ..errors import OnionError

REFUSED = {
    "rate_limit": "its buckets refill with the clock",
    "cache": "a hit depends on what else ran on this worker",
    "concurrency": "its slots are shared by every run on this worker",
}


class NotDeterministic(OnionError):
    """A layer of the agent cannot run inside a Temporal workflow (see docs/temporal.md)."""


def refuse_nondeterministic(agent: Any) -> None:
    """Raises `NotDeterministic` naming the first layer of `agent` that cannot run in workflow code."""
    for layer in agent.stack.layers():
        kind = type(layer.source).__name__
        if kind in REFUSED and type(layer.source).__module__.startswith("middleware."):
            raise NotDeterministic(
                f"agent {agent.name}: layer {layer.name} ({kind}) cannot run inside a Temporal workflow: "
                f"{REFUSED[kind]}, so a replay would decide differently. Leave it out of agents run on Temporal"
            )
