"""`budget(per=..., window=..., soft=..., store=...)`: one allowance shared by runs, over a window, asked about once."""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from middleware import budget
from middleware.budget import BudgetExceeded
from onion import Agent, Message, ModelResponse, OnionError, Principal, RunState, Usage, tool
from onion.errors import DecisionRefused
from onion.stores import MemoryStore, RedisStore, SQLiteStore
from onion.testing import FakeTime, ScriptedModel, call

PRICES = {"priced": (1.0, 1.0)}
DAY = 86_400.0
ACME, BETA = Principal("u-1", tenant="acme"), Principal("u-2", tenant="beta")


def answer(text: str = "done", cents: int = 30) -> ModelResponse:
    """A final answer that costs `cents` cents at $1 per million tokens."""
    return ModelResponse(Message.assistant(text), Usage(cents * 10_000, 0, 1), model="priced")


def asks(cents: int = 30) -> ModelResponse:
    """A response asking for `step`, costing `cents` cents."""
    return ModelResponse(Message.assistant("", [call("step")]), Usage(cents * 10_000, 0, 1), model="priced")


@tool
def step() -> str:
    """One more step."""
    return "again"


def agent(*script: ModelResponse, layer: budget, store: Any = None) -> Agent[Any]:
    return Agent(ScriptedModel(list(script), name="priced"), tools=[step], store=store).use(layer)


def daily(clock: FakeTime, **options: Any) -> budget:
    """$1 a UTC day per tenant, counted in a MemoryStore on the fake clock."""
    store = MemoryStore(clock=clock.clock)
    return budget(max_cost=1.0, per="tenant", window="day", prices=PRICES, store=store, **options)


@pytest.fixture
def clock() -> FakeTime:
    return FakeTime(now=datetime.datetime(2026, 12, 1, 9, tzinfo=datetime.UTC).timestamp())


async def test_runs_of_one_tenant_share_its_allowance_and_the_run_past_it_stops_naming_scope_window_and_spend(
    clock: FakeTime,
) -> None:
    """Three runs of $0.40: the third goes over the tenant's $1 for the day and stops, naming what was spent."""
    layer = daily(clock)
    for _ in range(2):
        assert (await agent(answer(cents=40), layer=layer).run("hi", principal=ACME)).output == "done"
    with pytest.raises(BudgetExceeded) as over:
        await agent(answer(cents=40), layer=layer).run("hi", principal=ACME)
    error = over.value
    assert error.scope == "tenant 'acme'" and error.window == "day 2026-12-01"
    assert error.spent == pytest.approx(1.2) and error.cost == pytest.approx(0.4)
    assert "tenant 'acme', day 2026-12-01" in str(error) and "$1.200000 > max_cost=$1.0" in str(error)


async def test_a_run_is_not_sent_to_the_model_once_its_allowance_is_spent(clock: FakeTime) -> None:
    layer = daily(clock)
    with pytest.raises(BudgetExceeded):
        await agent(answer(cents=120), layer=layer).run("hi", principal=ACME)
    model = ScriptedModel([answer()], name="priced")
    with pytest.raises(BudgetExceeded):
        await Agent(model).use(layer).run("hi", principal=ACME)
    assert model.requests == []


async def test_one_tenants_spending_never_counts_against_another(clock: FakeTime) -> None:
    layer = daily(clock)
    with pytest.raises(BudgetExceeded):
        await agent(answer(cents=150), layer=layer).run("hi", principal=ACME)
    for _ in range(3):
        assert (await agent(answer(cents=30), layer=layer).run("hi", principal=BETA)).output == "done"
    with pytest.raises(BudgetExceeded):
        await agent(answer(cents=30), layer=layer).run("hi", principal=BETA)
    nobody = await agent(answer(cents=30), layer=layer).run("hi")
    assert nobody.output == "done"  # runs without a tenant share an allowance of their own


