"""`judge`: a check that asks a model whether the answer meets a rubric."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from .._agent import Agent
from .._model import Model
from ._checks import Verdict, _Named
from ._trajectory import Trajectory, input_text

INSTRUCTIONS = (
    "You grade an AI assistant's answer against a rubric. Read the question, the tools the assistant "
    "called and its answer, then decide whether the answer meets every point of the rubric. Be strict: "
    "an answer that meets the rubric only in part does not pass. Give the reason in one sentence."
)


class Grade(BaseModel):
    """What the judge answers."""

    passed: bool = Field(description="true when the answer meets the rubric")
    reason: str = Field(description="why, in one sentence")


class judge(_Named):
    """Passes when `model` (any onion model, or a model string) grades the answer as meeting `rubric`.

    The judge reads the question, the tool calls and the output, and answers
    a `Grade` (structured output). Its model call is made inside the case's
    cassette, so a replayed eval replays the grade too. `name` names the
    check in the report (default: `judge(<the rubric>)`).
    """

    def __init__(self, model: Model | str, rubric: str, *, name: str | None = None) -> None:
        self.rubric = rubric
        self.agent: Agent[Grade] = Agent(model, output_type=Grade, instructions=INSTRUCTIONS, name="judge")
        self.name = name or f"judge({rubric!r:.60})"

    async def __call__(self, trajectory: Trajectory) -> Verdict:
        grade = (await self.agent.run(self.prompt(trajectory))).output
        return Verdict(grade.passed, grade.reason)

    def prompt(self, trajectory: Trajectory) -> str:
        """The judge's question: the case's input, the calls made, the answer and the rubric."""
        calls = "\n".join(
            f"- {step.name}({step.args}) -> {step.outcome}: {step.result:.200}" for step in trajectory.steps
        )
        output: Any = trajectory.output
        answer = output.model_dump_json() if isinstance(output, BaseModel) else str(output)
        return (
            f"Question:\n{input_text(trajectory.case.input)}\n\n"
            f"Tool calls:\n{calls or '(none)'}\n\n"
            f"Answer:\n{answer}\n\n"
            f"Rubric:\n{self.rubric}"
        )
