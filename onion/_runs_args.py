"""What the arguments of `python -m onion runs` mean: the decisions they make, durations, JSON arguments."""

from __future__ import annotations

import argparse
import json
import re
from typing import Any

from ._durable.decisions import Decisions


def decisions_of(arguments: argparse.Namespace) -> Decisions:
    """What `runs approve` / `reject` / `edit` / `resolve` decide: `approve` naming no call approves every one."""
    action, rest = arguments.action, getattr(arguments, "approve_rest", False)
    if action == "approve":
        return Decisions(arguments.calls, approve_rest=rest or not arguments.calls)
    if action == "reject":
        return Decisions(reject=dict.fromkeys(arguments.calls, arguments.reason), approve_rest=rest)
    if action == "resolve":
        return Decisions(resolve={arguments.call: arguments.result}, approve_rest=rest)
    return Decisions(edit={arguments.call: arguments.args}, approve_rest=rest)


def duration(text: str) -> float:
    """`7d`, `12h`, `30m`, `45s` (or a number of seconds) in seconds; an error saying how to write one."""
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([smhdw]?)", text.strip())
    if match is None:
        raise argparse.ArgumentTypeError(f"{text!r}: give a number and a unit, e.g. 7d, 12h, 30m or 45s")
    return float(match[1]) * {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}[match[2]]


def arguments_json(text: str) -> dict[str, Any]:
    """`--args`: a JSON object of the call's arguments."""
    try:
        value = json.loads(text)
    except ValueError as error:
        example = '\'{"path": "a.txt"}\''
        raise argparse.ArgumentTypeError(f"not JSON ({error}): give an object, e.g. {example}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"give a JSON object of the call's arguments, not {type(value).__name__}")
    return value