async def test_a_new_utc_day_resets_the_allowance(clock: FakeTime) -> None:
    layer = daily(clock)
    with pytest.raises(BudgetExceeded):
        await agent(answer(cents=150), layer=layer).run("hi", principal=ACME)
    clock.now += 14 * 3600  # 23:00 the same day: still spent
    with pytest.raises(BudgetExceeded):
        await agent(answer(), layer=layer).run("hi", principal=ACME)
    clock.now += 3600  # midnight, UTC
    assert (await agent(answer(cents=90), layer=layer).run("hi", principal=ACME)).output == "done"


async def test_a_month_window_resets_on_the_first_of_the_next_month(clock: FakeTime) -> None:
    store = MemoryStore(clock=clock.clock)
    layer = budget(max_cost=1.0, per="tenant", window="month", prices=PRICES, store=store)
    with pytest.raises(BudgetExceeded) as over:
        await agent(answer(cents=150), layer=layer).run("hi", principal=ACME)
    assert over.value.window == "month 2026-12"
    clock.now += 20 * DAY  # 21 December
    with pytest.raises(BudgetExceeded):
        await agent(answer(), layer=layer).run("hi", principal=ACME)
    clock.now += 11 * DAY  # 1 January
    assert (await agent(answer(), layer=layer).run("hi", principal=ACME)).output == "done"


async def test_a_rolling_window_forgets_what_left_it(clock: FakeTime) -> None:
    """$1 an hour, rolling: what was spent 61 minutes ago no longer counts, what was spent 59 minutes ago does."""
    store = MemoryStore(clock=clock.clock)
    layer = budget(max_cost=1.0, per="tenant", window=datetime.timedelta(hours=1), prices=PRICES, store=store)
    await agent(answer(cents=60), layer=layer).run("hi", principal=ACME)
    clock.now += 30 * 60
    await agent(answer(cents=30), layer=layer).run("hi", principal=ACME)
    clock.now += 29 * 60  # the first $0.60 is 59 minutes old
    with pytest.raises(BudgetExceeded) as over:
        await agent(answer(cents=30), layer=layer).run("hi", principal=ACME)
    assert over.value.window == "the last 3600 s"
    clock.now += 2 * 60  # 61 minutes: the $0.60 left the window
    assert (await agent(answer(cents=30), layer=layer).run("hi", principal=ACME)).output == "done"


@pytest.mark.parametrize(
    ("per", "first", "second", "shared"),
    [
        ("session", {"session": "s-1"}, {"session": "s-1"}, True),
        ("session", {"session": "s-1"}, {"session": "s-2"}, False),
        ("principal", {"principal": ACME}, {"principal": Principal("u-1", tenant="acme")}, True),
        ("principal", {"principal": ACME}, {"principal": Principal("u-3", tenant="acme")}, False),
        ("principal", {"principal": ACME}, {"principal": Principal("u-1", tenant="beta")}, False),
        ("agent", {}, {}, True),
    ],
)
async def test_what_shares_an_allowance_is_what_per_names(
    clock: FakeTime, per: str, first: dict[str, Any], second: dict[str, Any], shared: bool
) -> None:
    store = MemoryStore(clock=clock.clock)
    layer = budget(max_cost=1.0, per=per, prices=PRICES, store=MemoryStore(clock=clock.clock))
    await agent(answer(cents=70), layer=layer, store=store).run("hi", **first)
    later = agent(answer(cents=70), layer=layer, store=store).run("hi", **second)
    if shared:
        with pytest.raises(BudgetExceeded):
            await later
    else:
        assert (await later).output == "done"


