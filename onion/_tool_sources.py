"""Tools an agent gets from outside itself (MCP servers): listed when a run needs them, offered beside its own."""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING

from .errors import ToolNameClash

if TYPE_CHECKING:
    from ._run import Run
    from ._tools import Tool


class ToolSource(ABC):
    """Something that offers an agent tools it lists on demand, such as `onion.mcp.MCPServer`.

    Put one in `Agent(tools=[...])` beside plain tools. The agent asks for
    `list_tools(run)` before each model call (return the same list object
    while nothing changed) and closes the source in `agent.aclose()`.
    """

    @abstractmethod
    async def list_tools(self, run: Run | None) -> list[Tool]:
        """The tools offered now; `run` is the run asking (None: outside a run)."""

    async def aclose(self) -> None:  # noqa: B027 (optional: a source holding nothing need not override it)
        """Release what the source holds (a connection, a process); it may be used again afterwards."""

    def describe(self) -> str:
        """How errors name this source."""
        return repr(self)


class OfferedTools:
    """An agent's own tools combined with its sources' tools, rebuilt only when a source's list changes."""

    __slots__ = ("_lists", "by_name", "own", "sources", "tools")

    def __init__(self, own: list[Tool], sources: list[ToolSource]) -> None:
        self.own = own
        self.sources = sources
        self.tools = own
        """Every tool the model is offered: the agent's own first, then each source's in order."""
        self.by_name = {tool.name: tool for tool in own}
        if len(self.by_name) != len(own):
            names = [item.name for item in own]
            duplicates = sorted({name for name in names if names.count(name) > 1})
            raise ValueError(
                f"two tools share the name {', '.join(map(repr, duplicates))}: rename one (@tool(name=...))"
            )
        self._lists: list[list[Tool]] = []

    async def now(self, run: Run | None) -> list[Tool]:
        """The tools to offer now, listing each source (connected on first use).

        Raises `ToolNameClash` naming both owners when two tools share a name.
        """
        sources = self.sources
        if len(sources) == 1:
            lists = [await sources[0].list_tools(run)]
        else:  # connected side by side; the first failure cancels the others and is raised
            try:
                async with asyncio.TaskGroup() as group:
                    tasks = [group.create_task(source.list_tools(run)) for source in sources]
            except BaseExceptionGroup as failures:
                raise failures.exceptions[0] from None
            lists = [task.result() for task in tasks]
        if len(lists) != len(self._lists) or any(a is not b for a, b in zip(lists, self._lists, strict=True)):
            self._combine(lists)
        return self.tools

    def _combine(self, lists: list[list[Tool]]) -> None:
        owners: dict[str, str] = {tool.name: f"the agent's own tool {tool.name}" for tool in self.own}
        tools = list(self.own)
        for source, listed in zip(self.sources, lists, strict=True):
            for tool in listed:
                owner = owners.get(tool.name)
                if owner is not None:
                    raise ToolNameClash(
                        f"two tools are named {tool.name!r}: {owner}, and one of {source.describe()}; "
                        "give the server a prefix (prefix='...') so that its tool names differ"
                    )
                owners[tool.name] = f"one of {source.describe()}"
                tools.append(tool)
        self.tools, self.by_name, self._lists = tools, {tool.name: tool for tool in tools}, lists
