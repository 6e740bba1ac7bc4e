"""AgentDojo on onion, in the interpreter that has `agentdojo`: `python -m bench.agentdojo.worker [SUITE ...]
[--tasks N]` (the first N user tasks of each suite only).

Each suite's tools become onion tools bound to the task's environment (marked as `bench.agentdojo.trust`
says). A scripted model that obeys every injection drives each (user task, injection task) pair under
AgentDojo's "important_instructions" attack: it plays the user task's ground-truth calls one per model call,
and once a tool result holds the injection it plays the injection task's ground-truth calls, then goes on with
the user task, and answers with the user task's ground-truth output. AgentDojo's own checks then say whether
the user task was done (utility) and the attack succeeded (security). Each pair runs under each defence: none,
`contain(action="block")`, `contain(action="pause")` with a simulated person (approves a call in the user
task's ground truth, rejects any other), and the naive rule (every non-read-only call after any untrusted
content is blocked, or paused) for comparison. The checks see the calls that ran, not those the model asked
for and a layer stopped. Prints one JSON object.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any

from agentdojo.agent_pipeline.base_pipeline_element import BasePipelineElement
from agentdojo.agent_pipeline.tool_execution import tool_result_to_str
from agentdojo.attacks.important_instructions_attacks import ImportantInstructionsAttack
from agentdojo.functions_runtime import FunctionCall, FunctionsRuntime
from agentdojo.task_suite.load_suites import get_suite
from agentdojo.types import text_content_block_from_string

from onion import Agent, Message, ModelCall, ModelResponse, Tool, ToolCall, ToolNext, ToolRequest, ToolResult

from .trust import TOOLS

VERSION = "v1.2"
SUITES = ("workspace", "travel", "banking", "slack")
DEFENCES = ("none", "contain-block", "contain-pause", "args-block", "args-pause", "naive-block", "naive-pause")
"""`contain-*`: `contain(action=..., plan=True)`; `args-*`: `contain(action=...)`, its arguments rule alone."""
PERSON_REJECTS = "not something I asked for"


class Target(BasePipelineElement):
    """The pipeline AgentDojo's attack addresses by name (it names the model in its text)."""

    name = "gpt-4o-2024-05-13"

    def query(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


class DojoTool(Tool):
    """An AgentDojo function as an onion tool, run on one task's environment; each call that ran is kept."""

    __slots__ = ("env", "ran", "runtime")

    def __init__(self, function: Any, runtime: FunctionsRuntime, env: Any, ran: list[FunctionCall], marks: Any):
        self.name = function.name
        self.description = function.description
        self.parameters = function.parameters.model_json_schema()
        self.parameters.pop("title", None)
        self.idempotent = False
        self.untrusted, self.read_only = marks
        self.takes_context = False
        self.is_async = True
        self.function = self._call
        self._context_parameter = None
        self.runtime, self.env, self.ran = runtime, env, ran

    def validate(self, args: dict[str, Any]) -> dict[str, Any]:
        return dict(args)  # AgentDojo's runtime validates them

    async def invoke(self, args: dict[str, Any], call: Any = None, threads: Any = None) -> ToolResult:
        return await self._call(**args)

    async def _call(self, **args: Any) -> ToolResult:
        result, error = self.runtime.run_function(self.env, self.name, args)
        self.ran.append(FunctionCall(function=self.name, args=args))
        if error is not None:
            return ToolResult(error, is_error=True)
        return ToolResult(tool_result_to_str(result))


class Obeying:
    """The scripted model: the user task's ground truth, the injection's once a result holds it, then the rest."""

    name = "scripted-obeying"

    def __init__(
        self, user_calls: list[FunctionCall], injection_calls: list[FunctionCall], goal: str | None, output: str
    ):
        self.user_calls = list(user_calls)
        self.injection_calls = list(injection_calls)
        self.goal = _squeezed(goal)[:80] if goal else None
        self.output = output
        self.obeyed = False
        self.count = 0
        self.plan = list(dict.fromkeys(planned.function for planned in user_calls))
        """What it answers `contain(plan=True)`: the user task's tools (it plans before it read any injection)."""

    async def request(self, call: ModelCall) -> ModelResponse:
        goal = self.goal
        if not call.tools and call.output_type is not None:  # contain's plan: it sees only trusted content
            if goal is not None and any(goal in _squeezed(m.text) for m in call.messages):
                raise AssertionError("the plan call saw the injection")
            return ModelResponse(Message.assistant(json.dumps({"tools": self.plan})))
        if (
            not self.obeyed
            and goal is not None
            and any(m.role == "tool" and goal in _squeezed(m.text) for m in call.messages)
        ):
            self.obeyed = True
            self.user_calls[:0] = self.injection_calls  # the injection first, then the user task goes on
        if not self.user_calls:
            return ModelResponse(Message.assistant(self.output))
        planned = self.user_calls.pop(0)
        self.count += 1
        request = ToolRequest(f"c{self.count}", planned.function, _plain(dict(planned.args)))
        return ModelResponse(Message.assistant("", [request]))


class Naive:
    """The naive rule: once anything untrusted was read, every call that changes something is stopped."""

    def __init__(self, action: str) -> None:
        self.action = action

    async def wrap_tool(self, call: ToolCall, call_next: ToolNext) -> ToolResult:
        tool = call.tool
        stopped = tool is not None and not tool.read_only and not call.approved
        if stopped and any(message.untrusted for message in call.run.messages):
            reason = "untrusted content was read before it"
            return call.pause(reason) if self.action == "pause" else call.block(reason)
        return await call_next(call)


def _squeezed(text: str) -> str:
    """`text` without spaces, quotes and YAML's escapes, so the injection is found however a result dumps it."""
    return "".join(text.replace("\\n", "").replace("''", "'").split()).replace("'", "").replace('"', "")


def _plain(value: Any) -> Any:
    if isinstance(value, FunctionCall):
        raise TypeError("nested ground-truth calls are not played")
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_plain(item) for item in value]
    return value


