"""`FakeProviderServer` on its own: plain HTTP from the standard library, no SDK involved."""

from __future__ import annotations

import asyncio
import collections
import gzip
import http.client
import json
import threading
import time
import urllib.error
import urllib.request
import zlib
from collections.abc import Callable
from typing import Any

import pytest

from onion import Message, ModelResponse, Usage
from onion.testing import (
    BadGzip,
    Delay,
    DropConnection,
    FakeProviderServer,
    HTTPError,
    MalformedBody,
    RecordedRequest,
    StreamError,
    TruncatedBody,
    UndecodableBody,
    call,
    malformed_call,
)


def post(url: str, body: Any, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    """POST JSON, return (status, lower-case headers, body), error statuses included."""
    request = urllib.request.Request(
        url, json.dumps(body).encode(), {"content-type": "application/json", **(headers or {})}
    )
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, {k.lower(): v for k, v in response.headers.items()}, response.read()
    except urllib.error.HTTPError as error:
        return error.code, {k.lower(): v for k, v in error.headers.items()}, error.read()


def sse_events(data: bytes) -> list[tuple[str | None, str]]:
    events = []
    for frame in data.decode().split("\n\n"):
        if not frame.strip():
            continue
        fields = dict(line.split(": ", 1) for line in frame.splitlines())
        events.append((fields.get("event"), fields["data"]))
    return events


def test_it_answers_and_records_requests_in_order(server: FakeProviderServer) -> None:
    server.script(["first", [call("add", a=1)]])
    chat = f"{server.openai_url}/chat/completions"
    status, headers, body = post(chat, {"model": "m", "messages": []}, {"X-Test": "1"})
    assert status == 200
    assert headers["content-type"] == "application/json"
    assert json.loads(body)["choices"][0]["message"]["content"] == "first"
    status, _, body = post(f"{server.url}/v1/messages", {"model": "m", "max_tokens": 5, "messages": []})
    assert json.loads(body)["content"][0]["input"] == {"a": 1}
    assert [(r.method, r.path) for r in server.requests] == [("POST", "/v1/chat/completions"), ("POST", "/v1/messages")]
    first = server.requests[0]
    assert isinstance(first, RecordedRequest)
    assert first.headers["x-test"] == "1"
    assert first.body == {"model": "m", "messages": []}
    assert server.remaining == 0


def test_past_the_end_of_the_script_it_answers_400_saying_so(server: FakeProviderServer) -> None:
    status, _, body = post(f"{server.url}/v1/messages", {"model": "m"})
    assert status == 400
    assert "script has 0 items" in json.loads(body)["error"]["message"]


@pytest.mark.parametrize(
    ("path", "body", "where"),
    [
        ("/v1/messages", {"tools": [{"name": "notes.search", "input_schema": {}}]}, "tools.0.name"),
        ("/v1/chat/completions", {"tools": [{"type": "function", "function": {"name": "a/b"}}]}, "function.name"),
        ("/v1/responses", {"tools": [{"type": "function", "name": "x" * 65}]}, "tools[0].name"),
    ],
)
def test_a_tool_name_the_apis_refuse_is_answered_with_a_400_naming_the_field(
    server: FakeProviderServer, path: str, body: dict[str, Any], where: str
) -> None:
    """As the APIs do: a tool name outside ^[a-zA-Z0-9_-]{1,64}$ is a 400 before any script item is used."""
    server.script(["unused"])
    status, _, answer = post(f"{server.url}{path}", {"model": "m", **body})
    assert status == 400
    assert where in json.loads(answer)["error"]["message"]
    assert server.remaining == 1


def test_an_unknown_path_is_404(server: FakeProviderServer) -> None:
    server.script(["unused"])
    status, _, _ = post(f"{server.url}/v2/other", {})
    assert status == 404


def test_http_error_sets_retry_headers_and_the_provider_error_body(server: FakeProviderServer) -> None:
    server.script([HTTPError(429, "slow down", retry_after=3, retry_after_ms=2500, headers={"x-extra": "yes"})])
    status, headers, body = post(f"{server.url}/v1/messages", {})
    assert status == 429
    assert (headers["retry-after"], headers["retry-after-ms"], headers["x-extra"]) == ("3", "2500", "yes")
    assert json.loads(body) == {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}


def test_streams_are_server_sent_events_in_each_api_shape(server: FakeProviderServer) -> None:
    usage = Usage(input_tokens=10, output_tokens=3, cached_input_tokens=4)
    answer = ModelResponse(Message.assistant("Hello there"), usage)
    server.script([answer, answer, answer])

    _, headers, body = post(f"{server.url}/v1/messages", {"stream": True})
    assert headers["content-type"] == "text/event-stream"
    kinds = [event for event, _ in sse_events(body)]
    assert kinds[0] == "message_start"
    assert kinds[-2:] == ["message_delta", "message_stop"]
    texts = [json.loads(d)["delta"]["text"] for e, d in sse_events(body) if e == "content_block_delta"]
    assert texts == ["Hell", "o th", "ere"]

    with_usage = {"stream": True, "stream_options": {"include_usage": True}}
    _, _, body = post(f"{server.openai_url}/chat/completions", with_usage)
    chunks = sse_events(body)
    assert chunks[-1] == (None, "[DONE]")
    assert json.loads(chunks[-2][1])["usage"]["prompt_tokens_details"] == {"cached_tokens": 4}

    _, _, body = post(f"{server.openai_url}/responses", {"stream": True})
    events = sse_events(body)
    assert events[0][0] == "response.created"
    assert events[-1][0] == "response.completed"
    assert json.loads(events[-1][1])["response"]["output"][0]["content"][0]["text"] == "Hello there"


def test_malformed_call_sends_its_raw_arguments(server: FakeProviderServer) -> None:
    server.script([[malformed_call("add", '{"a": ', id="call_bad")]])
    _, _, body = post(f"{server.openai_url}/chat/completions", {})
    tool_call = json.loads(body)["choices"][0]["message"]["tool_calls"][0]
    assert tool_call == {"id": "call_bad", "type": "function", "function": {"name": "add", "arguments": '{"a": '}}


def test_stream_error_is_an_error_event_after_the_partial_text(server: FakeProviderServer) -> None:
    server.script([StreamError("overloaded_error", "Overloaded", partial_text="Hi")])
    _, _, body = post(f"{server.url}/v1/messages", {"stream": True})
    events = sse_events(body)
    error = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    assert events[-1] == ("error", json.dumps(error))
    assert "message_stop" not in [event for event, _ in events]


def test_a_stream_error_ends_its_stream_and_keeps_the_connection_for_the_next_request(
    server: FakeProviderServer,
) -> None:
    """As the APIs do: a client reusing the connection must not find it closed (a fault nobody scripted)."""
    server.script([StreamError(partial_text="Hi"), "next"])
    host, port = server.url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=5)
    for body in ({"stream": True}, {}):
        connection.request("POST", "/v1/messages", json.dumps(body), {"content-type": "application/json"})
        response = connection.getresponse()
        data = response.read()
        assert response.status == 200
    assert json.loads(data)["content"][0]["text"] == "next"
    connection.close()