async def test_the_soft_line_pauses_the_run_once_and_approving_lets_it_go_on_to_the_hard_line(
    clock: FakeTime,
) -> None:
    """Calls of $0.30: the run reaches the $0.80 soft line at its fourth call, pauses (kind "budget"), is
    approved, makes two more calls without asking again, and goes over $1 at the fourth call's response."""
    layer = daily(clock, soft=0.8)
    model = ScriptedModel([asks(), asks(), asks(), asks()], name="priced")
    runner = Agent(model, tools=[step]).use(layer)
    paused = await runner.run("hi", principal=ACME)
    assert paused.paused and len(model.requests) == 3
    (pending,) = paused.pending
    assert pending.kind == "budget" and pending.name == "priced"
    assert "tenant 'acme', day 2026-12-01" in pending.reason and "$0.900000" in pending.reason
    state = RunState.from_json(paused.to_state().to_json())
    state.approve(pending.id)
    with pytest.raises(BudgetExceeded):
        await runner.resume(state)
    assert len(model.requests) == 4


async def test_approving_the_soft_line_lets_the_run_finish_below_the_hard_line(clock: FakeTime) -> None:
    layer = daily(clock, soft=0.5)
    model = ScriptedModel([asks(), asks(), answer(cents=10)], name="priced")
    runner = Agent(model, tools=[step]).use(layer)
    paused = await runner.run("hi", principal=ACME)
    state = paused.to_state()
    state.approve_all()
    result = await runner.resume(state)
    assert result.output == "done" and len(model.requests) == 3
    assert [m.kind for m in paused.pending] == ["budget"]


async def test_rejecting_the_soft_line_ends_the_run_with_budget_exceeded(clock: FakeTime) -> None:
    layer = daily(clock, soft=0.5)
    model = ScriptedModel([asks(), asks(), answer()], name="priced")
    runner = Agent(model, tools=[step]).use(layer)
    state = (await runner.run("hi", principal=ACME)).to_state()
    state.reject(state.pending[0].id, "enough for today")
    with pytest.raises(BudgetExceeded, match=r"rejected going on past its budget's soft line \(enough for today\)"):
        await runner.resume(state)
    assert len(model.requests) == 2


async def test_each_run_of_a_tenant_past_the_soft_line_asks_its_own_person(clock: FakeTime) -> None:
    layer = daily(clock, soft=0.5)
    runner = agent(asks(cents=60), answer(cents=1), layer=layer)
    first = await runner.run("hi", principal=ACME)
    state = first.to_state()
    state.approve_all()
    assert (await runner.resume(state)).output == "done"
    second = await agent(answer(), layer=layer).run("hi", principal=ACME)
    assert second.paused and second.pending[0].kind == "budget"


async def test_a_per_run_budget_pauses_at_its_soft_amount() -> None:
    layer = budget(max_cost=1.0, soft=0.5, prices=PRICES)
    model = ScriptedModel([asks(cents=60), answer(cents=10)], name="priced")
    runner = Agent(model, tools=[step]).use(layer)
    paused = await runner.run("hi")
    assert paused.pending[0].kind == "budget" and "this run" in paused.pending[0].reason
    state = paused.to_state()
    state.approve_all()
    assert (await runner.resume(state)).output == "done"


async def test_a_paused_budget_call_is_not_editable(clock: FakeTime) -> None:
    from onion.errors import RunStateError

    state = (await agent(asks(cents=90), answer(), layer=daily(clock, soft=0.5)).run("hi", principal=ACME)).to_state()
    with pytest.raises(RunStateError, match="paused budget, which has no arguments to edit"):
        state.edit(state.pending[0].id, {})


async def test_a_paused_budget_call_in_a_store_is_decided_through_the_one_decide_path(clock: FakeTime) -> None:
    from onion import Decisions

    store = MemoryStore(clock=clock.clock)
    runner = agent(asks(cents=90), answer(cents=5), layer=daily(clock, soft=0.5), store=store)
    paused = await runner.run("hi", principal=ACME)
    (pending,) = paused.pending
    with pytest.raises(DecisionRefused, match="not a call that may have run"):
        await runner.decide(paused.run_id, Decisions(resolve={pending.id: "it ran"}))
    state = await runner.decide(paused.run_id, Decisions(approve=[pending.id]))
    assert (await runner.resume(state)).output == "done"


