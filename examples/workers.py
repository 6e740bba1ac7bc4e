"""Many workers, one budget: 4 worker processes share one rate limit and one cache on Redis.

    python examples/workers.py [redis://127.0.0.1:6379/0]

A fake provider (standing in for Anthropic) answers on a local port. Each
worker asks the same 10 questions through `rate_limit(rpm=120)` and
`cache`, both on one `RedisStore`: the limit counts every worker's requests
together, and an answer one worker got is served to the others from the
cache, for no usage.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import uuid
from pathlib import Path

from middleware import cache, rate_limit
from onion import Agent
from onion.providers import AnthropicModel
from onion.stores import RedisStore
from onion.testing import FakeProviderServer, RecordedRequest

QUESTIONS = [f"question {n}" for n in range(10)]


async def worker(redis_url: str, provider_url: str, namespace: str, start: int) -> int:
    """Ask every question, from question `start` on; returns how many answers came from the shared cache."""
    async with RedisStore(redis_url, namespace=namespace) as store:
        model = AnthropicModel("claude-sonnet-5-5", base_url=provider_url, api_key="not-a-real-key")
        agent = Agent(model).use(rate_limit(rpm=120, store=store), cache(ttl=600, store=store))
        order = QUESTIONS[start:] + QUESTIONS[:start]  # workers in step would all miss the same question at once
        results = [await agent.run(question) for question in order]
        await agent.aclose()
    return sum(result.state["cache"]["hits"] for result in results)


def answer(request: RecordedRequest) -> str:
    content = request.body["messages"][-1]["content"]
    text = content if isinstance(content, str) else content[0]["text"]
    return f"the answer to {text}"


def main(redis_url: str) -> tuple[int, int]:
    """Start 4 workers against one fake provider; returns (requests the provider saw, cache hits)."""
    namespace = f"workers-{uuid.uuid4().hex[:8]}"  # a fresh cache for this demo
    with FakeProviderServer(respond=answer) as provider:
        command = [sys.executable, __file__, "--worker", redis_url, provider.url, namespace]
        workers = [subprocess.Popen([*command, str(3 * n)], stdout=subprocess.PIPE, text=True) for n in range(4)]
        outputs = [process.communicate(timeout=120)[0] for process in workers]
        if any(process.returncode for process in workers):
            raise SystemExit(f"a worker failed (its error is above): is Redis running at {redis_url}?")
        return len(provider.requests), sum(int(output) for output in outputs)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        redis_url, provider_url, namespace, start = sys.argv[2:6]
        print(asyncio.run(worker(redis_url, provider_url, namespace, int(start))))
    else:
        requests, hits = main(sys.argv[1] if len(sys.argv) > 1 else "redis://127.0.0.1:6379/0")
        print(f"4 workers asked {4 * len(QUESTIONS)} questions: the provider answered {requests}, the cache {hits}")