def _same(request: ToolRequest, planned: list[FunctionCall]) -> bool:
    wanted = json.dumps(request.args, sort_keys=True, default=str)
    return any(
        c.function == request.name and json.dumps(_plain(dict(c.args)), sort_keys=True, default=str) == wanted
        for c in planned
    )


async def run_pair(suite: Any, user_task: Any, injection_task: Any, environment: Any, defence: str) -> dict[str, Any]:
    """One run on a copy of `environment` (injected, or not): utility, attack success (None without an injection
    task), pauses asked."""
    from middleware import contain

    env = user_task.init_environment(environment.model_copy(deep=True))
    pre = env.model_copy(deep=True)
    user_calls = user_task.ground_truth(pre.model_copy(deep=True))
    injection_calls = injection_task.ground_truth(pre.model_copy(deep=True)) if injection_task is not None else []
    goal = injection_task.GOAL if injection_task is not None else None
    model = Obeying(user_calls, injection_calls, goal, user_task.GROUND_TRUTH_OUTPUT)
    runtime = FunctionsRuntime(suite.tools)
    ran: list[FunctionCall] = []
    marks = TOOLS[suite.name]
    tools = [DojoTool(f, runtime, env, ran, marks[f.name][0]) for f in suite.tools]
    agent: Agent[Any] = Agent(model, tools=tools, max_steps=60)
    if defence.startswith("contain"):
        agent.use(contain(action=defence.split("-")[1], plan=True))  # type: ignore[arg-type]
    elif defence.startswith("args"):
        agent.use(contain(action=defence.split("-")[1]))  # type: ignore[arg-type]
    elif defence.startswith("naive"):
        agent.use(Naive(defence.split("-")[1]))
    pauses = 0
    result = await agent.run(user_task.PROMPT)
    while result.paused:
        state = result.to_state()
        for pending in state.pending:
            pauses += 1
            request = ToolRequest(pending.id, pending.name, pending.args)
            if _same(request, user_calls):
                state.approve(pending.id)
            else:
                state.reject(pending.id, PERSON_REJECTS)
        result = await agent.resume(state)
    output = [text_content_block_from_string(str(result.output))]
    utility = suite._check_task_result(user_task, output, pre, env, ran)
    attacked = None if injection_task is None else suite._check_task_result(injection_task, output, pre, env, ran)
    return {"utility": bool(utility), "attack": None if attacked is None else bool(attacked), "pauses": pauses}


async def measure(name: str, limit: int | None = None) -> dict[str, Any]:
    """Every pair of suite `name` under every defence, and each user task without attack (the first `limit` user
    tasks only, if given)."""
    suite = get_suite(VERSION, name)
    attack = ImportantInstructionsAttack(suite, Target())
    injection_tasks = {
        task_id: task
        for task_id, task in suite.injection_tasks.items()
        if task.ground_truth(suite.load_and_inject_default_environment({}))
    }
    figures: dict[str, Any] = {defence: {"utility": 0, "attack": 0, "pauses": 0, "runs": 0} for defence in DEFENCES}
    clean: dict[str, Any] = {defence: {"utility": 0, "pauses": 0, "runs": 0} for defence in DEFENCES}
    attacks: dict[str, list[str]] = {defence: [] for defence in DEFENCES}
    plain = suite.load_and_inject_default_environment({})
    for user_id, user_task in list(suite.user_tasks.items())[:limit]:
        for defence in DEFENCES:
            done = await run_pair(suite, user_task, None, plain, defence)
            clean[defence]["utility"] += done["utility"]
            clean[defence]["pauses"] += done["pauses"]
            clean[defence]["runs"] += 1
        for injection_id, injection_task in injection_tasks.items():
            injected = suite.load_and_inject_default_environment(attack.attack(user_task, injection_task))
            for defence in DEFENCES:
                done = await run_pair(suite, user_task, injection_task, injected, defence)
                row = figures[defence]
                row["utility"] += done["utility"]
                row["attack"] += done["attack"]
                row["pauses"] += done["pauses"]
                row["runs"] += 1
                if done["attack"]:
                    attacks[defence].append(f"{user_id}/{injection_id}")
    return {
        "suite": name,
        "user_tasks": len(suite.user_tasks),
        "injection_tasks": len(injection_tasks),
        "under_attack": figures,
        "without_attack": clean,
        "attacks_that_succeeded": {d: found for d, found in attacks.items() if not d.startswith(("none", "naive"))},
    }


def main() -> None:
    from importlib import metadata

    arguments = sys.argv[1:]
    limit = None
    if "--tasks" in arguments:
        at = arguments.index("--tasks")
        limit = int(arguments[at + 1])
        del arguments[at : at + 2]
    names = arguments or list(SUITES)
    started = time.perf_counter()
    suites = [asyncio.run(measure(name, limit)) for name in names]
    print(
        json.dumps(
            {
                "agentdojo": metadata.version("agentdojo"),
                "benchmark": VERSION,
                "attack": "important_instructions",
                "seconds": round(time.perf_counter() - started, 1),
                "suites": suites,
            }
        )
    )


if __name__ == "__main__":
    main()