def test_the_settings_that_do_not_fit_are_refused_saying_why() -> None:
    with pytest.raises(ValueError, match="per must be one of"):
        budget(max_cost=1, per="team")
    with pytest.raises(ValueError, match="a window needs an allowance that outlives a run"):
        budget(max_cost=1, window="day")
    with pytest.raises(ValueError, match="window is None, 'day', 'month' or a timedelta"):
        budget(max_cost=1, per="tenant", window="week")
    with pytest.raises(ValueError, match="the soft line 2 must be under the limit 1"):
        budget(max_cost=1, soft=2)
    with pytest.raises(ValueError, match="give soft as a fraction"):
        budget(max_cost=1, max_tokens=100, soft=50)
    with pytest.raises(TypeError, match="must count spending"):
        budget(max_cost=1, per="tenant", store=object())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="per='run' counts in the run itself"):
        budget(max_cost=1, store=MemoryStore())


async def test_a_shared_token_allowance_counts_tokens() -> None:
    layer = budget(max_tokens=500_000, per="agent", store=MemoryStore())
    await agent(answer(cents=30), layer=layer).run("hi")
    with pytest.raises(BudgetExceeded) as over:
        await agent(answer(cents=30), layer=layer).run("hi")
    assert over.value.spent == 600_000 and over.value.scope == "agent 'agent'"


async def test_a_model_without_a_price_is_an_error_before_a_shared_allowance_is_charged(clock: FakeTime) -> None:
    store = MemoryStore(clock=clock.clock)
    layer = budget(max_cost=1.0, per="tenant", window="day", store=store)
    model = ScriptedModel([answer()], name="my-finetune")
    with pytest.raises(OnionError, match=r"no price for model 'my-finetune'; pass budget\(prices="):
        await Agent(model).use(layer).run("hi", principal=ACME)
    assert model.requests == []


@pytest.fixture(params=["sqlite", "redis"])
def shared_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    if request.param == "sqlite":
        with SQLiteStore(tmp_path / "spending.db") as store:
            yield store
    else:
        import uuid

        url = request.getfixturevalue("redis_url")
        yield RedisStore(url, namespace=f"t{uuid.uuid4().hex[:12]}")


async def test_sqlite_and_redis_keep_a_tenants_allowance_for_every_worker(shared_store: Any) -> None:
    """Two layers (two workers' worth) on one store: what one charged, the other sees."""
    first = budget(max_cost=1.0, per="tenant", window="day", prices=PRICES, store=shared_store)
    second = budget(max_cost=1.0, per="tenant", window="day", prices=PRICES, store=shared_store)
    await agent(answer(cents=70), layer=first).run("hi", principal=ACME)
    with pytest.raises(BudgetExceeded) as over:
        await agent(answer(cents=70), layer=second).run("hi", principal=ACME)
    assert over.value.spent == pytest.approx(1.4)
    assert (await agent(answer(cents=70), layer=second).run("hi", principal=BETA)).output == "done"
    if isinstance(shared_store, RedisStore):
        await shared_store.aclose()


async def test_a_shared_budget_on_redis_costs_one_round_trip_per_model_call(redis_url: str) -> None:
    """After the first call of a tenant in a worker (which reads the allowance), each model call sends one
    command: the script that adds its cost and answers the total."""
    import uuid

    class Counting(RedisStore):
        sent = 0

        def _send(self, *command: Any) -> Any:
            Counting.sent += 1
            return super()._send(*command)

    store = Counting(redis_url, namespace=f"t{uuid.uuid4().hex[:12]}")
    layer = budget(max_cost=100.0, per="tenant", window="day", prices=PRICES, store=store)
    runner = agent(asks(cents=1), asks(cents=1), asks(cents=1), answer(cents=1), layer=layer)
    await agent(answer(cents=1), layer=layer).run("warm up", principal=ACME)  # a read, the script loaded, a charge
    before = Counting.sent
    await runner.run("hi", principal=ACME)
    assert Counting.sent - before == 4
    await store.aclose()


