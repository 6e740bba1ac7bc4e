"""The `final_answer` tool: structured output for a model or schema the API's native field cannot take.

The schema goes to the model as a tool's parameters; a call to that tool is
turned back into a final answer whose text is the arguments as JSON, which
the agent then validates like any structured answer.
"""

from __future__ import annotations

import json

from .._messages import Message
from .._results import ModelResponse

ANSWER_TOOL = "final_answer"
ANSWER_TOOL_DESCRIPTION = (
    "Give your final answer by calling this tool: its arguments are the answer. "
    "Call it once, after any other tools you need, and only then."
)


def answer_from_tool(response: ModelResponse) -> ModelResponse:
    """`response` with a `final_answer` call turned into the answer text.

    When the model called other tools in the same turn, the `final_answer`
    call is dropped: the other calls run and the model answers again.
    """
    calls = response.tool_calls
    answers = [request for request in calls if request.name == ANSWER_TOOL]
    if not answers:
        return response
    others = [request for request in calls if request.name != ANSWER_TOOL]
    if others:
        message = Message.assistant(response.text, others)
        stop = response.stop_reason
    else:
        answer = answers[-1]
        message = Message.assistant(answer.raw_args if answer.raw_args is not None else json.dumps(answer.args))
        stop = "end"
    message.meta = response.message.meta
    return ModelResponse(message, response.usage, stop, model=response.model, cached=response.cached, raw=response.raw)
