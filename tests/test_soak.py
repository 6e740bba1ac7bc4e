"""Soak: many concurrent runs through the real SDKs over HTTP, with random wire faults and cancellations.

Each run talks to the fake provider through one of the three APIs, streamed
or not, with `retry` in its stack. The server answers every run from that
run's own plan (told apart by a header): tool-call batches and a final
answer, each preceded by random wire faults; some runs are cancelled (while
a request is in flight, inside a tool, on a timer, or by a stream consumer
that stops reading). Some runs pause for approval of their `compute` calls,
on a store shared by those runs; their decisions are delivered once, or
again at random (one after the other, or at the same time, as a queue
redelivers or an HTTP client retries). Afterwards:

- every run ended in its result, an `OnionError`, or (cancelled runs only)
  `CancelledError`; a result came after the whole plan, an error only after
  `ATTEMPTS` faults in a row;
- every request the server received holds a valid conversation (each tool
  call answered, right after it, and no result without its call);
- no tool ran twice for one call id, and every delivery after the first was
  refused (`BatchDecided`, or `RunBusy` while the first still ran);
- no task, thread or file descriptor is left behind (onion's sync-tool
  threads stay, idle, up to the size of the soak's `ToolThreads`).

`ONION_SOAK_RUNS` sets the number of runs (100 by default; `make soak` runs
2,000), `ONION_SOAK_SEED` the seed (random by default; printed on failure),
`ONION_SOAK_AT_ONCE` how many run at the same time (100).
"""

from __future__ import annotations

import asyncio
import collections
import gc
import os
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

import onion
from middleware import approve, retry
from onion import Agent, ModelCall, ModelResponse, RunFinished, RunResult, RunState, ToolCall, ToolThreads, tool
from onion.errors import ModelError, OnionError, RunBusy
from onion.providers import AnthropicModel, OpenAIChatModel, OpenAIResponsesModel
from onion.stores import MemoryStore
from onion.testing import (
    BadGzip,
    DropConnection,
    FakeProviderServer,
    HTTPError,
    MalformedBody,
    RecordedRequest,
    ServerItem,
    StreamError,
    TruncatedBody,
    UndecodableBody,
    call,
)

ProviderModel = AnthropicModel | OpenAIChatModel | OpenAIResponsesModel  # the three public provider models

RUNS = int(os.environ.get("ONION_SOAK_RUNS", "100"))
SEED = int(os.environ.get("ONION_SOAK_SEED") or random.randrange(2**32))
AT_ONCE = int(os.environ.get("ONION_SOAK_AT_ONCE", "100"))
LIMIT = 60 + RUNS * 0.25
"""Seconds the runs may take, all together, before those left count as hung (also the clients' timeout)."""
TOOL_THREADS = 4
ATTEMPTS = 4
APIS = ("anthropic", "openai", "openai-responses")
CANCELS = (None, None, None, "request", "tool", "timer", "consumer")
"""How a run is cancelled, if at all (`consumer`: streamed runs only)."""

FAULTS: list[Callable[[random.Random], ServerItem]] = [
    lambda rng: HTTPError(429, retry_after=0.01),
    lambda rng: HTTPError(429, retry_after_ms=2),
    lambda rng: HTTPError(529),
    lambda rng: HTTPError(rng.choice([500, 502, 503])),
    lambda rng: DropConnection(),
    lambda rng: DropConnection(partial_text="half an answ"),
    lambda rng: TruncatedBody(rng.choice(["", "a truncated answer"])),
    lambda rng: MalformedBody(),
    lambda rng: UndecodableBody(cut=rng.random() < 0.5),
    lambda rng: BadGzip(),
    lambda rng: StreamError("overloaded_error", partial_text=rng.choice(["", "over"])),
]


@dataclass
class Plan:
    """One run: what the server answers its requests with, in order, and how it is cancelled."""

    run: int
    api: str
    streamed: bool
    items: collections.deque[ServerItem]
    final: str
    cancel: str | None
    cancel_at: int
    """The request (`request`), tool call (`tool`) or stream event (`consumer`) to cancel at, counting from 1."""
    cancel_after: float
    """Seconds after the run starts (`timer`)."""
    decisions: random.Random | None = None
    """Set for a run whose `compute` calls pause for approval: decides them and how often they are delivered."""
    taken: list[ServerItem] = field(default_factory=list)
    failed_attempts: list[str] = field(default_factory=list)
    tool_calls: int = 0


