"""Who decided and when survive a SIGKILL between the decision and the tool's end, on SQLite and on Redis: the
worker that decided dies inside the approved tool, and the run recovered in another process still names Ann, the
time she decided, and what she decided on each call."""

from __future__ import annotations

import asyncio
import datetime
import os
import sys
import time
import uuid
from pathlib import Path

import pytest
from forker import Forker

sys.path.insert(0, str(Path(__file__).parent))
from decided_worker import ANN, LEASE, build, open_store

pytestmark = pytest.mark.slow  # several processes in real time

ROOT = Path(__file__).resolve().parents[2]
WORKER = Path(__file__).with_name("decided_worker.py")


@pytest.fixture(params=["sqlite", "redis"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return str(tmp_path / "onion.db") if request.param == "sqlite" else str(request.getfixturevalue("redis_url"))


def at(text: str) -> float:
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def test_who_decided_and_when_survive_a_sigkill_inside_the_approved_tool(
    forker: Forker, where: str, tmp_path: Path
) -> None:
    namespace, effects = f"t{uuid.uuid4().hex[:12]}", tmp_path / "effects.log"

    async def pause() -> str:
        store = open_store(where, namespace)
        result = await build(store, effects, hang=False).run("refund and close o-1", principal=ANN)
        await store.aclose()
        assert result.paused and [p.name for p in result.pending] == ["refund", "close"]
        return result.run_id

    run_id = asyncio.run(pause())
    before = time.time()
    worker = forker.popen(WORKER, where, namespace, run_id, str(effects), env={**os.environ, "PYTHONPATH": str(ROOT)})
    deadline = time.monotonic() + 60
    while not (effects.exists() and effects.read_text().endswith("\n")):
        assert worker.poll() is None, worker.communicate()[1]
        assert time.monotonic() < deadline, "the worker never reached the refund"
        time.sleep(0.02)
    worker.kill()
    worker.wait(timeout=30)
    killed = time.time()
    time.sleep(LEASE + 0.2)

    async def recover() -> tuple[list[dict[str, object]], str | None]:
        store = open_store(where, namespace)
        result = await build(store, effects, hang=False).recover(run_id, principal=ANN)
        await store.aclose()
        return [record.to_dict() for record in result.decisions], result.output

    records, output = asyncio.run(recover())
    assert effects.read_text().splitlines() == ["refund o-1"]  # the refund was cut off, close never ran
    assert [(r["decision"], r["by"], r.get("reason")) for r in records] == [
        ("approved", {"id": "ann", "tenant": "acme"}, None),
        ("rejected", {"id": "ann", "tenant": "acme"}, "keep it open"),
    ]
    assert all(before <= at(str(r["at"])) <= killed for r in records), records
    assert output is not None and "keep it open" in output
