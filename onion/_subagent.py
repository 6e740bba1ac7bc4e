"""Sub-agents: an agent called as a tool of another, its run a child of the caller's run."""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Annotated, Any, cast

from pydantic import Field

from ._calls import ToolCall
from ._results import ToolResult
from ._tools import Tool, render
from .errors import OnionError

if TYPE_CHECKING:
    from ._agent import Agent


class SubAgent:
    """Behind `agent.as_tool()`: `ask` runs `agent` on the task the calling model wrote.

    The child run lives inside the parent's tool call: cancelling the parent
    cancels it, its usage is added to the parent run's (also when it fails
    with a usage, as `MaxStepsExceeded`), and it runs through the parent
    agent's stack (outermost) as well as its own: the whole stack with
    `inherit`, else only its layers that say `covers_sub_agents` (the privacy
    layers `pseudonymize` and `redact`), so what the parent hides from its
    model stays hidden from the child's. A child run that read outside content
    answers with an untrusted result (`ToolResult.untrusted`).
    """

    __slots__ = ("_derived", "agent", "inherit")

    def __init__(self, agent: Agent[Any], inherit: bool) -> None:
        self.agent = agent
        self.inherit = inherit
        self._derived: weakref.WeakKeyDictionary[Agent[Any], tuple[int, Agent[Any]]] = weakref.WeakKeyDictionary()

    async def ask(
        self,
        task: Annotated[str, Field(description="What to ask this agent, with everything it needs to know")],
        call: ToolCall,
    ) -> Any:
        parent = call.run
        child = self._through(cast("Agent[Any]", parent.agent))  # a run of an agent tool runs on an Agent
        try:
            result = await child.run(task, principal=parent.principal)
        except OnionError as error:
            usage = getattr(error, "usage", None)
            if usage is not None:
                parent.usage.add(usage)
            raise
        parent.usage.add(result.usage)
        if result.paused:
            raise OnionError(
                f"sub-agent {self.agent.name} paused for approval of {[p.name for p in result.pending]}; "
                "a sub-agent run cannot pause: approve its calls in the parent instead"
            )
        if any(message.untrusted for message in result.messages):  # it read outside content: so does its answer
            return ToolResult(render(result.output), value=result.output, untrusted=True)
        return result.output

    def _through(self, parent: Agent[Any]) -> Agent[Any]:
        """The child agent with the parent's stack (or its layers covering sub-agents) around its own.

        Built once per parent and version of its stack; the child agent
        itself when the parent has no such layer.
        """
        version = parent.stack.version
        built = self._derived.get(parent)
        if built is not None and built[0] == version:
            return built[1]
        if self.inherit:
            derived = self.agent._restacked(parent.stack, self.agent.stack)
        else:
            own = {id(layer.source) for layer in self.agent.stack.layers()}
            covering = [
                layer
                for layer in parent.stack.layers()
                if getattr(layer.source, "covers_sub_agents", False) and id(layer.source) not in own
            ]
            derived = self.agent._restacked(*covering, self.agent.stack) if covering else self.agent
        self._derived[parent] = (version, derived)
        return derived


def agent_tool(agent: Agent[Any], name: str | None, description: str | None, inherit: bool) -> Tool:
    """`agent` as a `Tool` taking one `task` argument (see `Agent.as_tool`)."""
    if description is None:
        first = (agent.instructions or "").strip().splitlines()
        description = f"Ask the {agent.name} agent. {first[0] if first else ''}".strip()
    return Tool(SubAgent(agent, inherit).ask, name=name or agent.name, description=description)