def make_plan(run: int, rng: random.Random) -> Plan:
    api, streamed = rng.choice(APIS), rng.random() < 0.5
    items: collections.deque[ServerItem] = collections.deque()
    answers: list[ServerItem] = []
    for _ in range(rng.randint(0, 3)):
        batch = []
        for _ in range(rng.randint(1, 3)):
            kind = rng.choice(["lookup", "compute", "broken"])
            args: dict[str, Any] = {"run": run}
            if kind == "lookup":
                args["key"] = rng.choice(["a", "b", "c"])
            elif kind == "compute":
                args["n"] = rng.randint(0, 9)
            batch.append(call(kind, **args))
        answers.append(batch)
    final = f"run {run} is done"
    answers.append(final)
    for answer in answers:
        while rng.random() < 0.35 and len(items) < 30:
            items.append(rng.choice(FAULTS)(rng))
        items.append(answer)
    cancel = rng.choice(CANCELS)
    if cancel == "consumer" and not streamed:
        cancel = None
    decisions = random.Random(rng.getrandbits(64)) if rng.random() < 0.3 else None
    return Plan(run, api, streamed, items, final, cancel, rng.randint(1, 6), rng.uniform(0, 0.05), decisions)


class Soak:
    """The plans, the runs' tasks, and what the tools and the server saw."""

    def __init__(self, seed: int, runs: int) -> None:
        rng = random.Random(seed)
        self.plans = [make_plan(run, random.Random(rng.getrandbits(64))) for run in range(runs)]
        self.tasks: dict[int, asyncio.Task[str]] = {}
        self.ended: dict[int, threading.Event] = {run: threading.Event() for run in range(runs)}
        self.cancel_landed: dict[int, bool] = {}
        self.ran: collections.Counter[str] = collections.Counter()
        self.problems: list[str] = []
        self.loop: asyncio.AbstractEventLoop | None = None
        self.requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self.tools = self._tools()
        self.tool_threads = ToolThreads(TOOL_THREADS)
        self.store = MemoryStore()
        """Where the runs that pause for approval are kept: the one place their decisions are taken from."""
        self.deliveries: collections.Counter[str] = collections.Counter()

    # -- the server's side ---------------------------------------------------------------

    def respond(self, request: RecordedRequest) -> ServerItem:
        """The next item of the run's plan; at its `cancel_at`-th request, cancel the run first."""
        plan = self.plans[int(request.headers["x-soak-run"])]
        item = plan.items.popleft()
        plan.taken.append(item)
        if plan.cancel == "request" and len(plan.taken) == plan.cancel_at:
            assert self.loop is not None
            self.loop.call_soon_threadsafe(self.cancel, plan.run)
            if not self.ended[plan.run].wait(LIMIT):
                self.problems.append(f"run {plan.run}: still running {LIMIT:.0f} s after it was cancelled mid-request")
        return item

    def cancel(self, run: int) -> None:
        self.cancel_landed[run] = self.tasks[run].cancel()

    # -- the tools -----------------------------------------------------------------------

    def record(self, ctx: ToolCall, run: int) -> Plan:
        with self._lock:
            self.ran[ctx.id] += 1
            plan = self.plans[run]
            plan.tool_calls += 1
        return plan

    def _tools(self) -> list[Any]:
        soak = self

        @tool
        async def lookup(ctx: ToolCall, run: int, key: str) -> str:
            """Look a key up."""
            plan = soak.record(ctx, run)
            if plan.cancel == "tool" and plan.tool_calls == plan.cancel_at:
                soak.cancel(run)
            await asyncio.sleep(0)
            return f"{key} is {ord(key)}"

        @tool
        def compute(ctx: ToolCall, run: int, n: int) -> int:
            """Square a number (a sync tool: it runs in a thread)."""
            soak.record(ctx, run)
            return n * n

        @tool
        async def broken(ctx: ToolCall, run: int) -> str:
            """Always fails."""
            soak.record(ctx, run)
            raise RuntimeError("broken on purpose")

        return [lookup, compute, broken]

    # -- the runs ------------------------------------------------------------------------

    async def note_failed_attempt(self, ctx: ModelCall, call_next: Any) -> ModelResponse:
        """A layer inside `retry`: each model attempt's error, for the failure report."""
        try:
            response: ModelResponse = await call_next(ctx)
        except Exception as error:
            plan = self.plans[int(ctx.settings["extra_headers"]["x-soak-run"])]
            plan.failed_attempts.append(f"{type(error).__name__}: {error}"[:160])
            raise
        return response

    async def run(self, plan: Plan, model: ProviderModel, gate: asyncio.Semaphore) -> str:
        """`"result"`, or `"left"` when the consumer stopped reading; raises what the run raised."""
        async with gate:
            layers = [retry(ATTEMPTS, initial=0.001, jitter=0.0, max_backoff=0.002), self.note_failed_attempt]
            agent = Agent(
                model,
                tools=self.tools,
                tool_threads=self.tool_threads,
                middleware=[*layers, approve("compute")] if plan.decisions else layers,
                settings={"extra_headers": {"x-soak-run": str(plan.run)}},
                store=self.store if plan.decisions else None,
            )
            timer = None
            if plan.cancel == "timer":
                timer = asyncio.get_running_loop().call_later(plan.cancel_after, self.cancel, plan.run)
            try:
                result = await self._drive(agent, plan)
            finally:
                if timer is not None:
                    timer.cancel()
        if result is None:
            return "left"
        self._check_result(plan, result)
        return "result"

    async def _drive(self, agent: Agent, plan: Plan) -> RunResult | None:
        result = await self._start(agent, plan)
        while result is not None and result.paused:
            result = await self._decide(agent, plan, result)
        return result

    async def _start(self, agent: Agent, plan: Plan) -> RunResult | None:
        question = f"plan {plan.run}"
        if not plan.streamed:
            return await agent.run(question)
        seen = 0
        async for event in agent.stream(question):
            seen += 1
            if plan.cancel == "consumer" and seen == plan.cancel_at:
                return None
            if isinstance(event, RunFinished):  # or RunPaused
                return event.result
        raise AssertionError(f"run {plan.run}: the stream ended without RunFinished")

    async def _decide(self, agent: Agent, plan: Plan, paused: RunResult) -> RunResult:
        """Decide the paused calls and deliver the decisions once, or several times (in turn, or at once)."""
        rng = plan.decisions
        assert rng is not None
        state = paused.to_state()
        for pending in state.pending:
            if rng.random() < 0.8:
                state.approve(pending.id)
            else:
                state.reject(pending.id, reason="the soak says no")
        text, deliveries = state.to_json(), rng.choice([1, 1, 2, 2, 3])
        at_once = deliveries > 1 and rng.random() < 0.5
        self.deliveries["at once" if at_once else "again" if deliveries > 1 else "once"] += 1
        if at_once:
            outcomes = await asyncio.gather(
                *(agent.resume(RunState.from_json(text)) for _ in range(deliveries)), return_exceptions=True
            )
            taken = [outcome for outcome in outcomes if not isinstance(outcome, RunBusy)]
            if len(taken) != 1:
                self.problems.append(f"run {plan.run}: {deliveries} deliveries at once, {len(taken)} taken: {outcomes}")
            if isinstance(taken[0], BaseException):
                raise taken[0]
            return taken[0]
        result = await agent.resume(RunState.from_json(text))
        for _ in range(deliveries - 1):
            try:
                again = await agent.resume(RunState.from_json(text))
            except RunBusy:  # BatchDecided: the batch was consumed by the first delivery
                continue
            self.problems.append(f"run {plan.run}: decisions delivered again were taken again: {again.output!r}")
        return result

    def _check_result(self, plan: Plan, result: RunResult) -> None:
        onion.check_history(result.messages)
        if result.output != plan.final:
            self.problems.append(f"run {plan.run}: output {result.output!r}, planned {plan.final!r}")
        if plan.items:
            self.problems.append(f"run {plan.run}: a result with {len(plan.items)} planned answers unused")

    def outcome(self, plan: Plan) -> None:
        """Check how the run's task ended against its plan."""
        task = self.tasks[plan.run]
        if task.cancelled():
            if plan.run not in self.cancel_landed:
                self.problems.append(f"run {plan.run}: cancelled, though nobody cancelled it ({plan.cancel})")
            return
        error = task.exception()
        if error is None:
            if self.cancel_landed.get(plan.run):
                self.problems.append(f"run {plan.run}: cancelled while running, yet it returned {task.result()!r}")
            return
        if not isinstance(error, OnionError):
            self.problems.append(f"run {plan.run}: ended in {type(error).__name__}: {error}")
            return
        faults_in_a_row = 0
        for item in reversed(plan.taken):
            if not isinstance(item, str | list):
                faults_in_a_row += 1
            else:
                break
        if not isinstance(error, ModelError) or faults_in_a_row < ATTEMPTS:
            attempts = "; ".join(plan.failed_attempts)
            self.problems.append(
                f"run {plan.run}: {type(error).__name__} after {faults_in_a_row} faults in a row"
                f" ({plan.api}, {'streamed' if plan.streamed else 'not streamed'}, {plan.cancel}); attempts: {attempts}"
            )


