"""The layers that cannot run in workflow code, refused at a run's first model call, naming the layer and why.

Workflow code must make the same decisions when Temporal replays it. A
layer is refused when it says so (`nondeterministic = "why"`: the built-in
`rate_limit`, `cache` and `concurrency` do, as layers say
`covers_sub_agents`), or when its own code reads the process's clock or
draws random numbers or ids (`time.time()`, `random.random()`,
`uuid.uuid4()`, `datetime.now()`, ...) instead of `onion.clock`'s. onion's
own modules are passed through Temporal's sandbox, so its checks never
see them: what this module reads is the layer's code (its methods and the
functions of its module they name), and the values it was configured with
(a `clock=time.monotonic`). A forbidden call the reading misses in a
module the sandbox checks (your workflow's) raises the sandbox's
`RestrictedWorkflowAccessError`, which `refused_by_sandbox` names the
layer for.
"""

from __future__ import annotations

import datetime
import dis
import functools
import linecache
import os
import random
import secrets
import time
import types
import uuid
import weakref
from collections.abc import Collection, Iterator
from typing import Any

from temporalio import worker as worker_package
from temporalio.worker.workflow_sandbox._restrictions import RestrictionContext

from ..errors import OnionError


class NotDeterministic(OnionError):
    """Code that runs inside a Temporal workflow cannot: a layer of the agent, or the top level of the workflow's
    module (see docs/temporal.md)."""


def _unproxied(value: Any) -> Any:
    """`value` itself where the workflow sandbox gave a module of your workflow a restricted stand-in for it
    (its `time`, its `random`: the sandbox's own proxy, unwrapped as the sandbox unwraps it)."""
    return RestrictionContext.unwrap_if_proxied(value)


def _identity(value: Any) -> object | None:
    """What a function is, the same however it was reached: a bound method (`datetime.datetime.now`, made anew
    at each access) by its object and name, else by the object's id; None for what is not callable."""
    value = _unproxied(value)
    if not callable(value):
        return None
    bound = getattr(value, "__self__", None)
    if bound is not None and not isinstance(bound, types.ModuleType):
        return (id(bound), getattr(value, "__name__", None))
    return id(value)


_FORBIDDEN_NAMES: dict[types.ModuleType, frozenset[str]] = {
    time: frozenset(
        {"time", "time_ns", "monotonic", "monotonic_ns", "perf_counter", "perf_counter_ns", "process_time"}
        | {"process_time_ns", "thread_time", "thread_time_ns", "localtime", "ctime", "sleep"}
    ),
    random: frozenset(name for name in dir(random) if callable(getattr(random, name)) and name[0].islower()),
    uuid: frozenset({"uuid1", "uuid4", "uuid7"}),
    os: frozenset({"urandom", "getrandom", "times"}),
    secrets: frozenset(name for name in dir(secrets) if name[0] != "_" and callable(getattr(secrets, name))),
}
"""Per module: its functions that read the clock or draw at random, which decide differently on replay."""

_FORBIDDEN: dict[object, str] = {
    _key: f"{module.__name__}.{name}"
    for module, names in _FORBIDDEN_NAMES.items()
    for name in names
    if (_key := _identity(getattr(module, name, None))) is not None
} | {
    _key: f"datetime.{kind.__name__}.{name}"
    for kind in (datetime.datetime, datetime.date)
    for name in ("now", "utcnow", "today")
    if (_key := _identity(getattr(kind, name, None))) is not None
}
"""Those functions by what they are (`_identity`), so a global bound to one (`from time import time`) or a
layer's setting (`clock=time.monotonic`) is known too."""


def _forbidden(value: Any) -> str | None:
    """The name of `value` if it is one of the functions that decide differently on replay, else None."""
    key = _identity(value)
    return None if key is None else _FORBIDDEN.get(key)


_CHECKED: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()
"""Agents whose layers passed, with the stack version they passed at: each is read once."""


