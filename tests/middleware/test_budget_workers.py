"""4 worker processes share one `budget(max_cost=1.0, per="tenant", window="day")` on Redis, and on SQLite."""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from pathlib import Path

import pytest
from forker import Forked, Forker

from onion.stores import RedisStore, SQLiteStore

pytestmark = pytest.mark.slow  # several processes in real time

ROOT = Path(__file__).resolve().parents[2]
WORKER = Path(__file__).with_name("budget_worker.py")
WORKERS, RUNS = 4, 5
CALL_COST = 1 / 64


def spend_together(forker: Forker, where: str, namespace: str) -> list[list[str]]:
    """Start the workers, let them go at once, and return each one's last line, split."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    workers: list[Forked] = [forker.popen(WORKER, where, namespace, str(RUNS), env=env) for _ in range(WORKERS)]
    for worker in workers:
        assert worker.stdout is not None and worker.stdout.readline() == "ready\n"
    for worker in workers:
        assert worker.stdin is not None
        worker.stdin.write("go\n")
        worker.stdin.flush()
    lines = []
    for worker in workers:
        out, err = worker.communicate(timeout=120)
        assert worker.returncode == 0, err
        lines.append(out.split())
    return lines


def day_key(tenant: str) -> str:
    """The store key of `tenant`'s allowance today (as `middleware._allowance` names it)."""
    return f"budget:tenant:{len(tenant)}:{tenant}:day:{time.strftime('%Y-%m-%d', time.gmtime())}"


def check_spending(lines: list[list[str]], store_total: float) -> None:
    """What every worker spent together: over $1 (the line was reached), never over $1 plus one call per run.

    The stated bound (docs/middleware-library.md, "budget"): each run stops at its first response past the
    line, so the line is passed by at most one call per run (20 here). Counted apart per worker, the 4
    workers would have spent $4. The store's total is every call's cost: no addition was lost.
    """
    calls = sum(int(line[1]) for line in lines)
    stopped = sum(int(line[3]) for line in lines)
    beta_calls = 2 * WORKERS
    spent = (calls - beta_calls) * CALL_COST
    print(f"acme spent ${spent:.6f} in {calls - beta_calls} calls (line $1, bound ${1 + WORKERS * RUNS * CALL_COST})")
    assert stopped == WORKERS * RUNS
    assert 1.0 < spent <= 1.0 + WORKERS * RUNS * CALL_COST, spent
    assert store_total == pytest.approx(spent)
    assert [line[5] for line in lines] == ["beta-done"] * WORKERS  # beta's allowance is its own


def test_four_workers_on_redis_never_spend_more_than_the_limit_plus_one_call_per_run(
    redis_url: str, forker: Forker
) -> None:
    namespace = f"t{uuid.uuid4().hex[:12]}"
    lines = spend_together(forker, redis_url, namespace)

    async def total() -> float:
        async with RedisStore(redis_url, namespace=namespace) as store:
            acme, _ = await store.spend(day_key("acme"), 0.0, 0, now=time.time())
            beta, _ = await store.spend(day_key("beta"), 0.0, 0, now=time.time())
        assert beta == pytest.approx(2 * WORKERS * CALL_COST)
        return acme

    check_spending(lines, asyncio.run(total()))


def test_four_workers_on_sqlite_never_spend_more_than_the_limit_plus_one_call_per_run(
    tmp_path: Path, forker: Forker
) -> None:
    path = tmp_path / "spending.db"
    SQLiteStore(path).close()  # the file exists before the workers open it
    lines = spend_together(forker, str(path), "-")

    async def total() -> float:
        async with SQLiteStore(path) as store:
            spent, _ = await store.spend(day_key("acme"), 0.0, 0, now=time.time())
        return spent

    check_spending(lines, asyncio.run(total()))