def conversation_problems(request: RecordedRequest) -> list[str]:
    """What breaks the tool-call rules of its API in the conversation `request` carries."""
    body = request.body
    if request.path == "/v1/messages":
        return _anthropic_problems(body["messages"])
    if request.path == "/v1/chat/completions":
        entries = [
            (m["role"], [c["id"] for c in m.get("tool_calls") or ()], m.get("tool_call_id")) for m in body["messages"]
        ]
        return _answered_in_order(entries, "tool")
    entries = [
        (
            item.get("type") or item.get("role"),
            [item["call_id"]] if item.get("type") == "function_call" else [],
            item.get("call_id") if item.get("type") == "function_call_output" else None,
        )
        for item in body["input"]
    ]
    merged: list[tuple[str, list[str], str | None]] = []
    for kind, calls, answer in entries:
        if kind == "function_call" and merged and merged[-1][0] == "function_call":
            merged[-1][1].extend(calls)
        else:
            merged.append((kind, calls, answer))
    return _answered_in_order(merged, "function_call_output")


def _answered_in_order(entries: list[tuple[str, list[str], str | None]], result_kind: str) -> list[str]:
    """Each entry with calls must be followed at once by one result entry per call; no other results."""
    problems: list[str] = []
    pending: set[str] = set()
    for index, (kind, calls, answers) in enumerate(entries):
        if kind == result_kind:
            if answers not in pending:
                problems.append(f"entry {index}: a result for {answers!r}, which is not a call just made")
            pending.discard(answers or "")
            continue
        if pending:
            problems.append(f"entry {index}: {sorted(pending)} not answered before a {kind} entry")
            pending = set()
        pending = set(calls)
    if pending:
        problems.append(f"the request ends with {sorted(pending)} unanswered")
    return problems


