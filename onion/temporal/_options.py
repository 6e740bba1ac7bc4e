"""How onion's activities are scheduled: timeouts, heartbeats, retries."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from temporalio.common import RetryPolicy


@dataclass(frozen=True)
class ActivityOptions:
    """The options of every model and tool activity an `OnionPlugin` schedules.

    A worker that dies mid-call stops heartbeating; Temporal gives the call
    up after `heartbeat_timeout` (10 s by default). A model call, or a tool
    marked `@tool(idempotent=True)`, is then tried again under `retry`; any
    other tool is never started twice (one attempt): the model reads that it
    was interrupted. Model errors (`onion.errors.ModelError`) are not retried
    by Temporal: onion's `retry` layer, in the workflow, decides.
    """

    start_to_close_timeout: timedelta = timedelta(minutes=10)
    """The longest one model call or tool call may take."""
    heartbeat_timeout: timedelta = timedelta(seconds=10)
    """How long without a heartbeat before Temporal takes a call as lost (its worker died)."""
    heartbeat_every: float = 2.0
    """Seconds between the heartbeats a running activity sends (keep it well under `heartbeat_timeout`)."""
    retry: RetryPolicy = field(
        default_factory=lambda: RetryPolicy(initial_interval=timedelta(seconds=1), maximum_attempts=5)
    )
    """Retries of a lost model call or idempotent tool call (never of a non-idempotent tool)."""
    models: tuple[Any, ...] = ()
    """Models besides each agent's own that its calls may use (a `fallback` layer's), matched by `name`."""
    max_result_bytes: int | None = 1_000_000
    """The largest tool result (as JSON) kept in the history; a larger one is answered to the model as too large,
    with its size and this limit, and not retried. Temporal refuses payloads over 2 MB by default, and the result
    goes on into every later model call's input. None: no check (with Temporal's external storage configured)."""

    def __post_init__(self) -> None:
        """`ValueError` naming the option when the heartbeats cannot keep a live call from being given up."""
        every, beat, whole = self.heartbeat_every, self.heartbeat_timeout, self.start_to_close_timeout
        for name, value in (("heartbeat_timeout", beat), ("start_to_close_timeout", whole)):
            if value <= timedelta(0):
                raise ValueError(f"ActivityOptions: {name} must be longer than zero, got {value}")
        if not every > 0:
            raise ValueError(f"ActivityOptions: heartbeat_every must be a positive number of seconds, got {every!r}")
        if every > beat.total_seconds() / 2:
            raise ValueError(
                f"ActivityOptions: heartbeat_every={every:g} s is more than half of heartbeat_timeout={beat}: a call "
                "still running would be given up as lost between two heartbeats (Temporal also holds heartbeats "
                "back for up to 80% of the timeout); beat at most every heartbeat_timeout / 2"
            )
        if beat > whole:
            raise ValueError(
                f"ActivityOptions: heartbeat_timeout={beat} is longer than start_to_close_timeout={whole}: a worker "
                "that died would be noticed only when the call times out; make heartbeat_timeout the shorter"
            )