def refuse_nondeterministic(agent: Any, registered: Collection[str] = ()) -> None:
    """Raises `NotDeterministic` naming the first layer of `agent` that cannot run in workflow code: it says it is
    `nondeterministic` (and why), its code reads the process's clock or draws random numbers or ids, or it asks
    an agent of its own that has no activities (not among the `registered` agents' names)."""
    version = agent.stack.version
    if _CHECKED.get(agent) == version:
        return
    for layer in agent.stack.layers():
        why = getattr(layer.source, "nondeterministic", None)
        if isinstance(why, str) and why:
            raise _refused(agent, layer.name, why)
        read = first_forbidden(layer.source)
        if read is not None:
            raise _refused(agent, layer.name, f"it reads {read} (use onion.clock, the workflow's inside one)")
        for inner in _agents_in(layer.source):
            if inner.name not in registered:
                raise _refused(agent, layer.name, unregistered(inner.name))
    _CHECKED[agent] = version


def unregistered(name: str) -> str:
    """Why a run of agent `name` cannot run in a workflow: its model calls have no activity on this worker."""
    return (
        f"it asks agent {name!r}, which has no activities on this worker (a layer's own agent: compact(summarize=), "
        "select_tools(by=)); give the layer an Agent of your own with a unique name (compact(summarize=Agent(model, "
        "name='summarizer'))) and pass that agent to OnionPlugin too"
    )


def _agents_in(source: Any) -> Iterator[Any]:
    """The agents a layer object holds (its attributes and slots, private ones too): the ones it asks itself."""
    from .._agent import Agent

    values = list(getattr(source, "__dict__", {}).values())
    for kind in type(source).__mro__:
        for slot in kind.__dict__.get("__slots__", ()):
            if isinstance(slot, str) and hasattr(source, slot):
                values.append(getattr(source, slot))
    yield from (value for value in values if isinstance(value, Agent))


def _refused(agent: Any, layer: str, why: str) -> NotDeterministic:
    return NotDeterministic(
        f"agent {agent.name}: layer {layer} cannot run inside a Temporal workflow: {why}, so a replay would "
        "decide differently. Leave it out of agents run on Temporal"
    )


def first_forbidden(source: Any) -> str | None:
    """What `source` (a layer: a function, a partial, or an object with `wrap_*` methods) reads that decides
    differently on replay (`"time.time"`), or None."""
    for value in _settings(source):
        if (name := _forbidden(value)) is not None:
            return name
    seen: set[int] = set()
    for function in _functions(source):
        found = _read_by(function, seen)
        if found is not None:
            return found
    return None


def _settings(source: Any) -> Iterator[Any]:
    """The values a layer object was configured with (its public attributes and slots), or a partial's
    arguments."""
    if isinstance(source, functools.partial):
        yield from source.args
        yield from source.keywords.values()
        return
    if isinstance(source, types.FunctionType | types.MethodType):
        return
    yield from (value for name, value in getattr(source, "__dict__", {}).items() if name[0] != "_")
    for kind in type(source).__mro__:
        for slot in kind.__dict__.get("__slots__", ()):
            if isinstance(slot, str) and slot[0] != "_" and hasattr(source, slot):
                yield getattr(source, slot)


def _functions(source: Any) -> Iterator[types.FunctionType]:
    """The functions of a layer's own code: a function layer itself, or every method of its classes that are not
    onion's (onion's own are read by tests/temporal/test_determinism.py)."""
    if isinstance(source, functools.partial):
        yield from _functions(source.func)
        return
    if isinstance(source, types.MethodType):
        source = source.__func__
    if isinstance(source, types.FunctionType):
        yield source
        return
    for kind in type(source).__mro__:
        if kind is object or kind.__module__.split(".")[0] in ("onion", "middleware"):
            continue
        for value in vars(kind).values():
            if isinstance(value, staticmethod | classmethod):
                value = value.__func__
            elif isinstance(value, property):
                value = value.fget
            if isinstance(value, types.FunctionType):
                yield value


