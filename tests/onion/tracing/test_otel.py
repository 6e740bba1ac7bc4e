"""`tracing.instrument()`: OpenTelemetry spans and metrics, read back through the real SDK's in-memory exporter.

The model is the real Anthropic SDK client talking HTTP to the fake provider.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from middleware import cache, log, pseudonymize, redact, retry
from onion import Agent, Handler, Message, ModelCall, ModelResponse, ToolRequest, Usage, tool, tracing
from onion.providers import AnthropicModel
from onion.testing import FakeProviderServer, HTTPError

KEY = "sk-ant-api03-" + "k" * 40
"""The client's API key: it must appear in no span."""
USER_KEY = "sk-proj-" + "u" * 32
"""A key the user pasted into a message: redacted wherever it would appear."""
EMAIL = "jane.doe@example.com"


@pytest.fixture(scope="module", autouse=True)
def _fast_tls(one_ssl_context: None) -> None:
    """Build the TLS context once for this module (see tests/conftest.py)."""


class Telemetry:
    """The SDK's tracer and meter providers with in-memory readers, as `instrument()` was given them."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])

    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def children(self, parent: ReadableSpan) -> list[ReadableSpan]:
        """The spans whose parent is `parent`, in the order they started."""
        found = [s for s in self.spans() if s.parent is not None and s.parent.span_id == parent.context.span_id]
        return sorted(found, key=lambda s: s.start_time or 0)

    def roots(self) -> list[ReadableSpan]:
        return sorted((s for s in self.spans() if s.parent is None), key=lambda s: s.start_time or 0)

    def tree(self, span: ReadableSpan) -> list[Any]:
        """`[name, [children's trees]]`."""
        return [span.name, [self.tree(child) for child in self.children(span)]]

    def histogram(self, name: str) -> list[Any]:
        data = self.reader.get_metrics_data()
        assert data is not None
        return [
            point
            for resource in data.resource_metrics
            for scope in resource.scope_metrics
            for metric in scope.metrics
            if metric.name == name
            for point in metric.data.data_points
        ]


@pytest.fixture
def telemetry() -> Iterator[Telemetry]:
    """`instrument()` sending to in-memory readers for the test; `uninstrument()` after it."""
    found = Telemetry()
    tracing.instrument(found.tracer_provider, meter_provider=found.meter_provider)
    yield found
    tracing.uninstrument()


@pytest.fixture
async def server() -> AsyncIterator[FakeProviderServer]:
    async with FakeProviderServer() as fake:
        yield fake


@tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
async def mul(a: int, b: int) -> int:
    """Multiply two integers."""
    return a * b


@tool
async def neg(a: int) -> int:
    """Negate an integer."""
    return -a


async def no_sleep(seconds: float) -> None:
    """retry's sleep in these tests: the backoff is recorded, not waited."""


def three_tools() -> ModelResponse:
    calls = [
        ToolRequest("call_add", "add", {"a": 1, "b": 2}),
        ToolRequest("call_mul", "mul", {"a": 3, "b": 4}),
        ToolRequest("call_neg", "neg", {"a": 5}),
    ]
    return ModelResponse(Message.assistant("", calls), Usage(120, 40, 1), "tool_use")


def agent_on(server: FakeProviderServer, *middleware: Any) -> Agent:
    model = AnthropicModel("claude-test", base_url=server.url, api_key=KEY)
    stack = middleware or (log, retry(sleep=no_sleep), cache)
    return Agent(model, tools=[add, mul, neg], middleware=stack, name="calculator")


