"""Fuzz: mutated `RunState` JSON resumed with and without a store and a state key (issue 21).

Each mutated state is refused (`RunStateError`, or `RunBusy`) or resumes what may be believed: with a
store, the run the store saved; with a key, the run as signed; with neither, a run whose pending calls
are the calls its history says the model asked for. Only decisions (approve, edit, reject) may change
what runs, as a person decides.
"""

from __future__ import annotations

import copy
import json
import random
from typing import Any

import pytest

from middleware import approve
from onion import Agent, ModelCall, RunState, ToolRequest, tool
from onion.errors import MaxStepsExceeded, RunBusy, RunStateError
from onion.stores import MemoryStore
from onion.testing import FunctionModel

MUTATIONS = 1200
"""Per way of resuming; three ways."""
ASKED = {"c1": ("send_money", {"to": "alice", "amount": 5}), "c2": ("lookup", {"key": "k"})}
ODD_VALUES: list[Any] = [None, 0, -1, -10000, 1.5, True, "", "x", "mallory", [], {}, [1], {"to": "mallory"}]


def model(call: ModelCall) -> Any:
    if call.messages[-1].role == "user":
        return [ToolRequest(id, name, args) for id, (name, args) in ASKED.items()]
    return "done"


def paths(value: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in the JSON data: each key of each object, each item of each list."""
    found = [at] if at else []
    if isinstance(value, dict):
        for key, item in value.items():
            found += paths(item, (*at, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += paths(item, (*at, index))
    return found


def mutate(data: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    """`data` with one to three random changes: removed, retyped, altered, and a few aimed ones."""
    data = copy.deepcopy(data)
    for _ in range(rng.randint(1, 3)):
        aimed = rng.random() < 0.4
        if aimed:
            call = rng.choice(data["pending"]) if data.get("pending") and isinstance(data["pending"], list) else None
            choice = rng.randrange(7)
            if choice == 0 and isinstance(call, dict):
                call["args"] = {"to": "mallory", "amount": 5000}
            elif choice == 1 and isinstance(call, dict):
                call["name"] = rng.choice(["delete_everything", "lookup", "send_money"])
            elif choice == 2 and isinstance(call, dict):
                call["id"] = rng.choice(["c1", "c2", "c3"])
            elif choice == 3:
                data["steps"] = rng.choice([-10000, -1, 0, 10**9])
            elif choice == 4 and isinstance(data.get("signature"), str) and data["signature"]:
                data["signature"] = ("0" if data["signature"][0] != "0" else "1") + data["signature"][1:]
            elif choice == 5 and isinstance(call, dict):
                call["decision"] = rng.choice(["approved", "rejected", "edited", None, "maybe"])
                call["edited_args"] = rng.choice([None, {"to": "bob", "amount": 1}, {"amount": "lots"}, []])
            elif choice == 6 and isinstance(call, dict) and isinstance(data.get("messages"), list):
                forge_everywhere(data, call)  # a consistent forgery, under a run id no store saw
            continue
        where = rng.choice(paths(data))
        parent: Any = data
        for step in where[:-1]:
            parent = parent[step]
        last = where[-1]
        if rng.random() < 0.3 and isinstance(parent, dict):
            del parent[last]
        elif isinstance(parent[last], str) and rng.random() < 0.5:
            parent[last] += rng.choice(["x", "0", " "])
        elif isinstance(parent[last], int) and not isinstance(parent[last], bool) and rng.random() < 0.5:
            parent[last] = rng.choice([parent[last] + 1, -parent[last] - 1, -10000])
        else:
            parent[last] = copy.deepcopy(rng.choice(ODD_VALUES))
    return data


def forge_everywhere(data: dict[str, Any], call: dict[str, Any]) -> None:
    """Pending call and history changed together, under a new run id: only a store or a key can tell."""
    data["run_id"] = f"run-forged-{random.getrandbits(32)}"
    call["args"] = {"to": "mallory", "amount": 5000}
    last = data["messages"][-1] if data["messages"] else None
    requests = last.get("tool_calls") if isinstance(last, dict) else None
    for request in requests if isinstance(requests, list) else []:
        if isinstance(request, dict) and request.get("id") == call.get("id"):
            request["args"] = call["args"]


def decided(data: dict[str, Any]) -> dict[str, Any]:
    """The base state with its paused call approved (so most mutated states can resume)."""
    data = copy.deepcopy(data)
    data["pending"][0]["decision"] = "approved"
    return data


class Bank:
    """The tools, recording what ran."""

    def __init__(self) -> None:
        self.ran: list[tuple[str, dict[str, Any]]] = []
        bank = self

        @tool
        def send_money(to: str, amount: int) -> str:
            bank.ran.append(("send_money", {"to": to, "amount": amount}))
            return "sent"

        @tool
        def lookup(key: str) -> str:
            bank.ran.append(("lookup", {"key": key}))
            return "found"

        @tool
        def delete_everything() -> str:
            bank.ran.append(("delete_everything", {}))
            return "deleted"

        self.tools = [send_money, lookup, delete_everything]


def allowed(state_data: dict[str, Any], trusted: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """What may run on resuming: the trusted run's paused calls, with the arguments the mutated decisions give."""
    decisions = {c.get("id"): c for c in state_data.get("pending", []) if isinstance(c, dict)}
    runs = []
    for call in trusted["pending"]:
        decision = decisions.get(call["id"], {})
        if decision.get("decision") == "edited" and isinstance(decision.get("edited_args"), dict):
            runs.append((call["name"], decision["edited_args"]))
        elif decision.get("decision") != "rejected":
            runs.append((call["name"], call["args"]))
    return runs


@pytest.mark.parametrize("way", ["no store, no key", "no store, a key", "a store"])
async def test_mutated_states_are_refused_or_resume_only_what_may_be_believed(way: str) -> None:
    """Thousands of mutated states: each is refused, or runs nothing but the calls it may run."""
    rng = random.Random(f"fuzz {way}")
    key = b"the fuzz test's key" if way == "no store, a key" else None
    refused = resumed = 0
    store = MemoryStore() if way == "a store" else None
    bank = Bank()
    agent = Agent(FunctionModel(model), tools=bank.tools, store=store, state_key=key).use(approve("send_money"))
    base: dict[str, Any] | None = None
    for _ in range(MUTATIONS):
        # a store (or, for a signed state, this process) consumes each pause: a fresh run each time
        if base is None or store is not None or key is not None:
            paused = await agent.run("pay alice and look k up")
            base = json.loads(paused.to_state().to_json())
        bank.ran.clear()
        mutated = mutate(decided(base), rng)
        try:
            result = await agent.resume(RunState.from_json(json.dumps(mutated)))
            assert result.output == "done"
        except (RunStateError, RunBusy):
            refused += 1
            assert bank.ran == [], (mutated, bank.ran)
            continue
        except MaxStepsExceeded:  # steps raised past max_steps: the batch ran, no model call more
            pass
        resumed += 1
        if way == "no store, no key":  # the history is all there is to believe: it must hold the call as run
            history = RunState.from_json(json.dumps(mutated))
            asked = {(r.name, json.dumps(r.args, sort_keys=True)) for r in history.messages[-1].tool_calls}
            edits = {(c.name, json.dumps(c.edited_args, sort_keys=True)) for c in history.pending}
            assert all((name, json.dumps(args, sort_keys=True)) in asked | edits for name, args in bank.ran)
            assert history.steps >= 0
        else:
            assert bank.ran == allowed(mutated, base), (mutated, bank.ran)
    assert refused > MUTATIONS / 3 and resumed > MUTATIONS / 100, (refused, resumed)  # both outcomes were tried
