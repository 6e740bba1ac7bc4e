"""What the server reads and answers: request bodies checked field by field, results and events as JSON.

A body that does not fit raises `Problem` (a status and a message naming
the field); the app answers it as `{"error": message}`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from onion import (
    Decisions,
    Event,
    ModelCallFinished,
    RunFinished,
    RunResult,
    TextDelta,
    ToolCallStarted,
    ToolResultEvent,
)
from onion.errors import DecisionRefused
from onion.providers._tool_arguments import MAX_DEPTH, json_nests_deeper

MAX_BODY = 1 << 20


class Problem(Exception):
    """An answer other than 200: `status` and a message saying what to fix."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(slots=True)
class RunRequest:
    """A `POST /runs` body."""

    input: str
    session: str | None
    state: dict[str, Any] | None


def parse_json(body: bytes) -> dict[str, Any]:
    """The body as a JSON object, else a 422 saying so."""
    if json_nests_deeper(body, MAX_DEPTH):
        raise Problem(422, f"the body nests too deep to read (over {MAX_DEPTH} levels): send a flatter JSON object")
    try:
        data = json.loads(body or b"null")
    except ValueError as error:
        raise Problem(422, f"the body is not valid JSON ({error}): send a JSON object") from None
    if data is None and not body.strip():
        raise Problem(422, 'the body is empty: send a JSON object, e.g. {"input": "..."}')
    if not isinstance(data, dict):
        raise Problem(422, f"the body must be a JSON object, not {type(data).__name__}")
    try:
        json.dumps(data, ensure_ascii=False).encode()
    except UnicodeEncodeError:
        raise Problem(422, "the body holds a lone UTF-16 surrogate (\\ud800-\\udfff): send valid Unicode") from None
    return data


def run_request(data: dict[str, Any]) -> RunRequest:
    """A `POST /runs` body checked: `input` a string, `session` a string or absent, `state` an object or absent."""
    unknown = sorted(set(data) - {"input", "session", "state"})
    if unknown:
        raise Problem(422, f"unknown field {unknown[0]!r}: a run takes 'input', 'session' and 'state'")
    given = data.get("input")
    if given is None or given == "":
        raise Problem(422, "field 'input' is required: the question for the agent, a non-empty string")
    if not isinstance(given, str):
        raise Problem(
            422, f"field 'input' must be a non-empty string (the question for the agent), not {type(given).__name__}"
        )
    session = data.get("session")
    if session is not None and not isinstance(session, str):
        raise Problem(422, "field 'session' must be a string (a session id)")
    state = data.get("state")
    if state is not None and not isinstance(state, dict):
        raise Problem(422, "field 'state' must be a JSON object (the run's starting run.state)")
    return RunRequest(given, session, state)


def decisions(data: dict[str, Any]) -> Decisions:
    """A decisions body checked (`Decisions.from_json`); one that does not fit, or decides nothing, is a 422."""
    try:
        return Decisions.from_json(data)
    except DecisionRefused as error:
        raise Problem(422, str(error)) from None


def result_json(result: RunResult[Any]) -> dict[str, Any]:
    """The answer of `POST /runs`: run id, status, output, pending calls and usage."""
    usage = result.usage
    return {
        "run_id": result.run_id,
        "status": result.status,
        "output": jsonable(result.output),
        "pending": [call.to_dict() for call in result.pending],
        "usage": {"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens, "requests": usage.requests},
    }


def jsonable(value: Any) -> Any:
    """A typed output (a pydantic model, a dataclass dumped by pydantic) as JSON data; text as it is."""
    if isinstance(value, str | int | float | bool | type(None) | list | dict):
        return value
    from pydantic import TypeAdapter

    return TypeAdapter(type(value)).dump_python(value, mode="json")


def event_name(event: Event) -> str:
    """`TextDelta` -> `text_delta`, `ToolResultEvent` -> `tool_result`."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", type(event).__name__).lower().removesuffix("_event")


def event_json(event: Event) -> dict[str, Any]:
    """An onion event's fields as JSON data (a run's last event: the answer of `POST /runs`)."""
    if isinstance(event, TextDelta):
        return {"text": event.text}
    if isinstance(event, ToolCallStarted):
        return {"id": event.id, "name": event.name, "args": event.args}
    if isinstance(event, ToolResultEvent):
        result = event.result
        return {"call_id": event.call_id, "name": event.name, "content": result.text, "is_error": result.is_error}
    if isinstance(event, ModelCallFinished):
        return {"text": event.response.message.text, "usage": event.usage.to_dict(), "cached": event.cached}
    if isinstance(event, RunFinished):
        return result_json(event.result)
    return {}
