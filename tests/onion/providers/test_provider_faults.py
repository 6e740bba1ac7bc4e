"""Every provider failure, through the real SDKs, becomes the right `ModelError`, sent exactly once.

Each fault is served by the fake server to each API, streamed and not. The
error must be the mapped onion class with `retryable`, `retry_after`,
`status_code` and `provider` set, chain the SDK's (or transport's) exception,
and cost exactly one request: onion-built clients never retry on their own.
"""

from __future__ import annotations

import email.utils
import gc
import time
from typing import Any

import anthropic
import httpx2
import openai
import pytest

from middleware import retry
from onion import Agent
from onion.errors import (
    AuthenticationError,
    BadRequestError,
    ConnectionLostError,
    ContextTooLongError,
    ModelError,
    ModelTimeoutError,
    OverloadedError,
    RateLimitedError,
    ResponseFormatError,
    ServerError,
)
from onion.testing import (
    BadGzip,
    Delay,
    DropConnection,
    FakeProviderServer,
    HTTPError,
    MalformedBody,
    ServerItem,
    StreamError,
    TruncatedBody,
    UndecodableBody,
)

FAULTS: list[tuple[str, ServerItem, type[ModelError], bool, float | None, int | None]] = [
    ("429-retry-after", HTTPError(429, retry_after=2), RateLimitedError, True, 2.0, 429),
    ("429-retry-after-ms", HTTPError(429, retry_after=9, retry_after_ms=250), RateLimitedError, True, 0.25, 429),
    (
        "429-insufficient-quota",
        HTTPError(429, "You exceeded your current quota", error_type="insufficient_quota"),
        RateLimitedError,
        False,
        None,
        429,
    ),
    ("529-overloaded", HTTPError(529), OverloadedError, True, None, 529),
    ("500-server-error", HTTPError(500), ServerError, True, None, 500),
    ("503-with-retry-after", HTTPError(503, retry_after=1), ServerError, True, 1.0, 503),
    ("400-bad-request", HTTPError(400, "messages: field required"), BadRequestError, False, None, 400),
    ("404-not-found", HTTPError(404, "model: no such model"), BadRequestError, False, None, 404),
    ("422-unprocessable", HTTPError(422, "tools.0: invalid schema"), BadRequestError, False, None, 422),
    (
        "400-prompt-too-long",
        HTTPError(400, "prompt is too long: 210000 tokens > 200000 maximum"),
        ContextTooLongError,
        False,
        None,
        400,
    ),
    (
        "400-context-length-exceeded",
        HTTPError(400, "This model's maximum context length is 128000 tokens.", error_type="context_length_exceeded"),
        ContextTooLongError,
        False,
        None,
        400,
    ),
    ("401-unauthorized", HTTPError(401, "invalid x-api-key"), AuthenticationError, False, None, 401),
    ("403-forbidden", HTTPError(403, "no access to this model"), AuthenticationError, False, None, 403),
    ("dropped-before-answer", DropConnection(), ConnectionLostError, True, None, None),
    ("malformed-json-body", MalformedBody(), ResponseFormatError, True, None, None),
]


async def ask(model: Any, streamed: bool) -> str:
    """One model call through an agent, streamed or not."""
    agent = Agent(model)
    if streamed:
        events = [event async for event in agent.stream("hi")]
        return str(events[-1].result.output)
    return (await agent.run("hi")).output


def provider_of(api: str) -> str:
    return "anthropic" if api == "anthropic" else "openai"


@pytest.mark.parametrize(
    ("item", "kind", "retryable", "retry_after", "status"),
    [fault[1:] for fault in FAULTS],
    ids=[fault[0] for fault in FAULTS],
)
async def test_fault_maps_to_its_error_class_after_exactly_one_request(
    api: str,
    streamed: bool,
    server: FakeProviderServer,
    make_model: Any,
    item: ServerItem,
    kind: type[ModelError],
    retryable: bool,
    retry_after: float | None,
    status: int | None,
) -> None:
    """The mapped class, its retry facts and the SDK's exception chained; the server saw one request."""
    server.script([item, "never sent"])
    with pytest.raises(ModelError) as caught:
        await ask(make_model(api), streamed)
    error = caught.value
    assert type(error) is kind
    assert error.retryable is retryable
    assert error.retry_after == retry_after
    assert error.status_code == status
    assert error.provider == provider_of(api)
    assert error.__cause__ is not None
    assert len(server.requests) == 1
    assert server.remaining == 1


async def test_overloaded_event_mid_stream_is_a_retryable_overload(
    api: str, server: FakeProviderServer, make_model: Any
) -> None:
    """An `overloaded_error` event inside a 200 stream (anthropic raises it with status 200) is `OverloadedError`."""
    server.script([StreamError("overloaded_error", "Overloaded", partial_text="Hel")])
    with pytest.raises(OverloadedError) as caught:
        await ask(make_model(api), streamed=True)
    assert caught.value.retryable
    assert caught.value.status_code is None
    if api == "anthropic":
        assert isinstance(caught.value.__cause__, anthropic.APIStatusError)
        assert caught.value.__cause__.status_code == 200
    assert len(server.requests) == 1


async def test_rate_limit_event_mid_stream_is_rate_limited(
    api: str, server: FakeProviderServer, make_model: Any
) -> None:
    server.script([StreamError("rate_limit_error", "slow down")])
    with pytest.raises(RateLimitedError):
        await ask(make_model(api), streamed=True)


async def test_stream_error_fault_on_a_plain_request_is_the_matching_status(
    api: str, server: FakeProviderServer, make_model: Any
) -> None:
    """Asked without streaming, the server answers an in-stream fault with its HTTP status (529)."""
    server.script([StreamError("overloaded_error")])
    with pytest.raises(OverloadedError) as caught:
        await ask(make_model(api), streamed=False)
    assert caught.value.status_code == 529


