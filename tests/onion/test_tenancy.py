"""Tenants kept apart: a principal of another tenant cannot list, decide, resume or recover a tenant's runs, nor
continue its sessions, on SQLite and on Redis; each refusal names nothing of the other tenant."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from forker import Forker

from middleware import approve
from onion import Agent, Decisions, Principal, ToolCall, tool
from onion._runs_cli import list_runs, show_run
from onion.errors import ForeignRun
from onion.stores import MemoryStore, RedisStore, SessionTenants, SQLiteStore, Store
from onion.testing import ScriptedModel, call

ALICE = Principal("u-42", tenant="acme", roles={"support"})
APPROVER = Principal("u-17", tenant="acme", roles={"approver"})
MALLORY = Principal("u-9", tenant="globex")
ASKED = "refund order 7 for jane.doe@example.com"
"""What acme's runs were asked: no refusal to globex may show it."""


def names_nothing_of_acme(error: BaseException) -> None:
    text = str(error)
    for leak in ("acme", ALICE.id, APPROVER.id, ASKED, "order 7", "jane"):
        assert leak not in text, f"{leak!r} in {text!r}"


@pytest.fixture(params=["sqlite", "redis"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    if request.param == "sqlite":
        async with SQLiteStore(tmp_path / "onion.db") as sqlite:
            yield sqlite
    else:
        namespace = f"t{uuid.uuid4().hex[:12]}"
        async with RedisStore(request.getfixturevalue("redis_url"), namespace=namespace) as redis:
            yield redis


refunded: list[int] = []


@tool
def refund(order: int, amount: int) -> str:
    """Refund an order."""
    refunded.append(order)
    return f"refunded {amount} on order {order}"


@pytest.fixture(autouse=True)
def no_refunds_yet() -> None:
    refunded.clear()


def refunds(store: Store, script: Sequence[Any]) -> Agent:
    return Agent(ScriptedModel(script), tools=[refund], name="refunds", store=store).use(approve("refund"))


class Crash(BaseException):
    """The worker dies inside the tool."""


async def crash(call_: ToolCall, call_next: Any) -> Any:
    raise Crash


async def test_a_tenants_runs_are_listed_for_it_alone_in_the_store_and_by_the_cli(store: Store) -> None:
    """`store.runs(tenant=...)` and `python -m onion runs --tenant` list one tenant's runs; another's sees none of
    them, and `tenant=None` only the runs for no tenant."""
    paused = await refunds(store, [[call("refund", order=7, amount=30)]]).run(ASKED, principal=ALICE)
    done = await Agent(ScriptedModel(["hi"]), name="refunds", store=store).run(ASKED, principal=ALICE)
    theirs = await Agent(ScriptedModel(["hello"]), name="refunds", store=store).run("hello", principal=MALLORY)
    nobodys = await Agent(ScriptedModel(["hey"]), name="refunds", store=store).run("hey")
    acme = {paused.run_id, done.run_id}
    assert {r.run_id for r in await store.runs(tenant="acme")} == acme
    assert [r.run_id for r in await store.runs(tenant="globex")] == [theirs.run_id]
    assert [r.run_id for r in await store.runs(tenant=None)] == [nobodys.run_id]
    assert len(await store.runs()) == 4
    assert all(r.tenant == "acme" for r in await store.runs(tenant="acme"))
    listed = await list_runs(store, tenant="globex")
    assert theirs.run_id in listed and not any(run_id in listed for run_id in acme)
    listed = await list_runs(store, tenant="acme")
    assert all(run_id in listed for run_id in acme) and theirs.run_id not in listed
    assert (await list_runs(store, tenant="initech")).startswith("no runs of tenant 'initech' in")


def flags(store: Store) -> list[str]:
    """The `python -m onion runs` flags naming `store`."""
    if isinstance(store, SQLiteStore):
        return ["--db", store.path]
    assert isinstance(store, RedisStore)
    return ["--redis", store.url, "--namespace", store.namespace]


async def test_python_m_onion_runs_tenant_lists_that_tenants_runs_alone(store: Store, forker: Forker) -> None:
    """`python -m onion runs --tenant globex` prints none of acme's runs; `--tenant acme` prints them; `--tenant`
    with an action is refused in one line."""
    acme = await Agent(ScriptedModel(["hi"]), name="refunds", store=store).run(ASKED, principal=ALICE)
    globex = await Agent(ScriptedModel(["hello"]), name="refunds", store=store).run("hello", principal=MALLORY)
    theirs = forker.run("-m", "onion", "runs", "--tenant", "globex", *flags(store), timeout=60)
    assert theirs.returncode == 0, theirs.stderr
    assert globex.run_id in theirs.stdout and acme.run_id not in theirs.stdout
    ours = forker.run("-m", "onion", "runs", *flags(store), "--tenant", "acme", timeout=60)
    assert acme.run_id in ours.stdout and globex.run_id not in ours.stdout, ours.stderr
    mixed = forker.run("-m", "onion", "runs", "--tenant", "acme", "show", acme.run_id, *flags(store), timeout=60)
    assert (
        mixed.returncode == 1
        and mixed.stderr.strip() == "runs show: --tenant lists one tenant's runs: give it without 'show'"
    ), mixed.stderr


async def test_another_tenant_can_neither_decide_nor_resume_nor_recover_a_paused_run(store: Store) -> None:
    """`agent.decide`, `agent.resume(state)`, `agent.resume(run_id)` and `agent.recover(run_id)` for globex refuse
    acme's paused run with `ForeignRun`, as if it did not exist; nothing runs, and acme's approver resumes it after."""
    agent = refunds(store, [[call("refund", order=7, amount=30)], "Refunded."])
    paused = await agent.run(ASKED, principal=ALICE)
    run_id = paused.run_id
    with pytest.raises(ForeignRun) as decided:
        await agent.decide(run_id, Decisions(approve_rest=True), principal=MALLORY)
    state = await store.load(run_id)
    state.approve_all()
    with pytest.raises(ForeignRun) as resumed:
        await agent.resume(state, principal=MALLORY)
    with pytest.raises(ForeignRun) as by_id:
        await agent.resume(run_id, principal=MALLORY)
    with pytest.raises(ForeignRun) as recovered:
        await agent.recover(run_id, principal=MALLORY)
    for refusal in (decided, resumed, by_id, recovered):
        names_nothing_of_acme(refusal.value)
        assert refusal.value.run_id == run_id
    record = await store.run_record(run_id)
    assert record is not None and record.status == "paused" and refunded == []
    state = await agent.decide(run_id, Decisions(approve_rest=True), principal=APPROVER)
    done = await agent.resume(state, principal=APPROVER)
    assert done.output == "Refunded." and refunded == [7]
    assert [(d.call_id, d.by) for d in done.decisions] == [(paused.pending[0].id, APPROVER)]


async def test_another_tenant_cannot_recover_a_run_whose_worker_died(store: Store) -> None:
    """A failed run of acme's: `agent.recover(run_id)` and `agent.resume(run_id)` for globex are refused and leave it
    failed; acme recovers it."""
    worker = Agent(ScriptedModel([[call("refund", order=7, amount=30)]]), tools=[refund], name="refunds", store=store)
    with pytest.raises(Crash):
        await worker.use(crash).run(ASKED, principal=ALICE)
    (record,) = await store.runs(tenant="acme")
    assert record.status == "failed"
    agent = Agent(ScriptedModel(["Refunded."]), tools=[refund], name="refunds", store=store)
    for attempt in (agent.recover(record.run_id, principal=MALLORY), agent.resume(record.run_id, principal=MALLORY)):
        with pytest.raises(ForeignRun) as refused:
            await attempt
        names_nothing_of_acme(refused.value)
    after = await store.run_record(record.run_id)
    assert after is not None and after.status == "failed"
    done = await agent.recover(record.run_id, principal=ALICE)
    assert done.output == "Refunded." and done.principal == ALICE


async def test_another_tenant_cannot_continue_a_tenants_session(store: Store) -> None:
    """A session acme's run started is acme's: globex's run on it (run or stream) is refused before the model is
    asked or the history read, nothing is journaled or appended; acme's next run goes on from its history."""
    session = f"talk-{uuid.uuid4().hex[:6]}"
    await Agent(ScriptedModel(["Which order?"]), store=store).run(ASKED, session=session, principal=ALICE)
    before = await store.session(session).messages()
    model = ScriptedModel(["never said"])
    intruder = Agent(model, store=store)
    with pytest.raises(ForeignRun) as ran:
        await intruder.run("what did they ask?", session=session, principal=MALLORY)
    with pytest.raises(ForeignRun) as streamed:
        async for _ in intruder.stream("what did they ask?", session=session, principal=MALLORY):
            pass
    for refusal in (ran, streamed):
        names_nothing_of_acme(refusal.value)
        assert f"no session {session!r} for principal 'u-9'" in str(refusal.value)
    assert model.requests == [] and await store.runs(tenant="globex") == []
    assert await store.session(session).messages() == before
    again = ScriptedModel(["Done."])
    await Agent(again, store=store).run("order 7", session=session, principal=APPROVER)
    assert [m.text for m in again.requests[0].messages][:2] == [ASKED, "Which order?"]


async def test_a_session_is_its_tenants_from_the_first_run_even_while_that_run_is_paused(store: Store) -> None:
    """The tenant is recorded when the first run starts on the session, not when it appends: while acme's run waits
    for approval (the session still empty), globex's run is refused; once approved, acme's turn is appended."""
    session = f"talk-{uuid.uuid4().hex[:6]}"
    agent = refunds(store, [[call("refund", order=7, amount=30)], "Refunded."])
    paused = await agent.run(ASKED, session=session, principal=ALICE)
    assert paused.paused and await store.session(session).messages() == []
    with pytest.raises(ForeignRun) as refused:
        await Agent(ScriptedModel(["never said"]), store=store).run("hi", session=session, principal=MALLORY)
    names_nothing_of_acme(refused.value)
    state = await agent.decide(paused.run_id, Decisions(approve_rest=True), principal=APPROVER)
    await agent.resume(state, principal=APPROVER)
    assert (await store.session(session).messages())[0].text == ASKED


async def test_a_principal_without_a_tenant_is_refused_on_a_tenants_session_and_a_run_without_one_is_not_checked(
    store: Store,
) -> None:
    """A principal of no tenant is another tenant than acme; a run given no principal is your own code's, not
    checked (as a resume without one); a session filled by such runs is no tenant's, so acme's run is refused
    there."""
    session = f"talk-{uuid.uuid4().hex[:6]}"
    await Agent(ScriptedModel(["ok"]), store=store).run(ASKED, session=session, principal=ALICE)
    with pytest.raises(ForeignRun):
        await Agent(ScriptedModel(["no"]), store=store).run("hi", session=session, principal=Principal("u-1"))
    done = await Agent(ScriptedModel(["summed up"]), store=store).run("sum up", session=session)
    assert done.output == "summed up"
    own = f"job-{uuid.uuid4().hex[:6]}"
    await Agent(ScriptedModel(["noted"]), store=store).run("note", session=own)
    with pytest.raises(ForeignRun):
        await Agent(ScriptedModel(["no"]), store=store).run(ASKED, session=own, principal=ALICE)
    assert await Agent(ScriptedModel(["yes"]), store=store).run("hi", session=own, principal=Principal("u-1"))


async def test_runs_show_prints_the_principal_and_the_decisions_on_record_scrubbed(store: Store) -> None:
    """`runs show` has a line for whom the run is for and one per decision (who, when, what), the key in an edit's
    arguments and in a rejection's reason redacted."""
    key = "sk-ant-abcdefghijklmnop1234"
    script = [[call("refund", order=7, amount=30), call("refund", order=8, amount=5)], "Refunded."]
    agent = refunds(store, script)
    paused = await agent.run(ASKED, principal=ALICE)
    first, second = (c.id for c in paused.pending)
    edit = Decisions(edit={first: {"order": 7, "amount": 25}}, reject={second: f"no, key {key}"})
    await agent.resume(await agent.decide(paused.run_id, edit, principal=APPROVER), principal=APPROVER)
    shown = await show_run(store, paused.run_id)
    assert "principal u-42 (tenant acme, roles support)" in shown
    lines = [line for line in shown.splitlines() if line.startswith((first, second))]
    assert len(lines) == 2 and key not in shown, shown
    assert (
        lines[0].startswith(f"{first}  edited ") and '"amount": 25' in lines[0] and "by u-17 (tenant acme)" in lines[0]
    )
    assert lines[1].startswith(f"{second}  rejected ") and "[REDACTED]" in lines[1]


class OwnStore:
    """A store of a user's, written against the protocols before tenants: no `tenant=` on `start_run`, no
    `claim_session`."""

    def __init__(self) -> None:
        self.inner = MemoryStore()

    async def start_run(
        self, run_id: str, *, agent: str, owner: str, lease: float, entries: Any, session: str | None = None
    ) -> None:
        await self.inner.start_run(run_id, agent=agent, owner=owner, lease=lease, entries=entries, session=session)

    def session(self, session_id: str) -> Any:
        from onion.stores import Session

        return Session(self, session_id)  # type: ignore[arg-type]

    def __getattr__(self, name: str) -> Any:
        if name == "claim_session":
            raise AttributeError(name)
        return getattr(self.inner, name)


async def test_a_store_of_your_own_without_tenants_serves_runs_of_no_tenant_and_refuses_a_tenants_session() -> None:
    """Runs without a tenant (with or without a principal, on a session too) work on a store of the older protocol;
    a tenant's run on a session there is a `TypeError` naming what the store lacks."""
    own = OwnStore()
    assert not isinstance(own, SessionTenants)
    agent = Agent(ScriptedModel(["a", "b", "c"]), store=own)  # type: ignore[arg-type]
    await agent.run("hi")
    await agent.run("hi", session="s", principal=Principal("u-1"))
    await agent.run("hi", session="s")
    with pytest.raises(TypeError, match="claim_session"):
        await agent.run("hi", session="s", principal=ALICE)