async def test_a_run_is_one_span_tree_with_the_genai_names_and_attributes(
    telemetry: Telemetry, server: FakeProviderServer
) -> None:
    """Under log, retry, cache: invoke_agent > chat (a request per attempt) > tool_batch > execute_tool x3 > chat."""
    server.script(
        [HTTPError(429, "slow down"), three_tools(), ModelResponse(Message.assistant("3, 12, -5"), Usage(200, 10, 1))]
    )
    agent = agent_on(server)
    result = await agent.run("add 1+2, multiply 3*4, negate 5")
    await agent.model.aclose()  # type: ignore[attr-defined]
    assert result.output == "3, 12, -5"

    [run] = telemetry.roots()
    assert telemetry.tree(run) == [
        "invoke_agent calculator",
        [
            ["chat claude-test", [["request claude-test", []], ["request claude-test", []]]],
            [
                "tool_batch",
                [["execute_tool add", []], ["execute_tool mul", []], ["execute_tool neg", []]],
            ],
            ["chat claude-test", [["request claude-test", []]]],
        ],
    ]
    assert run.attributes is not None and dict(run.attributes) == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "calculator",
        "gen_ai.provider.name": "anthropic",
        "gen_ai.request.model": "claude-test",
        "onion.run.id": result.run_id,
        "gen_ai.usage.input_tokens": 320,
        "gen_ai.usage.output_tokens": 50,
        "gen_ai.usage.cache_read.input_tokens": 0,
        "onion.run.status": "completed",
        "onion.run.steps": 2,
    }
    first, batch, second = telemetry.children(run)
    assert {**(first.attributes or {})} == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "anthropic",
        "gen_ai.request.model": "claude-test",
        "onion.step": 1,
        "gen_ai.response.finish_reasons": ("tool_use",),
        "gen_ai.response.model": "claude-test",
        "gen_ai.usage.input_tokens": 120,
        "gen_ai.usage.output_tokens": 40,
        "gen_ai.usage.cache_read.input_tokens": 0,
        "onion.cached": False,
    }
    assert (second.attributes or {})["gen_ai.response.finish_reasons"] == ("end",)
    assert (second.attributes or {})["gen_ai.usage.input_tokens"] == 200
    assert {**(batch.attributes or {})} == {"onion.tool_batch.size": 3, "onion.tool_batch.tools": ("add", "mul", "neg")}
    tools = telemetry.children(batch)
    assert [(s.attributes or {})["gen_ai.tool.call.id"] for s in tools] == ["call_add", "call_mul", "call_neg"]
    assert {**(tools[0].attributes or {})} == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "add",
        "gen_ai.tool.call.id": "call_add",
        "gen_ai.tool.type": "function",
        "onion.tool.is_error": False,
    }


async def test_a_retried_call_shows_each_attempt_and_the_failed_one_has_error_status(
    telemetry: Telemetry, server: FakeProviderServer
) -> None:
    """Two request spans under one chat span: the 429 one with error status and error.type, then the good one."""
    server.script([HTTPError(429, "slow down"), "done"])
    agent = agent_on(server)
    await agent.run("hi")
    await agent.model.aclose()  # type: ignore[attr-defined]
    [run] = telemetry.roots()
    [chat] = telemetry.children(run)
    failed, answered = telemetry.children(chat)
    assert failed.status.status_code is StatusCode.ERROR
    assert (failed.attributes or {})["error.type"] == "RateLimitedError"
    assert [event.name for event in failed.events] == ["exception"]
    assert answered.status.status_code is StatusCode.UNSET
    assert chat.status.status_code is StatusCode.UNSET


async def test_a_cache_hit_has_a_chat_span_and_no_request_span(
    telemetry: Telemetry, server: FakeProviderServer
) -> None:
    """The second identical run is served by the cache: its chat span is marked cached, with zero tokens, no child."""
    server.script([ModelResponse(Message.assistant("hello"), Usage(30, 5, 1))])
    agent = agent_on(server)
    await agent.run("hi")
    await agent.run("hi")
    await agent.model.aclose()  # type: ignore[attr-defined]
    first, second = telemetry.roots()
    assert telemetry.tree(first) == ["invoke_agent calculator", [["chat claude-test", [["request claude-test", []]]]]]
    assert telemetry.tree(second) == ["invoke_agent calculator", [["chat claude-test", []]]]
    [chat] = telemetry.children(second)
    attributes = chat.attributes or {}
    assert attributes["onion.cached"] is True
    assert (attributes["gen_ai.usage.input_tokens"], attributes["gen_ai.usage.output_tokens"]) == (0, 0)


async def test_errors_set_span_status_with_their_class(telemetry: Telemetry, server: FakeProviderServer) -> None:
    """A tool that raises: its execute_tool span is an error (error.type ValueError); a failed run too."""

    @tool
    def explode(reason: str) -> str:
        """Always fails."""
        raise ValueError(f"no good: {reason}")

    server.script([[ToolRequest("call_x", "explode", {"reason": "test"})], "sorry", HTTPError(401, "bad key")])
    agent = Agent(AnthropicModel("claude-test", base_url=server.url, api_key=KEY), tools=[explode])
    await agent.run("explode")
    with pytest.raises(Exception, match="401"):
        await agent.run("again")
    await agent.model.aclose()  # type: ignore[attr-defined]
    ok, failed = telemetry.roots()
    [tool_span] = [s for s in telemetry.spans() if s.name == "execute_tool explode"]
    assert tool_span.status.status_code is StatusCode.ERROR
    assert (tool_span.attributes or {})["error.type"] == "ValueError"
    assert tool_span.status.description == "ValueError: no good: test"
    assert ok.status.status_code is StatusCode.UNSET
    assert failed.status.status_code is StatusCode.ERROR
    assert (failed.attributes or {})["error.type"] == "AuthenticationError"
    [chat] = telemetry.children(failed)
    assert chat.status.status_code is StatusCode.ERROR


