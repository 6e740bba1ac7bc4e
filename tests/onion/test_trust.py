"""What a signed state is worth (issue 31, "Trust, on the one path"): keys long enough to sign, keys that roll,
and a decided signed state consumed once even where no store remembers it.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from middleware import approve
from onion import Agent, ModelCall, RunState, ToolRequest, tool
from onion._durable.trust import signing_keys
from onion.errors import BatchDecided, RunStateError
from onion.stores import MemoryStore, SQLiteStore
from onion.testing import FunctionModel

KEY = b"a key of 32 bytes, kept secret.."
OLD_KEY = "the key before it, also long enough"


def bank() -> tuple[Any, list[tuple[str, int]]]:
    sent: list[tuple[str, int]] = []

    @tool
    def send_money(to: str, amount: int) -> str:
        sent.append((to, amount))
        return f"sent {amount} to {to}"

    return send_money, sent


def pays_alice_and_bob(call: ModelCall) -> Any:
    """Asks for two payments in one batch; answers once it has their results."""
    if call.messages[-1].role == "user":
        return [
            ToolRequest("c1", "send_money", {"to": "alice", "amount": 5}),
            ToolRequest("c2", "send_money", {"to": "bob", "amount": 7}),
        ]
    return "done"


def payer(send_money: Any, **options: Any) -> Agent[Any]:
    return Agent(FunctionModel(pays_alice_and_bob), tools=[send_money], name="payer", **options).use(
        approve("send_money")
    )


async def decided(agent: Agent[Any]) -> RunState:
    """The state of a fresh run of `agent`, paused at its two payments, both approved, as JSON text carries it."""
    paused = await agent.run("pay alice and bob")
    assert paused.paused
    state = paused.to_state()
    state.approve_all()
    return RunState.from_json(state.to_json())


def again(state: RunState) -> RunState:
    """The same decided state, delivered once more (a queue's redelivery, an attacker's replay)."""
    return RunState.from_json(state.to_json())


# -- keys: long enough, from the agent or the environment, rolled -------------------------------------


@pytest.mark.parametrize("key", ["", b"", "short", b"15 bytes long..", [KEY, "short"], []])
def test_an_agent_refuses_a_state_key_too_short_to_sign_when_it_is_made(key: Any) -> None:
    """An unset variable read with a default (`state_key=""`) or any key under 16 bytes is refused at once."""
    with pytest.raises(ValueError, match=r"payer: state_key(\[1\])? is (\d+ bytes, too short to sign|an empty list)"):
        Agent(FunctionModel(pays_alice_and_bob), name="payer", state_key=key)


def test_a_key_of_16_bytes_or_more_is_taken_as_given() -> None:
    """A str key counts its UTF-8 bytes; bytes are kept as they are."""
    assert signing_keys("é" * 8) == (("é" * 8).encode(),)
    assert signing_keys(KEY) == (KEY,)
    assert signing_keys((KEY, OLD_KEY)) == (KEY, OLD_KEY.encode())


@pytest.mark.parametrize("value", ["", "too short"])
def test_an_onion_state_key_variable_too_short_to_sign_is_refused_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    """ONION_STATE_KEY set but empty (a secret missing from the deployment) or short: refused, not ignored."""
    monkeypatch.setenv("ONION_STATE_KEY", value)
    with pytest.raises(ValueError, match="ONION_STATE_KEY"):
        Agent(FunctionModel(pays_alice_and_bob), name="payer")
    with pytest.raises(ValueError, match="ONION_STATE_KEY"):
        signing_keys(None)
    monkeypatch.delenv("ONION_STATE_KEY")
    assert signing_keys(None) == ()


async def test_a_state_signed_with_the_old_key_resumes_on_an_agent_that_rolled_to_a_new_one() -> None:
    """`state_key=[new, old]` signs with the new key and believes states signed with either."""
    send_money, sent = bank()
    before = await decided(payer(send_money, state_key=OLD_KEY))
    rolled = payer(send_money, state_key=[KEY, OLD_KEY])
    assert (await rolled.resume(before)).output == "done" and len(sent) == 2
    after = await decided(rolled)
    with pytest.raises(RunStateError, match="signature"):
        await payer(send_money, state_key=OLD_KEY).resume(again(after))
    assert (await payer(send_money, state_key=KEY).resume(after)).output == "done" and len(sent) == 4


# -- a decided signed state is consumed once, even where no store remembers it -----------------------


async def test_after_its_store_purged_the_run_a_decided_state_runs_nothing_again(tmp_path: Path) -> None:
    """The run paused in a store: once the store forgot it (purge, `python -m onion runs purge`), the same
    decided state is refused, not adopted as a new run by its signature."""
    send_money, sent = bank()
    async with SQLiteStore(tmp_path / "runs.db") as store:
        agent = payer(send_money, store=store, state_key=KEY)
        state = await decided(agent)
        assert (await agent.resume(state)).output == "done" and len(sent) == 2
        with pytest.raises(BatchDecided):
            await agent.resume(again(state))
        time.sleep(0.01)
        assert await store.purge(older_than=0) > 0 and await store.run_record(state.run_id) is None
        with pytest.raises(RunStateError, match="paused in a store"):
            await agent.resume(again(state))
    assert len(sent) == 2


async def test_a_second_replica_with_its_own_store_and_the_same_key_runs_nothing_of_a_state_paused_in_the_first() -> (
    None
):
    send_money, sent = bank()
    first = payer(send_money, store=MemoryStore(), state_key=KEY)
    state = await decided(first)
    assert (await first.resume(state)).output == "done" and len(sent) == 2
    second = payer(send_money, store=MemoryStore(), state_key=KEY)
    with pytest.raises(RunStateError, match="paused in a store"):
        await second.resume(again(state))
    assert len(sent) == 2


async def test_a_storeless_copy_of_the_agent_runs_nothing_of_a_state_paused_in_a_store() -> None:
    send_money, sent = bank()
    agent = payer(send_money, store=MemoryStore(), state_key=KEY)
    state = await decided(agent)
    assert (await agent.resume(state)).output == "done" and len(sent) == 2
    with pytest.raises(RunStateError, match="paused in a store"):
        await payer(send_money, state_key=KEY).resume(again(state))
    with pytest.raises(RunStateError, match="paused in a store"):  # no key either: the state says where it lives
        await payer(send_money).resume(again(state))
    assert len(sent) == 2


async def test_a_state_paused_without_a_store_is_resumed_once_in_a_process() -> None:
    """No store anywhere: the process remembers the batches it resumed, for as long as their states are believed;
    another copy of the agent in the process, or one with a store, is refused the same decided state."""
    send_money, sent = bank()
    agent = payer(send_money, state_key=KEY)
    state = await decided(agent)
    assert (await agent.resume(state)).output == "done" and len(sent) == 2
    for other in (agent, payer(send_money, state_key=KEY), payer(send_money, state_key=KEY, store=MemoryStore())):
        with pytest.raises(BatchDecided):
            await other.resume(again(state))
    assert len(sent) == 2


async def test_a_resume_refused_before_anything_ran_leaves_the_state_resumable() -> None:
    """A state refused for what it is (an undecided call) is not consumed: decided, it resumes."""
    send_money, sent = bank()
    agent = payer(send_money, state_key=KEY)
    paused = (await agent.run("pay alice and bob")).to_state()
    paused.approve("c1")
    with pytest.raises(RunStateError, match="undecided"):
        await agent.resume(paused)
    paused.reject("c2", reason="not bob")
    assert (await agent.resume(paused)).output == "done" and sent == [("alice", 5)]


async def test_a_signed_state_older_than_the_agents_state_ttl_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """A state is believed for `state_ttl` seconds after it was signed: past it, in another process as much as in
    this one, it is refused; `state_ttl=None` believes it for ever."""
    send_money, sent = bank()
    state = await decided(payer(send_money, state_key=KEY, state_ttl=60))
    signed = time.time()
    monkeypatch.setattr(time, "time", lambda: signed + 61)
    with pytest.raises(RunStateError, match=r"signed .* ago.*state_ttl"):
        await payer(send_money, state_key=KEY, state_ttl=60).resume(again(state))
    with pytest.raises(RunStateError, match=r"state_ttl"):
        await payer(send_money, state_key=KEY, store=MemoryStore(), state_ttl=60).resume(again(state))
    assert sent == []
    assert (await payer(send_money, state_key=KEY, state_ttl=None).resume(state)).output == "done"
    assert len(sent) == 2


async def test_the_time_a_state_was_signed_and_where_it_lives_are_signed() -> None:
    """`signed_at` moved on, or `stored` taken off a state paused in a store: the signature no longer matches."""
    send_money, sent = bank()
    fresh = await decided(payer(send_money, state_key=KEY))
    assert fresh.signed_at is not None and not fresh.stored
    data = json.loads(fresh.to_json())
    data["signed_at"] = "2999-01-01T00:00:00.000Z"
    with pytest.raises(RunStateError, match="signature"):
        await payer(send_money, state_key=KEY).resume(RunState.from_json(json.dumps(data)))
    kept = await decided(payer(send_money, state_key=KEY, store=MemoryStore()))
    assert kept.stored
    data = json.loads(kept.to_json())
    data["stored"] = False
    with pytest.raises(RunStateError, match="signature"):
        await payer(send_money, state_key=KEY).resume(RunState.from_json(json.dumps(data)))
    assert sent == []


@pytest.mark.parametrize("ttl", [0, -1.0, float("nan")])
def test_a_state_ttl_that_is_not_a_positive_number_of_seconds_is_refused(ttl: float) -> None:
    with pytest.raises(ValueError, match="payer: state_ttl"):
        Agent(FunctionModel(pays_alice_and_bob), name="payer", state_ttl=ttl)


class WaitsInPlace:
    """A durable engine's boundary (as `onion.temporal`'s in a workflow): models and tools as they are, and a
    pause's decisions waited for in place, its own history keeping what went on."""

    def model(self, call: ModelCall) -> Any:
        return call.model

    async def tool(self, call: Any, invoke: Any) -> Any:
        return await invoke()

    async def paused(self, agent: Any, result: Any) -> Any:
        return result


async def test_inside_a_durable_engine_a_state_decided_after_a_long_wait_resumes_and_is_not_remembered(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A workflow takes its paused run's state before it waits (days, maybe) and resumes it in place on replay
    too: neither `state_ttl` nor the process's record of resumed states applies to it."""
    from onion._boundary import BOUNDARY

    send_money, sent = bank()
    agent = payer(send_money, state_key=KEY, state_ttl=60)
    state = await decided(agent)
    signed = time.time()
    monkeypatch.setattr(time, "time", lambda: signed + 3 * 86400)
    token = BOUNDARY.set(WaitsInPlace())
    try:
        assert (await agent.resume(state)).output == "done"
        assert (await agent.resume(again(state))).output == "done"  # a replay on the same worker
    finally:
        BOUNDARY.reset(token)
    assert len(sent) == 4
    with pytest.raises(RunStateError, match="state_ttl"):
        await agent.resume(again(state))
