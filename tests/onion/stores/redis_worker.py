"""A worker process for `test_redis_workers.py`: one job of the many-workers tests, on a shared Redis.

`python redis_worker.py MODE REDIS_URL NAMESPACE [ARGS...]`; it prints what
the test reads, one line at a time.

- `rate SERVER WORKER RUNS RPM TPM WINDOW`: RUNS concurrent runs (`10s`: 10 one
  after another) through `rate_limit` (0 for no limit) against the fake
  server; prints `done FAILED`.
- `cache SERVER PROMPT`: one run through `cache`; prints `hit` or `miss`.
- `pause` / `decide`: a run paused for approval; decided and resumed (prints its output).
- `hang EFFECTS`: a run whose tool records its start in EFFECTS, prints `started RUN_ID` and hangs.
- `session RUNS WORKER`: RUNS concurrent runs on session `shared`.
"""

from __future__ import annotations

import asyncio
import contextvars
import sys
from typing import Any

from middleware import approve, cache, rate_limit
from onion import Agent, ModelCall, ToolRequest, tool
from onion.errors import RateLimitedError
from onion.providers import AnthropicModel
from onion.stores import RedisStore
from onion.testing import FunctionModel


def fixed_estimate(call: ModelCall) -> int:
    """Every call is estimated at 60 tokens (the fake server reports 50)."""
    return 60


ADMITTED: contextvars.ContextVar[float] = contextvars.ContextVar("admitted")


class AdmissionStore(RedisStore):
    """A RedisStore that notes, in the run's context, the Redis time its rate limit admitted the call at."""

    async def acquire(self, key: str, tokens: int, *, rpm: float | None, tpm: float | None, window: float) -> float:
        wait = await super().acquire(key, tokens, rpm=rpm, tpm=tpm, window=window)
        if wait == 0:
            ADMITTED.set(self._reservations[key][-1][2])
        return wait


async def stamp(call: ModelCall, call_next: Any) -> Any:
    """Send the Redis time the rate limit admitted the call at as the `x-sent-at` header."""
    call.settings["extra_headers"] = {**call.settings.get("extra_headers", {}), "x-sent-at": repr(ADMITTED.get())}
    return await call_next(call)


async def run_noting_pauses(agent: Agent, store: RedisStore, prompt: str) -> None:
    """Run `prompt`; when the provider refused it (429), print the Redis time the shared pause ends."""
    try:
        await agent.run(prompt)
    except RateLimitedError:
        print("paused-until", await store._client().hget(store._rate_keys("claude-test")[1], "paused"), flush=True)
        raise


async def rate(store: RedisStore, server: str, worker: str, runs: str, rpm: str, tpm: str, window: str) -> None:
    model = AnthropicModel("claude-test", base_url=server, api_key="test-key")
    limit = rate_limit(
        rpm=float(rpm) or None, tpm=float(tpm) or None, window=float(window), store=store, estimate=fixed_estimate
    )
    go, at_gate, arrived = asyncio.Event(), asyncio.Event(), 0
    together = 1 if runs.endswith("s") else int(runs)

    async def gate(call: ModelCall, call_next: Any) -> Any:
        """Hold the first calls until every worker is up (`go` on stdin), so they start together."""
        nonlocal arrived
        arrived += 1
        if arrived == together:
            at_gate.set()
        await go.wait()
        return await call_next(call)

    async def start_when_told() -> None:
        await at_gate.wait()
        print("ready", flush=True)
        await asyncio.to_thread(sys.stdin.readline)
        go.set()

    agent = Agent(model).use(gate, limit, stamp)
    starter = asyncio.create_task(start_when_told())
    if runs.endswith("s"):  # one after another
        outcomes: list[Any] = []
        for n in range(int(runs[:-1])):
            outcomes += await asyncio.gather(run_noting_pauses(agent, store, f"{worker}-{n}"), return_exceptions=True)
    else:
        runs_ = (run_noting_pauses(agent, store, f"{worker}-{n}") for n in range(int(runs)))
        outcomes = await asyncio.gather(*runs_, return_exceptions=True)
    await starter
    await agent.aclose()
    errors = [o for o in outcomes if isinstance(o, BaseException)]
    print(*{f"{type(e).__name__}: {e}" for e in errors}, sep="\n", file=sys.stderr)
    print("done", len(errors), flush=True)


async def cached(store: RedisStore, server: str, prompt: str) -> None:
    agent = Agent(AnthropicModel("claude-test", base_url=server, api_key="test-key")).use(cache(ttl=60, store=store))
    result = await agent.run(prompt)
    await agent.aclose()
    print("hit" if result.state["cache"]["hits"] else "miss", flush=True)


@tool
def pay(amount: int) -> str:
    """Pay an amount."""
    return f"paid {amount}"


def pays_then_reports(call: ModelCall) -> Any:
    if call.messages[-1].role == "user":
        return [ToolRequest("a", "pay", {"amount": 5})]
    return " / ".join(m.text for m in call.messages if m.role == "tool")


async def pause(store: RedisStore) -> None:
    agent = Agent(FunctionModel(pays_then_reports), tools=[pay], store=store).use(approve("pay"))
    result = await agent.run("pay 5")
    print(result.status, result.run_id, flush=True)


async def decide(store: RedisStore, run_id: str) -> None:
    agent = Agent(FunctionModel(pays_then_reports), tools=[pay], store=store).use(approve("pay"))
    state = await store.load(run_id)
    state.approve_all()
    print((await agent.resume(state)).output, flush=True)


async def hang(store: RedisStore, effects: str) -> None:
    @tool
    async def slow(n: int) -> str:
        """Work that never ends in this process."""
        with open(effects, "a") as file:
            file.write(f"slow {n}\n")
        print("started", flush=True)
        await asyncio.Event().wait()
        return "never"

    def asks_once(call: ModelCall) -> Any:
        return [ToolRequest("s", "slow", {"n": 1})] if call.messages[-1].role == "user" else "unused"

    agent = Agent(FunctionModel(asks_once), tools=[slow], store=store, lease=1.0)
    await agent.run("go")


async def session(store: RedisStore, runs: str, worker: str) -> None:
    agent = Agent(FunctionModel(lambda call: f"answer to {call.messages[-1].text}"), store=store)
    await asyncio.gather(*(agent.run(f"{worker}-{n}", session="shared") for n in range(int(runs))))
    print("done", flush=True)


async def main(mode: str, url: str, namespace: str, *args: str) -> None:
    jobs: dict[str, Any] = {
        "rate": rate,
        "cache": cached,
        "pause": pause,
        "decide": decide,
        "hang": hang,
        "session": session,
    }
    async with AdmissionStore(url, namespace=namespace) as store:
        await jobs[mode](store, *args)


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:]))
