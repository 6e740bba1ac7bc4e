"""Sub-agents: an agent called as a tool of another, its run a child of the caller's run."""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import Field

from ._calls import ToolCall
from ._tools import Tool
from .errors import OnionError

if TYPE_CHECKING:
    from ._agent import Agent


class SubAgent:
    """Behind `agent.as_tool()`: `ask` runs `agent` on the task the calling model wrote.

    The child run lives inside the parent's tool call: cancelling the parent
    cancels it, its usage is added to the parent run's (also when it fails
    with a usage, as `MaxStepsExceeded`), and with `inherit` it runs through
    the parent agent's stack (outermost) as well as its own.
    """

    __slots__ = ("_derived", "agent", "inherit")

    def __init__(self, agent: Agent[Any], inherit: bool) -> None:
        self.agent = agent
        self.inherit = inherit
        self._derived: weakref.WeakKeyDictionary[Agent[Any], Agent[Any]] = weakref.WeakKeyDictionary()

    async def ask(
        self,
        task: Annotated[str, Field(description="What to ask this agent, with everything it needs to know")],
        call: ToolCall,
    ) -> Any:
        parent = call.run
        child = self._through(parent.agent) if self.inherit else self.agent
        try:
            result = await child.run(task)
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
        return result.output

    def _through(self, parent: Agent[Any]) -> Agent[Any]:
        """The child agent with the parent's stack around its own (built once per parent, rebuilt as stacks change)."""
        derived = self._derived.get(parent)
        if derived is None:
            derived = self._derived[parent] = self.agent._restacked(parent.stack, self.agent.stack)
        return derived


def agent_tool(agent: Agent[Any], name: str | None, description: str | None, inherit: bool) -> Tool:
    """`agent` as a `Tool` taking one `task` argument (see `Agent.as_tool`)."""
    if description is None:
        first = (agent.instructions or "").strip().splitlines()
        description = f"Ask the {agent.name} agent. {first[0] if first else ''}".strip()
    return Tool(SubAgent(agent, inherit).ask, name=name or agent.name, description=description)