def _anthropic_problems(messages: list[dict[str, Any]]) -> list[str]:
    problems: list[str] = []
    calls: list[str] = []
    for index, message in enumerate(messages):
        blocks = message["content"] if isinstance(message["content"], list) else [{"type": "text"}]
        if index and message["role"] == messages[index - 1]["role"]:
            problems.append(f"message {index}: two {message['role']} turns in a row")
        kinds = [block["type"] for block in blocks]
        results = [block["tool_use_id"] for block in blocks if block["type"] == "tool_result"]
        if kinds[: len(results)] != ["tool_result"] * len(results):
            problems.append(f"message {index}: tool results after other blocks")
        if sorted(results) != sorted(calls):
            problems.append(f"message {index}: results for {sorted(results)}, calls were {sorted(calls)}")
        calls = [block["id"] for block in blocks if block["type"] == "tool_use"]
    if calls:
        problems.append(f"the request ends with {sorted(calls)} unanswered")
    return problems


def build_model(api: str, server: FakeProviderServer) -> ProviderModel:
    """A model whose client waits as long as the soak does: a busy loop must not turn into timeouts (5 s to connect)."""
    if api == "anthropic":
        return AnthropicModel("claude-soak", base_url=server.url, api_key="test-key", timeout=LIMIT)
    if api == "openai":
        return OpenAIChatModel("gpt-soak", base_url=server.openai_url, api_key="test-key", timeout=LIMIT)
    return OpenAIResponsesModel("gpt-soak", base_url=server.openai_url, api_key="test-key", timeout=LIMIT)


