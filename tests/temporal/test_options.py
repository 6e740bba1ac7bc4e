"""The activities' options are checked when they are made: heartbeats that cannot keep a live call alive, or a
heartbeat timeout that never comes before the call's own, are refused naming the option."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from onion.temporal import ActivityOptions, OnionPlugin


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"heartbeat_every": 8.0}, "heartbeat_every=8 s is more than half of heartbeat_timeout"),
        ({"heartbeat_every": 12.0}, "heartbeat_every=12 s"),
        ({"heartbeat_every": 0}, "heartbeat_every must be a positive number"),
        ({"heartbeat_timeout": timedelta(0)}, "heartbeat_timeout must be longer than zero"),
        (
            {"start_to_close_timeout": timedelta(seconds=5)},
            "heartbeat_timeout=0:00:10 is longer than start_to_close_timeout=0:00:05",
        ),
    ],
)
def test_options_whose_heartbeats_cannot_work_are_refused_naming_them(options: dict[str, Any], named: str) -> None:
    """Refused when the options are made, before any plugin or worker: the message names the option."""
    with pytest.raises(ValueError, match="ActivityOptions") as refused:
        OnionPlugin(options=ActivityOptions(**options))
    assert named in str(refused.value)


def test_the_defaults_and_short_heartbeats_are_accepted() -> None:
    """10 s heartbeat timeout beaten every 2 s (the default), and the crash tests' 2 s beaten every 0.3 s."""
    ActivityOptions()
    ActivityOptions(heartbeat_timeout=timedelta(seconds=2), heartbeat_every=0.3)