def _read_by(function: types.FunctionType, seen: set[int]) -> str | None:
    """The first forbidden read in `function`, its nested functions and the functions of its module it calls."""
    if id(function.__code__) in seen:
        return None
    seen.add(id(function.__code__))
    names = function.__globals__
    for code in _codes(function.__code__):
        value: Any = None
        for instruction in dis.get_instructions(code):
            if instruction.opname == "LOAD_GLOBAL":
                value = _unproxied(names.get(instruction.argval, _MISSING))
            elif instruction.opname in ("LOAD_ATTR", "LOAD_METHOD") and isinstance(value, types.ModuleType | type):
                value = _unproxied(getattr(value, instruction.argval, _MISSING))
            else:
                value = None
                continue
            if (name := _forbidden(value)) is not None:
                return name
            if isinstance(value, types.FunctionType) and value.__module__ == function.__module__:
                found = _read_by(value, seen)
                if found is not None:
                    return found
    return None


_MISSING = object()


def _codes(code: types.CodeType) -> Iterator[types.CodeType]:
    """`code` and the code of the functions, lambdas and comprehensions inside it."""
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _codes(const)


def refused_by_sandbox(error: BaseException) -> NotDeterministic | None:
    """`NotDeterministic` naming the layer whose code Temporal's sandbox stopped (`error`, its
    `RestrictedWorkflowAccessError`), found in the traceback; None when no layer's code is in it."""
    frames = []
    tb = error.__traceback__
    while tb is not None:
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    agents = {
        id(agent): agent
        for frame in frames
        if frame.f_code.co_filename.startswith(_ONION) and (agent := _agent_of(frame.f_locals.get("self")))
    }
    for frame in reversed(frames):
        for agent in agents.values():
            for layer in agent.stack.layers():
                if frame.f_code in _codes_of(layer):
                    what = getattr(error, "qualified_name", None) or str(error)
                    return _refused(agent, layer.name, f"it reads {what} (use onion.clock, the workflow's inside one)")
    return None


_ONION = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
"""onion's own folder: the frames whose `self` may be an agent or its loop (another's may be the sandbox's)."""


def _agent_of(value: Any) -> Any:
    """The agent `value` is (an `onion.Agent`) or runs for (its loop), else None."""
    agent = getattr(value, "agent", value)
    return agent if hasattr(agent, "stack") and hasattr(agent, "name") and hasattr(agent, "tools") else None


def _codes_of(layer: Any) -> set[types.CodeType]:
    codes = {code for function in _functions(layer.source) for code in _codes(function.__code__)}
    for wrap in layer.wraps.values():
        function = getattr(wrap, "__func__", wrap)
        if isinstance(function, types.FunctionType):
            codes.update(_codes(function.__code__))
    return codes


_TEMPORAL = os.path.dirname(os.path.dirname(os.path.abspath(worker_package.__file__)))
"""temporalio's own folder: the sandbox's importer and proxies, whose frames are not the user's code."""


def refused_at_import(workflow: type, error: BaseException) -> NotDeterministic:
    """`NotDeterministic` naming the module and line where Temporal's sandbox stopped the import of `workflow`'s module
    (`error`, its `RestrictedWorkflowAccessError`: the module's own top level, or a module it imports, does what a
    workflow may not) and what to do instead."""
    found = None
    tb = error.__traceback__
    while tb is not None:
        name = tb.tb_frame.f_code.co_filename
        if not (name.startswith(_TEMPORAL) or name.startswith("<")):
            found = tb.tb_frame, tb.tb_lineno
        tb = tb.tb_next
    what = str(getattr(error, "qualified_name", "") or error).removesuffix(".__call__")
    owner = workflow.__module__
    if found is None:
        where = f"its module {owner}"
    else:
        frame, line = found
        module = frame.f_globals.get("__name__", "?")
        code = linecache.getline(frame.f_code.co_filename, line).strip()
        where = f"its module {owner}" if module == owner else f"module {module} (imported by its module {owner})"
        where += f" ({frame.f_code.co_filename}) line {line}" + (f", `{code}`" if code else "")
    return NotDeterministic(
        f"workflow {workflow.__name__}: {where}, calls {what} at import time, which Temporal's sandbox refuses (it "
        "imports the workflow's module again for every workflow run, and the module's top level runs there too). "
        "Move it into a function, an activity or the worker's own module, or pass the module that does it through "
        'the sandbox (SandboxRestrictions.default.with_passthrough_modules(...)): docs/temporal.md, "The workflow '
        "module's own top level\""
    )