@pytest.mark.parametrize(
    ("order", "round_trips", "scripts"),
    [
        ("rate_limit alone", 2, 2),  # its reservation before the call, its correction after
        ("budget alone", 1, 1),  # the spend
        ("budget outside rate_limit", 2, 3),  # the spend travels with the correction: no round trip added
        ("rate_limit outside budget", 3, 3),  # the spend is answered before rate_limit corrects: one more
    ],
)
async def test_on_redis_a_shared_budget_adds_at_most_one_round_trip_and_none_outside_rate_limit(
    redis_server: Any, order: str, round_trips: int, scripts: int
) -> None:
    """Counted by the server (INFO: `total_reads_processed`, one per write it reads; `cmdstat_evalsha`): after a
    warm-up run, each of a run's 4 model calls costs `round_trips` round trips and `scripts` scripts."""
    import redis

    from middleware import rate_limit

    store = RedisStore(redis_server.url, namespace="t")
    limit = rate_limit(rpm=1e6, tpm=1e9, store=store)
    spending = budget(max_cost=100.0, per="tenant", window="day", prices=PRICES, store=store)
    layers = {
        "rate_limit alone": [limit],
        "budget alone": [spending],
        "budget outside rate_limit": [spending, limit],
        "rate_limit outside budget": [limit, spending],
    }[order]
    server = redis.Redis.from_url(redis_server.url)

    def counts() -> tuple[int, int]:
        found = server.info("stats", "commandstats")  # one command: one read of its own
        return found["total_reads_processed"], found.get("cmdstat_evalsha", {}).get("calls", 0)

    warm_up = Agent(ScriptedModel([answer(cents=1)], name="priced"), middleware=layers)
    await warm_up.run("warm up", principal=ACME)  # connects, loads the scripts, reads the allowance
    reads, evals = counts()
    script = [asks(cents=1), asks(cents=1), asks(cents=1), answer(cents=1)]
    await Agent(ScriptedModel(script, name="priced"), tools=[step], middleware=layers).run("hi", principal=ACME)
    after_reads, after_evals = counts()
    assert (after_reads - reads - 1, after_evals - evals) == (4 * round_trips, 4 * scripts)
    server.close()
    await store.aclose()


def test_a_shared_budget_says_it_cannot_run_in_workflow_code_and_a_per_run_one_can() -> None:
    shared = budget(max_cost=1.0, per="tenant", window="day")
    assert isinstance(shared, budget) and "a store that other runs share" in str(shared.nondeterministic)
    assert budget(max_cost=1.0).nondeterministic is None


async def test_a_run_cancelled_while_its_spend_is_on_its_way_to_the_store_still_counts_it() -> None:
    """A store elsewhere (no `spend_now`) answers late: the run is cancelled while it waits, and the spending
    arrives all the same (it was sent as the response was charged, and is not cancelled with the run)."""
    import asyncio
    import time

    from onion.stores import MemorySpendStore

    class FarAway:
        def __init__(self) -> None:
            self.counted, self.waiting, self.answer = MemorySpendStore(), asyncio.Event(), asyncio.Event()
            self.keys: set[str] = set()

        async def spend(
            self,
            key: str,
            cost: float,
            tokens: int,
            *,
            now: float,
            window: float | None = None,
            ttl: float | None = None,
        ) -> tuple[float, int]:
            self.keys.add(key)
            if cost or tokens:
                self.waiting.set()
                await self.answer.wait()
            return await self.counted.spend(key, cost, tokens, now=now, window=window, ttl=ttl)

    store = FarAway()
    layer = budget(max_cost=1.0, per="tenant", window="day", prices=PRICES, store=store)
    running = asyncio.create_task(agent(answer(cents=30), layer=layer).run("hi", principal=ACME))
    await asyncio.wait_for(store.waiting.wait(), 5)
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    store.answer.set()
    for _ in range(5):
        await asyncio.sleep(0)
    (key,) = store.keys
    assert (await store.counted.spend(key, 0.0, 0, now=time.time()))[0] == pytest.approx(0.30)