async def test_a_burst_of_300_simultaneous_connections_is_served_without_a_reset() -> None:
    """A listen backlog of 5 (the standard library's default) reset about a quarter of them."""

    async def ask(host: str, port: int) -> bytes | str:
        try:
            reader, writer = await asyncio.open_connection(host, port)
            body = b'{"model": "m"}'
            head = b"POST /v1/messages HTTP/1.1\r\nhost: fake\r\nconnection: close\r\ncontent-length: %d\r\n\r\n"
            writer.write(head % len(body) + body)
            status = (await reader.read()).split(b"\r\n", 1)[0]
            writer.close()
            await writer.wait_closed()
            return status
        except OSError as error:
            return type(error).__name__

    async with FakeProviderServer(respond=lambda request: "ok") as fake:
        host, port = fake.url.removeprefix("http://").split(":")
        answers = await asyncio.gather(*(ask(host, int(port)) for _ in range(300)))
    assert collections.Counter(answers) == {b"HTTP/1.1 200 OK": 300}


def test_drop_connection_cuts_the_stream(server: FakeProviderServer) -> None:
    server.script([DropConnection(partial_text="Hello"), DropConnection()])
    with pytest.raises(http.client.IncompleteRead):
        post(f"{server.url}/v1/messages", {"stream": True})
    with pytest.raises((http.client.RemoteDisconnected, urllib.error.URLError)):
        post(f"{server.url}/v1/messages", {})


def test_malformed_body_is_not_json(server: FakeProviderServer) -> None:
    server.script([MalformedBody()])
    status, _, body = post(f"{server.url}/v1/messages", {})
    assert status == 200
    with pytest.raises(ValueError):
        json.loads(body)


def test_undecodable_body_holds_bytes_that_are_not_utf8(server: FakeProviderServer) -> None:
    server.script([UndecodableBody(), UndecodableBody(cut=True), UndecodableBody()])
    _, _, body = post(f"{server.openai_url}/chat/completions", {})
    assert b"caf\xff au lait" in body
    _, _, body = post(f"{server.url}/v1/messages", {})
    assert b"caf\xc3 au lait" in body
    _, headers, body = post(f"{server.url}/v1/messages", {"stream": True})
    assert headers["content-type"] == "text/event-stream"
    assert b'"caf\xff"' in body
    with pytest.raises(UnicodeDecodeError):
        body.decode()


def test_bad_gzip_is_labelled_gzip_but_is_not(server: FakeProviderServer) -> None:
    server.script([BadGzip(), BadGzip()])
    for request in ({}, {"stream": True}):
        status, headers, body = post(f"{server.url}/v1/messages", request)
        assert (status, headers["content-encoding"]) == (200, "gzip")
        with pytest.raises((OSError, zlib.error)):
            gzip.decompress(body)


