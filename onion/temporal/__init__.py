"""onion on Temporal: `agent.run(...)` inside a workflow, each model call and tool call an activity.

Install with `pip install 'onion[temporal]'`. See docs/temporal.md.
"""

from __future__ import annotations

from .._exports import export
from ._approvals import WaitingCall, decide, pending, run
from ._determinism import NotDeterministic
from ._events import events, follow
from ._options import ActivityOptions
from ._plugin import OnionPlugin

__all__ = [
    "ActivityOptions",
    "NotDeterministic",
    "OnionPlugin",
    "WaitingCall",
    "decide",
    "events",
    "follow",
    "pending",
    "run",
]

export(globals())