async def test_connection_dropped_mid_stream_is_connection_lost(
    api: str, server: FakeProviderServer, make_model: Any
) -> None:
    """A drop inside the chunked body; anthropic lets the raw httpx2 error through, onion maps it too."""
    server.script([DropConnection(partial_text="Hello, wor")])
    with pytest.raises(ConnectionLostError) as caught:
        await ask(make_model(api), streamed=True)
    assert caught.value.retryable
    cause = caught.value.__cause__
    if api == "anthropic":
        assert isinstance(cause, httpx2.RemoteProtocolError)
    else:
        assert isinstance(cause, openai.APIConnectionError)
    assert len(server.requests) == 1


async def test_slow_answer_past_the_client_timeout_is_a_model_timeout(
    api: str, streamed: bool, server: FakeProviderServer, make_model: Any
) -> None:
    server.script([Delay(5, "too late")])
    with pytest.raises(ModelTimeoutError) as caught:
        await ask(make_model(api, timeout=0.2), streamed)
    assert caught.value.retryable
    assert isinstance(caught.value, TimeoutError)
    assert len(server.requests) == 1


async def test_retry_after_as_an_http_date(server: FakeProviderServer, make_model: Any) -> None:
    when = email.utils.formatdate(time.time() + 30, usegmt=True)
    server.script([HTTPError(429, retry_after=when)])
    with pytest.raises(RateLimitedError) as caught:
        await ask(make_model("anthropic"), streamed=False)
    assert caught.value.retry_after is not None
    assert 28 <= caught.value.retry_after <= 31


def causes(error: BaseException) -> list[type[BaseException]]:
    """The classes along `error`'s chain of causes (and contexts), outermost first."""
    chain: list[type[BaseException]] = []
    current: BaseException | None = error
    while current is not None:
        chain.append(type(current))
        current = current.__cause__ or current.__context__
    return chain


@pytest.mark.parametrize("cut", [False, True], ids=["stray-byte", "cut-character"])
async def test_a_body_that_is_not_utf8_is_a_retryable_response_format_error(
    api: str, streamed: bool, cut: bool, server: FakeProviderServer, make_model: Any
) -> None:
    """A stray byte, or a multi-byte character cut in half, in a body or an SSE event: never a bare decode error."""
    server.script([UndecodableBody(cut=cut), "never sent"])
    with pytest.raises(ResponseFormatError) as caught:
        await ask(make_model(api), streamed)
    assert caught.value.retryable
    assert "not valid UTF-8" in str(caught.value)
    assert UnicodeDecodeError in causes(caught.value)
    assert caught.value.provider == provider_of(api)
    assert len(server.requests) == 1


async def test_retry_retries_a_body_that_is_not_utf8(
    api: str, streamed: bool, server: FakeProviderServer, make_model: Any
) -> None:
    server.script([UndecodableBody(cut=True), "readable"])
    agent = Agent(make_model(api), middleware=[retry(2, initial=0.0, jitter=0.0)])
    if streamed:
        events = [event async for event in agent.stream("hi")]
        output = events[-1].result.output
    else:
        output = (await agent.run("hi")).output
    assert output == "readable"
    assert len(server.requests) == 2


async def test_a_body_labelled_gzip_that_is_not_is_connection_lost_on_every_path(
    api: str, streamed: bool, server: FakeProviderServer, make_model: Any
) -> None:
    """The transport's content-decoding failure is mapped alike, streamed or not, whichever SDK raised it."""
    server.script([BadGzip()])
    with pytest.raises(ConnectionLostError) as caught:
        await ask(make_model(api), streamed)
    assert caught.value.retryable
    assert httpx2.DecodingError in causes(caught.value)
    assert len(server.requests) == 1


@pytest.mark.parametrize("partial_text", ["", "Hello, wor"], ids=["at-once", "after-text"])
async def test_a_truncated_body_or_stream_is_a_format_error(
    api: str, streamed: bool, partial_text: str, server: FakeProviderServer, make_model: Any
) -> None:
    """Cut cleanly (no transport error): half a JSON body, or a stream without its final event, is malformed."""
    server.script([TruncatedBody(partial_text)])
    with pytest.raises(ResponseFormatError) as caught:
        await ask(make_model(api), streamed)
    assert caught.value.retryable
    assert len(server.requests) == 1


async def test_a_response_nested_too_deeply_for_the_sdk_is_a_response_format_error() -> None:
    """Anthropic's SDK parses `tool_use.input` with the body: a `RecursionError` there is a retryable format error."""
    deep = "[" * 100_000 + "]" * 100_000  # too deep for json on every Python (3.13 parses 5,000 levels)
    body = (
        '{"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test", "content": '
        f'[{{"type": "tool_use", "id": "toolu_1", "name": "add", "input": {{"a": {deep}}}}}], '
        '"stop_reason": "tool_use", "stop_sequence": null, "usage": {"input_tokens": 1, "output_tokens": 1}}'
    )

    def answer(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, content=body.encode(), headers={"content-type": "application/json"})

    http = httpx2.AsyncClient(transport=httpx2.MockTransport(answer))
    client = anthropic.AsyncAnthropic(api_key="test-key", http_client=http, max_retries=0)
    from onion.providers import AnthropicModel

    gc.collect()  # the collector must not run down in the overflowed stack: what it finalises there overflows too
    gc.disable()
    try:
        with pytest.raises(ResponseFormatError) as caught:
            await ask(AnthropicModel("claude-test", client=client), streamed=False)
    finally:
        gc.enable()
    await client.close()
    assert caught.value.retryable
    assert "nested too deeply" in str(caught.value)
    assert isinstance(caught.value.__cause__, RecursionError)