async def test_no_span_holds_a_key_or_a_redacted_value_even_with_content(server: FakeProviderServer) -> None:
    """With content=True messages, arguments and results are recorded scrubbed; every attribute, event and status
    of every span is free of the client's key, the user's key, the e-mail address and the password."""
    telemetry = Telemetry()
    tracing.instrument(telemetry.tracer_provider, content=True, layers=True)
    try:

        @tool
        def login(user: str, password: str) -> str:
            """Log in; fails loudly, quoting what it got."""
            raise PermissionError(f"login refused for {user} with password={password} (key {USER_KEY})")

        server.script(
            [
                [ToolRequest("call_login", "login", {"user": EMAIL, "password": "hunter2-secret"})],
                ModelResponse(Message.assistant(f"I could not log in as {EMAIL} with {USER_KEY}"), Usage(9, 9, 1)),
                HTTPError(401, f"invalid x-api-key {KEY}"),
            ]
        )
        model = AnthropicModel("claude-test", base_url=server.url, api_key=KEY)
        agent = Agent(model, tools=[login], middleware=[log, redact, retry(sleep=no_sleep), cache])
        await agent.run(f"log me in as {EMAIL}, my key is {USER_KEY}, password: hunter2-secret")
        with pytest.raises(Exception, match="401"):
            await agent.run(f"and again, with api_key={USER_KEY}")
        await model.aclose()
    finally:
        tracing.uninstrument()
    spans = telemetry.spans()
    texts = []
    for span in spans:
        texts.extend(f"{span.name} {key}={value}" for key, value in (span.attributes or {}).items())
        texts.extend(f"{span.name} {e.name} {k}={v}" for e in span.events for k, v in (e.attributes or {}).items())
        texts.append(f"{span.name} status {span.status.description}")
    assert any("gen_ai.input.messages" in text for text in texts), "content was recorded"
    assert any("[REDACTED]" in text for text in texts), "and scrubbed"
    for secret in (KEY, USER_KEY, EMAIL, "hunter2-secret", "k" * 40):
        leaks = [text for text in texts if secret in text]
        assert not leaks, f"{secret!r} in {leaks[:3]}"


@pytest.mark.parametrize("real_values", [False, True])
async def test_under_pseudonymize_content_holds_what_the_model_got_unless_real_values(
    server: FakeProviderServer, real_values: bool
) -> None:
    """With content=True the input, tool arguments and output are recorded with the placeholders the model saw;
    `real_values=True` records what the tool and the user got instead."""
    telemetry = Telemetry()
    tracing.instrument(telemetry.tracer_provider, content=True, real_values=real_values)
    try:

        @tool
        def ring(phone: str, employee: str) -> str:
            """Ring an employee."""
            return f"rang {employee}"

        asked = ToolRequest("call_ring", "ring", {"phone": "<PHONE_1>", "employee": "<EMPLOYEE_1>"})
        server.script([[asked], "Rang <EMPLOYEE_1>."])
        model = AnthropicModel("claude-test", base_url=server.url, api_key=KEY)
        agent = Agent(model, tools=[ring], middleware=[pseudonymize(EMPLOYEE=r"EMP-\d{6}")])
        assert (await agent.run("Ring EMP-123456 on +44 20 7946 0958")).output == "Rang EMP-123456."
        await model.aclose()
    finally:
        tracing.uninstrument()
    attributes = {(span.name, key): str(value) for span in telemetry.spans() for key, value in span.attributes.items()}
    run_output = attributes[("invoke_agent agent", "gen_ai.output.messages")]
    arguments = attributes[("execute_tool ring", "gen_ai.tool.call.arguments")]
    if real_values:
        assert "Rang EMP-123456." in run_output and "EMP-123456" in arguments
        return
    assert "Rang <EMPLOYEE_1>." in run_output and "<EMPLOYEE_1>" in arguments
    assert "<PHONE_1>" in attributes[("invoke_agent agent", "gen_ai.input.messages")]
    leaks = [item for item in attributes.items() if "EMP-123456" in item[1] or "7946" in item[1]]
    assert not leaks


async def test_layers_true_adds_a_span_per_layer_pass_nested_in_chain_order(server: FakeProviderServer) -> None:
    """log > retry > cache, once per pass: retry calls cache twice, each pass around its own request."""
    telemetry = Telemetry()
    tracing.instrument(telemetry.tracer_provider, layers=True)
    try:
        server.script([HTTPError(429, "slow down"), "done"])
        agent = agent_on(server)
        await agent.run("hi")
        await agent.model.aclose()  # type: ignore[attr-defined]
    finally:
        tracing.uninstrument()
    [run] = telemetry.roots()
    cache_pass = ["layer cache", [["request claude-test", []]]]
    assert telemetry.tree(run) == [
        "invoke_agent calculator",
        [["layer log", [["chat claude-test", [["layer log", [["layer retry", [cache_pass, cache_pass]]]]]]]]],
    ]
    retry_span = next(s for s in telemetry.spans() if s.name == "layer retry")
    attributes = retry_span.attributes or {}
    assert attributes["onion.layer.passes"] == 2
    retried, waited = attributes["onion.layer.did"]  # type: ignore[misc]
    assert retried == "retried 1x after RateLimitedError"
    assert waited == f"waited {attributes['onion.layer.waited_s']:.2g} s"


