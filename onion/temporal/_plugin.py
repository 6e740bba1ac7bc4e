"""`OnionPlugin`: onion's agents on a Temporal client and worker."""

from __future__ import annotations

import dataclasses
from typing import Any

from temporalio import worker
from temporalio.contrib.pydantic import PydanticPayloadConverter
from temporalio.converter import DataConverter, DefaultPayloadConverter
from temporalio.plugin import SimplePlugin
from temporalio.worker.workflow_sandbox import (
    RestrictedWorkflowAccessError,
    SandboxedWorkflowRunner,
    SandboxRestrictions,
)

from .._agent import Agent
from .._boundary import BOUNDARY
from ..clock import CLOCK
from ..errors import OnionError
from ._activities import agent_activities
from ._determinism import refused_at_import, refused_by_sandbox
from ._options import ActivityOptions
from ._workflow_side import WorkflowBoundary, WorkflowClock

PASSED_THROUGH = ("onion", "middleware", "pydantic", "pydantic_core", "tenacity", "anthropic", "openai", "httpx")
"""Modules the workflow sandbox shares with the worker instead of importing them again for each workflow."""


class OnionPlugin(SimplePlugin):
    """Runs `agents` on Temporal: pass it to `Client.connect(..., plugins=[...])` (the worker inherits it).

    It sets pydantic's payload converter in place of Temporal's default one
    (the client's codec, failure converter and external storage kept), registers each agent's activities
    (`<agent>.model`, `<agent>.tool.<tool>`) on every worker, lets onion's
    modules through the workflow sandbox, and makes `agent.run(...)` inside a
    workflow durable. Agent names must be unique. `options` sets timeouts,
    heartbeats and retries (`ActivityOptions`). With `waiting_attribute` (a Bool
    search attribute registered on the namespace), a workflow says whether a run
    of it waits for a person, so `temporal workflow list --query '<name> = true'`
    lists them.
    """

    def __init__(
        self, *agents: Agent[Any], options: ActivityOptions | None = None, waiting_attribute: str | None = None
    ) -> None:
        names = [agent.name for agent in agents]
        twice = sorted({name for name in names if names.count(name) > 1})
        if twice:
            raise ValueError(f"OnionPlugin: agent names must be unique, {twice} appear more than once; name them")
        self.agents = agents
        self.options = options or ActivityOptions()
        activities = [made for agent in agents for made in agent_activities(agent, self.options)]
        super().__init__(
            "onion.OnionPlugin",
            data_converter=with_pydantic_payloads,
            activities=activities,
            interceptors=[
                _BoundaryInterceptor(
                    self.options, {a.name: {t.name for t in a.tools} for a in agents}, waiting_attribute
                )
            ],
            workflow_runner=_passing_onion_through,
            workflow_failure_exception_types=[OnionError],
        )


def with_pydantic_payloads(given: DataConverter | None) -> DataConverter:
    """`given` with pydantic's payload converter in place of Temporal's default one, all else kept (the payload
    codec that encrypts, the failure converter, external storage); a payload converter of the user's own is kept
    too: what onion's activities carry is plain JSON, which any converter carries."""
    given = given or DataConverter.default
    if given.payload_converter_class is not DefaultPayloadConverter:
        return given
    return dataclasses.replace(given, payload_converter_class=PydanticPayloadConverter)


def _passing_onion_through(runner: worker.WorkflowRunner | None) -> worker.WorkflowRunner:
    if runner is None or isinstance(runner, SandboxedWorkflowRunner):
        if runner is None:
            return _Sandbox(restrictions=SandboxRestrictions.default.with_passthrough_modules(*PASSED_THROUGH))
        restrictions = runner.restrictions.with_passthrough_modules(*PASSED_THROUGH)
        return _Sandbox(restrictions=restrictions, runner_class=runner.runner_class)
    return runner


class _Sandbox(SandboxedWorkflowRunner):
    """Temporal's sandbox, passing onion through; a workflow module whose top level it refuses (when the worker is
    made, it imports the module to check it) is refused with `NotDeterministic` naming the module and line."""

    def prepare_workflow(self, defn: Any) -> None:
        try:
            super().prepare_workflow(defn)
        except RestrictedWorkflowAccessError as error:
            raise refused_at_import(defn.cls, error) from None  # the sandbox's importer frames say nothing more


class _BoundaryInterceptor(worker.Interceptor):
    """Sets onion's model and tool boundary to activities, and its clock to the workflow's, for the whole of each
    workflow run."""

    def __init__(self, options: ActivityOptions, tools: dict[str, set[str]], waiting_attribute: str | None) -> None:
        self.options = options
        self.tools = tools
        self.waiting_attribute = waiting_attribute

    def workflow_interceptor_class(
        self, input: worker.WorkflowInterceptorClassInput
    ) -> type[worker.WorkflowInboundInterceptor]:
        options, tools, attribute = self.options, self.tools, self.waiting_attribute

        class Inbound(worker.WorkflowInboundInterceptor):
            def init(self, outbound: worker.WorkflowOutboundInterceptor) -> None:
                super().init(outbound)
                # `pending` and `decide` answer from here on: an update can come in the workflow's first
                # activation, before its run starts (a worker replaying a workflow paused before any activity)
                self.boundary = WorkflowBoundary(options, tools, attribute)

            async def execute_workflow(self, input: worker.ExecuteWorkflowInput) -> Any:
                BOUNDARY.set(self.boundary)
                CLOCK.set(WorkflowClock())
                waiting = self.boundary.decisions
                waiting.started = True
                try:
                    return await super().execute_workflow(input)
                except RestrictedWorkflowAccessError as error:  # the sandbox stopped code of the workflow's
                    refused = refused_by_sandbox(error)
                    if refused is None:
                        raise
                    raise refused from error
                finally:
                    waiting.ended = True

        return Inbound
