"""A workflow module whose own top level does what the sandbox refuses (`Path(__file__).resolve()`) is refused when the
worker is made, by onion's error naming the module, the line and what to do: not 40 lines of the sandbox's importer
ending in `RestrictedWorkflowAccessError`."""

from __future__ import annotations

import importlib
import sys
import traceback
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from temporalio.client import Client
from temporalio.worker import Worker

from onion.temporal import NotDeterministic, OnionPlugin

MODULE = '''"""A user's workflow module: it finds its folder at import time."""
from pathlib import Path

from temporalio import workflow

from onion import Agent
from onion.testing import FunctionModel

HERE = Path(__file__).resolve().parent

agent = Agent(FunctionModel(lambda call: "hi", name="greeter"), name="{name}")


@workflow.defn
class Greet:
    @workflow.run
    async def run(self, question: str) -> str:
        return (await agent.run(question)).output
'''


@pytest.fixture
def folder(tmp_path: Path) -> Iterator[Path]:
    """A folder on sys.path for the user's modules, taken off after the test with the modules imported from it."""
    sys.path.insert(0, str(tmp_path))
    before = set(sys.modules)
    yield tmp_path
    sys.path.remove(str(tmp_path))
    for name in set(sys.modules) - before:
        if name.startswith("my_"):
            del sys.modules[name]


@pytest.fixture
def flows(folder: Path) -> ModuleType:
    """The user's workflow module, imported (outside the sandbox: the worker's own import of it)."""
    name = f"my_flows_{uuid.uuid4().hex[:8]}"
    (folder / f"{name}.py").write_text(MODULE.format(name=name))
    return importlib.import_module(name)


async def test_a_workflow_module_resolving_its_path_at_import_is_refused_naming_the_module_and_line(
    temporal_address: str, flows: ModuleType
) -> None:
    """The worker is not made: the error names the module, its file and line 9 with its code, what the sandbox
    refused (pathlib.Path.resolve), and the fix; the whole traceback is a screenful, the sandbox's frames left out."""
    client = await Client.connect(temporal_address, plugins=[OnionPlugin(flows.agent)])
    with pytest.raises(RuntimeError) as raised:
        Worker(client, task_queue=f"q-{uuid.uuid4().hex}", workflows=[flows.Greet])
    refused = raised.value.__cause__
    assert isinstance(refused, NotDeterministic)
    text = str(refused)
    assert text.startswith(f"workflow Greet: its module {flows.__name__} ({flows.__file__}) line 9, ")
    assert "`HERE = Path(__file__).resolve().parent`" in text
    assert "calls pathlib.Path.resolve at import time" in text
    assert "Move it into a function" in text and "with_passthrough_modules" in text
    shown = "".join(traceback.format_exception(raised.value))
    assert "_importer.py" not in shown
    assert len(shown.splitlines()) < 30


async def test_a_module_the_workflow_module_imports_is_named_with_the_module_that_imports_it(
    temporal_address: str, folder: Path
) -> None:
    """The refused call is in a settings module the workflow module imports (`datetime.now()` at its top level): the
    error names that module and its line, and the workflow's module that imported it."""
    suffix = uuid.uuid4().hex[:8]
    (folder / f"my_settings_{suffix}.py").write_text("import datetime\n\nSTARTED = datetime.datetime.now()\n")
    flows = MODULE.format(name=f"my_flows_{suffix}").replace(
        "HERE = Path(__file__).resolve().parent", f"from my_settings_{suffix} import STARTED"
    )
    (folder / f"my_flows_{suffix}.py").write_text(flows)
    module = importlib.import_module(f"my_flows_{suffix}")
    client = await Client.connect(temporal_address, plugins=[OnionPlugin(module.agent)])
    with pytest.raises(RuntimeError) as raised:
        Worker(client, task_queue=f"q-{uuid.uuid4().hex}", workflows=[module.Greet])
    text = str(raised.value.__cause__)
    assert text.startswith(
        f"workflow Greet: module my_settings_{suffix} (imported by its module my_flows_{suffix}) "
        f"({folder / f'my_settings_{suffix}.py'}) line 3, `STARTED = datetime.datetime.now()`, "
        "calls datetime.datetime.now at import time"
    ), text