async def soak(seed: int, runs: int) -> Soak:
    """Run the soak; return it for checking (the server is closed and the clients too)."""
    state = Soak(seed, runs)
    state.loop = asyncio.get_running_loop()
    before = asyncio.all_tasks()
    gate = asyncio.Semaphore(AT_ONCE)
    with FakeProviderServer(respond=state.respond) as server:
        models = {api: build_model(api, server) for api in APIS}
        for plan in state.plans:
            task = asyncio.create_task(state.run(plan, models[plan.api], gate))
            task.add_done_callback(lambda _, run=plan.run: state.ended[run].set())
            state.tasks[plan.run] = task
        _, pending = await asyncio.wait(state.tasks.values(), timeout=LIMIT)
        for task in pending:
            run = next(run for run, each in state.tasks.items() if each is task)
            plan = state.plans[run]
            state.problems.append(
                f"run {run} still running after {LIMIT:.0f} s: {plan.api}, {plan.cancel}, {plan.taken}"
            )
            task.cancel()
        if pending:
            await asyncio.wait(pending, timeout=10)
        for model in models.values():
            await model.aclose()
        state.requests = list(server.requests)
    for _ in range(3):
        await asyncio.sleep(0)
    left = asyncio.all_tasks() - before
    if left:
        state.problems.append(f"{len(left)} tasks left running: {sorted(map(repr, left))[:5]}")
    return state


def open_fds() -> set[int]:
    gc.collect()
    return {int(fd) for fd in os.listdir("/proc/self/fd")}


def test_soak_many_runs_with_wire_faults_and_cancellations_end_cleanly() -> None:
    """Every run ends as planned, every request is a valid conversation, no tool runs twice, nothing leaks."""
    threads_before, fds_before = set(threading.enumerate()), open_fds()

    state = asyncio.run(soak(SEED, RUNS))

    for plan in state.plans:
        state.outcome(plan)
    problems = state.problems
    for request in state.requests:
        if "x-soak-run" not in request.headers:
            problems.append(f"a request without its run: {request.path}")
            continue
        for problem in conversation_problems(request):
            problems.append(f"run {request.headers['x-soak-run']} ({request.path}): {problem}")
    problems += [f"tool call {call_id} ran {times} times" for call_id, times in state.ran.items() if times > 1]
    if RUNS >= 100 and len(state.deliveries) < 3:
        problems.append(f"decisions were not delivered in every way (once, again, at once): {state.deliveries}")
    left_threads = [t.name for t in set(threading.enumerate()) - threads_before]
    tool_threads = left_threads.count("onion-tool")
    if len(left_threads) > tool_threads or tool_threads > TOOL_THREADS:
        problems.append(f"threads left: {left_threads} (at most {TOOL_THREADS} idle onion-tool threads may stay)")
    if state.tool_threads.left_running:
        problems.append(f"{state.tool_threads.left_running} sync tool calls still running: {state.tool_threads!r}")
    left_fds = open_fds() - fds_before
    if left_fds:
        problems.append(f"{len(left_fds)} file descriptors left open")
    if problems:
        outcomes = collections.Counter(
            "cancelled" if t.cancelled() else type(t.exception()).__name__ if t.exception() else t.result()
            for t in state.tasks.values()
        )
        shown = "\n".join(problems[:40])
        pytest.fail(
            f"soak seed {SEED}, {RUNS} runs (rerun: ONION_SOAK_SEED={SEED}), outcomes {dict(outcomes)}:\n{shown}"
        )
