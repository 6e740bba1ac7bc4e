"""What crosses between workflow and activity: a model call, its response, a tool's answer, a model error.

All of it is plain JSON data, so any Temporal data converter carries it and
a workflow's history stays readable.
"""

from __future__ import annotations

from typing import Any

from temporalio.exceptions import ActivityError, ApplicationError

from .. import errors
from .._calls import ModelCall
from .._content import part_dict, part_from
from .._messages import Message, Usage
from .._output import output_schema
from .._results import ModelResponse, ToolResult
from .._run import Run


class ToolSpec:
    """A tool as a model sees it (name, description, JSON schema), standing in for the tool itself in an activity."""

    __slots__ = ("description", "name", "parameters")

    def __init__(self, name: str, description: str, parameters: dict[str, Any]) -> None:
        self.name = name
        self.description = description
        self.parameters = parameters


def call_data(call: ModelCall, model: str) -> dict[str, Any]:
    """The request as the model reads it: which model, the messages, tools, settings and the output type's schema."""
    output = None if call.output_type is str else output_schema(call.output_type)
    return {
        "model": model,
        "messages": [message.to_dict() for message in call.messages],
        "tools": [{"name": t.name, "description": t.description, "parameters": t.parameters} for t in call.tools],
        "settings": call.settings,
        "output": None if output is None else {"name": output.name, "schema": output.schema},
    }


def call_from(data: dict[str, Any], run: Run, model: Any, output_type: Any) -> ModelCall:
    """The `ModelCall` that `call_data` describes, for `model`, on a run standing in for the workflow's."""
    tools: list[Any] = [ToolSpec(t["name"], t["description"], t["parameters"]) for t in data["tools"]]
    call = ModelCall(run, [Message.from_dict(m) for m in data["messages"]], tools, model, data["settings"])
    call.output_type = output_type
    return call


def response_data(response: ModelResponse) -> dict[str, Any]:
    return {
        "message": response.message.to_dict(),
        "usage": response.usage.to_dict(),
        "stop_reason": response.stop_reason,
        "model": response.model,
    }


def response_from(data: dict[str, Any]) -> ModelResponse:
    return ModelResponse(
        Message.from_dict(data["message"]), Usage(**data["usage"]), data["stop_reason"], model=data.get("model")
    )


def result_data(result: ToolResult) -> dict[str, Any]:
    """A tool's answer as data; `"untrusted": true` for outside content (`ToolResult.untrusted`)."""
    content = result.content
    data: dict[str, Any] = {
        "content": content if isinstance(content, str) else [part_dict(part) for part in content],
        "is_error": result.is_error,
    }
    if result.untrusted:
        data["untrusted"] = True
    return data


def result_from(data: dict[str, Any], call_id: str) -> ToolResult:
    content = data["content"]
    parts = content if isinstance(content, str) else [part_from(part) for part in content]
    return ToolResult(
        content=parts, is_error=bool(data["is_error"]), call_id=call_id, untrusted=data.get("untrusted") is True
    )


def model_failure(error: errors.ModelError) -> ApplicationError:
    """A model error as an activity failure that Temporal does not retry: onion's own layers (`retry`) decide."""
    details = {"retryable": error.retryable, "retry_after": error.retry_after, "status_code": error.status_code}
    return ApplicationError(
        str(error), {**details, "provider": error.provider}, type=type(error).__name__, non_retryable=True
    )


def model_error_from(failure: ActivityError) -> BaseException:
    """The `onion.errors.ModelError` an activity failed with, as the model raised it; other failures as they are."""
    cause = failure.cause
    if not isinstance(cause, ApplicationError) or not cause.details:
        return failure
    kind = getattr(errors, cause.type or "", None)
    if not (isinstance(kind, type) and issubclass(kind, errors.ModelError)):
        return failure
    details = cause.details[0]
    return kind(
        cause.message,
        retryable=details["retryable"],
        retry_after=details["retry_after"],
        status_code=details["status_code"],
        provider=details["provider"],
    )
