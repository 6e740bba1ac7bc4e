"""Which layers may run in workflow code: each says so itself (`nondeterministic = "why"`), not its class name.

No Temporal server: `refuse_nondeterministic` is what the workflow's first model call runs.
"""

from __future__ import annotations

import inspect
from typing import Any

import audit_flows
import pytest

import middleware
from middleware import cache, rate_limit
from onion import Agent, ModelCall
from onion.temporal import NotDeterministic
from onion.temporal._determinism import refuse_nondeterministic
from onion.testing import FunctionModel


def agent_with(*layers: Any) -> Agent[str]:
    return Agent(FunctionModel(lambda call: "hi"), name="support").use(*layers)


class house_rate_limit(rate_limit):
    """A team's own rate limit, built on the built-in one."""


class wall_clock:
    """A layer of the user's that reads the time itself."""

    nondeterministic = "it stamps each request with the wall clock"

    async def wrap_model(self, ctx: ModelCall, call_next: Any) -> Any:
        return await call_next(ctx)


async def sampled(ctx: ModelCall, call_next: Any) -> Any:
    return await call_next(ctx)


sampled.nondeterministic = "it samples with random.random()"  # type: ignore[attr-defined]


@pytest.mark.parametrize("layer", [wall_clock(), sampled, house_rate_limit(rpm=60)])
def test_a_layer_that_declares_itself_nondeterministic_is_refused_naming_it_and_why(layer: Any) -> None:
    """A user's class or function, or a subclass of a built-in under its own name: what it declares decides."""
    why = layer.nondeterministic
    with pytest.raises(NotDeterministic, match=r"agent support: layer .* cannot run inside a Temporal workflow"):
        refuse_nondeterministic(agent_with(layer))
    with pytest.raises(NotDeterministic) as refused:
        refuse_nondeterministic(agent_with(layer))
    assert why in str(refused.value)


def test_the_built_in_families_refused_on_temporal_are_those_that_declare_it() -> None:
    """Every built-in layer class declaring `nondeterministic` is refused; the audited same-result ones are not."""
    declaring = {
        name
        for name, value in vars(middleware).items()
        if inspect.isclass(value) and getattr(value, "nondeterministic", None)
    }
    assert declaring == set(audit_flows.REFUSED) == {"rate_limit", "cache", "concurrency"}
    for agent in audit_flows.REFUSED.values():
        with pytest.raises(NotDeterministic):
            refuse_nondeterministic(agent)
    for agent in audit_flows.SAME.values():
        refuse_nondeterministic(agent)


def test_a_layer_named_like_a_built_in_but_declaring_nothing_runs() -> None:
    """A user's own class called `cache` that keeps nothing across runs is not refused for its name."""

    class cache_of_mine:
        async def wrap_model(self, ctx: ModelCall, call_next: Any) -> Any:
            return await call_next(ctx)

    cache_of_mine.__name__ = cache.__name__
    refuse_nondeterministic(agent_with(cache_of_mine()))
