"""Sub-agents: `agent.as_tool()` runs an agent as a tool of another, its run a child of the caller's."""

from __future__ import annotations

import asyncio
import inspect
import logging
from typing import Any

import pytest
from pydantic import BaseModel

from middleware import log, pseudonymize, redact
from onion import Agent, Message, ModelCall, ModelResponse, Run, Tool, ToolThreads, Usage, tool
from onion._tool_sources import ToolSource
from onion.stores import MemoryStore
from onion.testing import FunctionModel, ScriptedModel, call


def costly(text: str) -> ModelResponse:
    return ModelResponse(Message.assistant(text), Usage(input_tokens=100, output_tokens=10, requests=1))


async def test_a_sub_agent_answers_as_a_tool_and_its_usage_is_added_to_the_parents() -> None:
    child_model = FunctionModel(lambda c: costly(f"researched: {c.messages[-1].text}"))
    researcher = Agent(child_model, name="researcher", instructions="Find facts.\nBe brief.")
    parent_model = ScriptedModel([[call("researcher", task="population of Oslo")], "Oslo has 700k people"])
    agent = Agent(parent_model, tools=[researcher.as_tool()])

    result = await agent.run("How many people live in Oslo?")

    assert result.output == "Oslo has 700k people"
    offered = parent_model.requests[0].tools[0]
    assert (offered.name, offered.description) == ("researcher", "Ask the researcher agent. Find facts.")
    assert list(offered.parameters["properties"]) == ["task"]
    assert result.messages[2].text == "researched: population of Oslo"
    assert result.usage == Usage(input_tokens=100, output_tokens=10, requests=3)


async def test_as_tool_takes_a_name_and_a_description() -> None:
    helper = Agent(ScriptedModel([]), name="helper")
    made = helper.as_tool(name="ask_expert", description="Ask an expert.")
    assert (made.name, made.description) == ("ask_expert", "Ask an expert.")


async def test_cancelling_the_parent_run_cancels_the_child_runs_model_call() -> None:
    started, cancelled = asyncio.Event(), asyncio.Event()

    async def never_answers(call_: ModelCall) -> str:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "unreachable"

    child = Agent(FunctionModel(never_answers), name="slow")
    agent = Agent(ScriptedModel([[call("slow", task="take forever")], "never"]), tools=[child.as_tool()])
    run = asyncio.ensure_future(agent.run("go"))
    async with asyncio.timeout(5):
        await started.wait()
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run
        await cancelled.wait()