def test_truncated_body_ends_cleanly_after_half_an_answer(server: FakeProviderServer) -> None:
    server.script([TruncatedBody(), TruncatedBody(partial_text="Hello")])
    status, headers, body = post(f"{server.url}/v1/messages", {})
    assert (status, int(headers["content-length"])) == (200, len(body))
    with pytest.raises(ValueError):
        json.loads(body)
    _, _, body = post(f"{server.url}/v1/messages", {"stream": True})
    frames = body.decode().split("\n\n")
    assert frames[-1].startswith("event: message_delta")
    assert "message_stop" not in body.decode()
    texts = [
        json.loads(d)["delta"]["text"] for e, d in sse_events(body.rpartition(b"\n\n")[0]) if e == "content_block_delta"
    ]
    assert texts == ["Hell", "o"]


def test_respond_answers_every_request_instead_of_the_script(
    live_server_threads: Callable[[], list[threading.Thread]],
) -> None:
    """`respond` sees the recorded request; if it raises, the request gets a 400 naming the exception."""

    def respond(request: RecordedRequest) -> str:
        if request.body["model"] == "boom":
            raise LookupError("no plan for boom")
        return f"hello {request.headers['x-run']}"

    with FakeProviderServer(["never used"], respond=respond) as fake:
        _, _, body = post(f"{fake.openai_url}/chat/completions", {"model": "m"}, {"x-run": "7"})
        assert json.loads(body)["choices"][0]["message"]["content"] == "hello 7"
        status, _, body = post(f"{fake.url}/v1/messages", {"model": "boom"})
        assert status == 400
        assert (
            json.loads(body)["error"]["message"] == "FakeProviderServer: respond raised LookupError: no plan for boom"
        )
        assert len(fake.requests) == 2
        assert fake.remaining == 1
    assert live_server_threads() == []


def test_close_cuts_a_delay_short_and_joins_every_thread(
    live_server_threads: Callable[[], list[threading.Thread]],
) -> None:
    """A request stuck in a long Delay does not hold up close(); no thread survives it."""
    fake = FakeProviderServer([Delay(30, "late")]).start()
    url = fake.url
    failures: list[BaseException] = []

    def stuck() -> None:
        try:
            post(f"{url}/v1/messages", {})
        except Exception as error:
            failures.append(error)

    client = threading.Thread(target=stuck)
    client.start()
    while not fake.requests:
        time.sleep(0.01)
    started = time.monotonic()
    fake.close()
    client.join(5)
    assert time.monotonic() - started < 2
    assert failures
    assert live_server_threads() == []
    fake.close()


def test_url_needs_a_running_server() -> None:
    fake = FakeProviderServer()
    with pytest.raises(RuntimeError, match="not running"):
        _ = fake.url
    with fake:
        assert fake.url.startswith("http://127.0.0.1:")
        assert fake.openai_url == f"{fake.url}/v1"
        assert "requests=0" in repr(fake)
    assert "stopped" in repr(fake)


async def test_it_works_as_an_async_context_manager(live_server_threads: Callable[[], list[threading.Thread]]) -> None:
    async with FakeProviderServer(["hi"]) as fake:
        assert fake.remaining == 1
    assert live_server_threads() == []


def test_thinking_blocks_are_sent_signed_and_checked_when_they_come_back(server: FakeProviderServer) -> None:
    """A scripted thinking block is sent with the server's signature; a changed signature, or a tool-use turn
    without its thinking block while thinking is enabled, is the 400 the real API gives (no script item used)."""
    from onion import ToolRequest
    from onion.testing._fake_wire import thinking_signature

    blocks = [{"type": "thinking", "thinking": "hmm", "signature": ""}]
    asked = Message("assistant", "", [ToolRequest("toolu_1", "add", {"a": 1})], meta={"anthropic_thinking": blocks})
    server.script([ModelResponse(asked), "done"])
    url = f"{server.url}/v1/messages"
    status, _, body = post(url, {"model": "m", "max_tokens": 5, "messages": []})
    thinking = json.loads(body)["content"][0]
    assert thinking == {"type": "thinking", "thinking": "hmm", "signature": thinking_signature("hmm")}
    tool_use = {"type": "tool_use", "id": "toolu_1", "name": "add", "input": {"a": 1}}
    result = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "1"}]}
    enabled = {"thinking": {"type": "enabled", "budget_tokens": 1024}}

    def send(content: list[dict[str, Any]]) -> tuple[int, bytes]:
        messages = [{"role": "user", "content": "add"}, {"role": "assistant", "content": content}, result]
        status, _, body = post(url, {"model": "m", "max_tokens": 5, "messages": messages, **enabled})
        return status, body

    status, body = send([{**thinking, "signature": "forged"}, tool_use])
    assert status == 400 and "Invalid `signature`" in json.loads(body)["error"]["message"]
    status, body = send([tool_use])
    assert status == 400 and "must start with a thinking block" in json.loads(body)["error"]["message"]
    assert server.remaining == 1
    status, body = send([thinking, tool_use])
    assert status == 200 and json.loads(body)["content"][0]["text"] == "done"
