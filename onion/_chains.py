"""An agent's chains: `Stack.compose` for each kind, through the tracer when tracing is on.

`onion.tracing` sets `active` when it turns on or off (replacing it, never
changing it); an agent whose chains were built for another `active` builds
them again on its next run, so a chain never checks per call whether
tracing is on. The core never imports tracing: it only calls what is here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._stack import Stack
    from .types import Handler, Kind, Tracer

active: Tracer | None = None
"""What tracing is on now (set by `onion.tracing`); None when it is off."""


def compose(stack: Stack, kind: Kind, terminal: Handler, checked: bool, tracer: Tracer | None) -> Handler:
    """The chain for `kind` around `terminal`; with `tracer`, traced as it says."""
    if tracer is None:
        return stack.compose(kind, terminal, checked=checked)
    return tracer.compose(stack, kind, terminal, checked)