@pytest.mark.parametrize("inherit", [False, True])
async def test_the_parents_log_sees_the_childs_calls_only_with_inherit(
    inherit: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """With inherit=True the child runs through the parent's stack (outermost) and its own."""
    caplog.set_level(logging.INFO, logger="parent")
    own: list[str] = []

    async def child_layer(call_: ModelCall, call_next: object) -> object:
        own.append("child layer")
        return await call_next(call_)  # type: ignore[operator]

    child = Agent(ScriptedModel(["child answer"]), name="child", middleware=[child_layer])
    agent = Agent(ScriptedModel([[call("child", task="t")], "done"]), tools=[child.as_tool(inherit=inherit)])
    agent.use(log("parent"))

    await agent.run("go")

    records = [(r.__dict__["kind"], r.__dict__["what"]) for r in caplog.records]
    assert own == ["child layer"]
    assert [kind for kind, _ in records].count("model") == (3 if inherit else 2)
    assert (("run", "child") in records) is inherit
    assert ("tool", "child") in records


async def test_with_tracing_the_child_run_nests_under_the_parents_tool_call() -> None:
    from onion import tracing

    child = Agent(ScriptedModel(["child answer"]), name="child")
    agent = Agent(ScriptedModel([[call("child", task="t")], "done"]), tools=[child.as_tool()], name="parent")
    with tracing.capture() as trace:
        await agent.run("go")
    lines = str(trace).splitlines()
    tool_line = next(i for i, line in enumerate(lines) if "tool child(task='t')" in line)
    assert "run child" in lines[tool_line + 1]
    assert lines[tool_line + 1].index("run child") > lines[tool_line].index("tool child")


class Finding(BaseModel):
    text: str


class NoTools(ToolSource):
    async def list_tools(self, run: Run | None) -> list[Tool]:
        return []


@tool
def lookup(query: str) -> str:
    """Look something up."""
    return query


async def test_a_sub_agent_with_inherit_keeps_every_setting_of_the_agent() -> None:
    """Run through the parent's stack, the child keeps each constructor setting (its store too: the run is journaled).

    Every parameter of `Agent(...)` gets a value other than its default
    here; a new parameter fails this test until it is given one too.
    """
    own: list[str] = []

    async def child_layer(call_: ModelCall, call_next: object) -> object:
        own.append("child layer")
        return await call_next(call_)  # type: ignore[operator]

    store = MemoryStore()
    child_model = ScriptedModel([Finding(text="found")])
    given: dict[str, Any] = {
        "model": child_model,
        "tools": [lookup, NoTools()],
        "instructions": "Find facts.",
        "middleware": [child_layer],
        "name": "researcher",
        "max_steps": 7,
        "parallel_tools": False,
        "settings": {"temperature": 0.25},
        "checked": not Agent(child_model).checked,  # the other way than the default
        "store": store,
        "lease": 12.0,
        "tool_threads": ToolThreads(2),
        "output_type": Finding,
        "output_retries": 5,
        "state_key": b"signs paused runs",
        "state_ttl": 60.0,
    }
    parameters = inspect.signature(Agent.__init__).parameters
    assert set(parameters) - {"self"} == set(given), "give each new Agent parameter a non-default value here"
    assert all(value != parameters[name].default for name, value in given.items())
    child = Agent(given.pop("model"), **given)
    parent = Agent(ScriptedModel([[call("researcher", task="look")], "done"]), tools=[child.as_tool(inherit=True)])

    assert (await parent.run("go")).output == "done"

    derived = child_model.requests[0].run.agent
    assert derived is not child and derived.model is child.model and own == ["child layer"]
    assert (derived.tools, derived.tool_sources) == (child.tools, child.tool_sources)
    for name in set(given) - {"tools", "middleware"}:
        assert getattr(derived, name) == getattr(child, name), name
    assert [record.agent for record in await store.runs()] == ["researcher"]


async def test_a_sub_agents_model_gets_placeholders_not_the_values_the_parents_pseudonymize_hides() -> None:
    """Without inherit: the task, restored to real values for the tool call, is hidden again before the child's
    model reads it; the child's tool gets the real value; the parent's model reads the child's answer hidden."""
    sent: list[str] = []

    @tool
    def send(to: str) -> str:
        """Send a mail."""
        sent.append(to)
        return f"sent to {to}"

    child_model = ScriptedModel([[call("send", to="<EMAIL_1>")], "Mailed <EMAIL_1>."])
    child = Agent(child_model, tools=[send], name="mailer")
    parent_model = ScriptedModel([[call("mailer", task="Mail <EMAIL_1> the invoice")], "done"])
    parent = Agent(parent_model, tools=[child.as_tool()]).use(pseudonymize)

    assert (await parent.run("Please mail ada@example.com the invoice")).output == "done"

    child_saw = [message.text for request in child_model.requests for message in request.messages]
    assert "Mail <EMAIL_1> the invoice" in child_saw and "ada@example.com" not in str(child_saw)
    assert sent == ["ada@example.com"]
    assert parent_model.requests[1].messages[-1].text == "Mailed <EMAIL_1>."


async def test_a_sub_agents_model_calls_go_through_the_parents_redact_but_not_its_other_layers(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Without inherit: a secret the child's tool returns is redacted before the child's model reads it; the
    parent's `log` still sees only the parent's own calls."""
    caplog.set_level(logging.INFO, logger="parent")

    @tool
    def read_config() -> str:
        """Read the configuration."""
        return "token: sk-proj-abcdefghijklmnopqrstuvwxyz0123456789"

    child_model = ScriptedModel([[call("read_config")], "configured"])
    child = Agent(child_model, tools=[read_config], name="admin")
    parent = Agent(ScriptedModel([[call("admin", task="check the config")], "ok"]), tools=[child.as_tool()])
    parent.use(log("parent"), redact)

    await parent.run("go")

    assert "sk-proj" not in str([m.text for m in child_model.requests[1].messages])
    assert "[REDACTED]" in child_model.requests[1].messages[-1].text
    assert [r.__dict__["kind"] for r in caplog.records].count("model") == 2