async def test_a_note_from_inside_a_tool_is_an_event_of_the_tool_span_not_of_a_layer_span(
    server: FakeProviderServer,
) -> None:
    """With `layers=True`, a tool's `tracing.note()` is an `onion.note` event of its `execute_tool` span."""

    @tool
    async def look_up(city: str) -> str:
        """Look a city up."""
        tracing.note("cache miss")
        return "sunny"

    telemetry = Telemetry()
    tracing.instrument(telemetry.tracer_provider, layers=True)
    try:
        server.script([ModelResponse(Message.assistant("", [ToolRequest("c1", "look_up", {"city": "Oslo"})])), "ok"])
        model = AnthropicModel("claude-test", base_url=server.url, api_key=KEY)
        agent = Agent(model, tools=[look_up], middleware=[log])
        await agent.run("weather?")
        await model.aclose()
    finally:
        tracing.uninstrument()
    noted = [span.name for span in telemetry.spans() for event in span.events if event.name == "onion.note"]
    assert noted == ["execute_tool look_up"]


async def test_metrics_record_tokens_and_duration_per_model_call(
    telemetry: Telemetry, server: FakeProviderServer
) -> None:
    """gen_ai.client.token.usage gets input and output tokens of each model call; operation.duration one per call."""
    server.script([three_tools(), ModelResponse(Message.assistant("3, 12, -5"), Usage(200, 10, 1))])
    agent = agent_on(server)
    await agent.run("add 1+2, multiply 3*4, negate 5")
    await agent.model.aclose()  # type: ignore[attr-defined]
    tokens = {
        p.attributes["gen_ai.token.type"]: (p.count, p.sum) for p in telemetry.histogram("gen_ai.client.token.usage")
    }
    assert tokens == {"input": (2, 320), "output": (2, 50)}
    [duration] = telemetry.histogram("gen_ai.client.operation.duration")
    assert duration.count == 2
    assert duration.attributes["gen_ai.operation.name"] == "chat"
    assert duration.attributes["gen_ai.provider.name"] == "anthropic"


async def test_tracing_off_builds_chains_without_any_wrapper() -> None:
    """Before instrument() and after uninstrument(), an agent's outermost model chain is its first layer itself."""

    async def first(ctx: ModelCall, call_next: Handler) -> ModelResponse:
        return await call_next(ctx)  # type: ignore[no-any-return]

    from onion.testing import ScriptedModel

    agent = Agent(ScriptedModel(["a", "b", "c"]), middleware=[first])
    await agent.run("hi")
    assert agent._compiled().model_chain.__code__ == first.__code__
    tracing.instrument(TracerProvider())
    try:
        await agent.run("hi")
        assert agent._compiled().model_chain.__code__ != first.__code__
    finally:
        tracing.uninstrument()
    await agent.run("hi")
    assert agent._compiled().model_chain.__code__ == first.__code__


async def test_an_exporter_lets_each_finished_call_go_while_its_run_goes_on() -> None:
    """With instrument() alone, a model call (and all it holds) is freed once its span ends, mid-run."""
    import gc
    import weakref

    class Probe:
        """Held by one model call only (in its settings)."""

    class Negating:
        """Asks for `neg` three times, then answers; keeps no call."""

        name = "negating"

        async def request(self, call: ModelCall) -> ModelResponse:
            step = call.run.steps
            if step > 3:
                return ModelResponse(Message.assistant("done"))
            return ModelResponse(Message.assistant("", [ToolRequest(f"c{step}", "neg", {"a": step})]))

    seen: list[weakref.ref[Probe]] = []
    alive: list[int] = []

    async def watch(ctx: ModelCall, call_next: Handler) -> ModelResponse:
        gc.collect()
        alive.append(sum(ref() is not None for ref in seen))
        probe = Probe()
        ctx.settings["probe"] = probe
        seen.append(weakref.ref(probe))
        return await call_next(ctx)  # type: ignore[no-any-return]

    agent = Agent(Negating(), tools=[neg], middleware=[watch])
    tracing.instrument(TracerProvider())
    try:
        await agent.run("negate thrice")
    finally:
        tracing.uninstrument()
    assert alive == [0, 0, 0, 0]
