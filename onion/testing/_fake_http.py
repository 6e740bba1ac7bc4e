"""The HTTP side of `FakeProviderServer`: the server, its request handler, and `RecordedRequest`."""

from __future__ import annotations

import contextlib
import json
import selectors
import socket
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol

from .._results import ModelResponse
from ._fake_formats import format_problem, output_format, tool_name_problem
from ._fake_wire import (
    BODIES,
    FIRST_EVENT,
    STATUS_OF_TYPE,
    TYPE_OF_STATUS,
    anthropic_request_problem,
    error_body,
    frames,
    stream_error,
)
from ._faults import (
    BadGzip,
    Delay,
    DropConnection,
    HTTPError,
    MalformedBody,
    ServerItem,
    StreamError,
    TruncatedBody,
    UndecodableBody,
)
from ._models import to_response


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """One request the server received. `headers` has lower-case names; `body` is the parsed JSON."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any

    @property
    def output_format(self) -> dict[str, Any] | None:
        """The structured output field of the request, whichever API: Anthropic `output_config.format`,
        Chat `response_format`, Responses `text.format` (None when it has none)."""
        return output_format(APIS.get(self.path), self.body)


APIS = {"/v1/messages": "anthropic", "/v1/chat/completions": "chat", "/v1/responses": "responses"}


class ScriptedServer(Protocol):
    """What the handler reads of its `FakeProviderServer`."""

    requests: list[RecordedRequest]
    abandoned: list[RecordedRequest]
    chunk_size: int
    respond: Callable[[RecordedRequest], ServerItem] | None
    _served: int
    _lock: threading.Lock
    _stopping: threading.Event
    _connections: set[socket.socket]

    def _take(self, request: RecordedRequest) -> ServerItem | None: ...


class FakeHTTPServer(ThreadingHTTPServer):
    request_queue_size = 512  # a burst of concurrent clients is queued, not reset (the default is 5)

    def __init__(self, address: tuple[str, int], handler: type[FakeRequestHandler], fake: ScriptedServer) -> None:
        self.fake = fake
        self._waker, self._wake_signal = socket.socketpair()
        self._handlers: list[threading.Thread] = []
        super().__init__(address, handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        """Handle the connection in a daemon thread (one left open never holds the interpreter at exit),
        joined by `server_close`."""
        thread = threading.Thread(target=self.process_request_thread, args=(request, client_address), daemon=True)
        self._handlers = [handler for handler in self._handlers if handler.is_alive()]
        self._handlers.append(thread)
        thread.start()

    def serve_until_woken(self) -> None:
        """Accept connections until `wake()`; unlike `serve_forever`, stopping costs no polling delay."""
        with selectors.DefaultSelector() as selector:
            selector.register(self.socket, selectors.EVENT_READ)
            selector.register(self._waker, selectors.EVENT_READ)
            while True:
                for key, _ in selector.select():
                    if key.fileobj is self._waker:
                        return
                    self.handle_request()

    def wake(self) -> None:
        """Make `serve_until_woken` return."""
        self._wake_signal.send(b"x")

    def server_close(self) -> None:
        super().server_close()
        self._waker.close()
        self._wake_signal.close()
        for thread in self._handlers:
            thread.join()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Connections the client or `close()` cut are expected: quiet for those, loud for anything else."""
        if not isinstance(sys.exc_info()[1], OSError):
            super().handle_error(request, client_address)


class FakeRequestHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: FakeHTTPServer
    _recorded: RecordedRequest

    def setup(self) -> None:
        super().setup()
        # Each reply goes out at once: with Nagle on, a reply written in parts waits on the client's delayed ACK
        # (about 40 ms a request on Linux).
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        fake = self.server.fake
        with fake._lock:
            fake._connections.add(self.connection)

    def finish(self) -> None:
        fake = self.server.fake
        with fake._lock:
            fake._connections.discard(self.connection)
        with contextlib.suppress(OSError):
            super().finish()

    def log_message(self, format: str, *args: Any) -> None:
        """Silent: tests read `server.requests` instead."""

    def do_GET(self) -> None:
        self._send_json(404, {"error": {"type": "not_found_error", "message": f"no such path: {self.path}"}})

    def do_POST(self) -> None:
        fake = self.server.fake
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length)
        if len(raw) < length:
            self.close_connection = True  # the client left before sending its whole request: none was made
            return
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("utf-8", "replace")
        path = self.path.split("?", 1)[0]
        headers = {name.lower(): value for name, value in self.headers.items()}
        recorded = self._recorded = RecordedRequest("POST", path, headers, body)
        api = APIS.get(path)
        problem = anthropic_request_problem(body) if api == "anthropic" and isinstance(body, dict) else None
        problem = problem or tool_name_problem(api, body) or format_problem(api, body)
        if problem is not None and api is not None:
            with fake._lock:
                fake.requests.append(recorded)
            self._send_json(400, error_body(api, "invalid_request_error", problem))
            return
        item = fake._take(recorded)
        if api is None:
            self._send_json(404, error_body("chat", "not_found_error", f"FakeProviderServer has no {path}"))
            return
        if fake.respond is not None:
            try:
                item = fake.respond(recorded)
            except Exception as error:
                message = f"FakeProviderServer: respond raised {type(error).__name__}: {error}"
                self._send_json(400, error_body(api, "invalid_request_error", message))
                return
        if item is None:
            message = (
                f"FakeProviderServer: request {len(fake.requests)} arrived but the script has {fake._served} items"
            )
            self._send_json(400, error_body(api, "invalid_request_error", message))
            return
        request = body if isinstance(body, dict) else {}
        try:
            self._answer(api, item, request)
        except OSError:
            self.close_connection = True

    def _answer(self, api: str, item: ServerItem, request: dict[str, Any]) -> None:
        fake = self.server.fake
        streamed = bool(request.get("stream"))
        model = str(request.get("model", "fake-model"))
        if isinstance(item, Delay):
            if self._wait_or_leave(item.seconds):
                self.close_connection = True
                return
            self._answer(api, item.then, request)
        elif isinstance(item, HTTPError):
            headers = dict(item.headers)
            if item.retry_after is not None:
                headers["retry-after"] = str(item.retry_after)
            if item.retry_after_ms is not None:
                headers["retry-after-ms"] = str(item.retry_after_ms)
            fallback = "api_error" if item.status >= 500 else "invalid_request_error"
            error_type = item.error_type or TYPE_OF_STATUS.get(item.status, fallback)
            self._send_json(item.status, error_body(api, error_type, item.message), headers)
        elif isinstance(item, StreamError) and not streamed:
            status = STATUS_OF_TYPE.get(item.error_type, 500)
            self._send_json(status, error_body(api, item.error_type, item.message))
        elif isinstance(item, StreamError | DropConnection):
            if streamed and item.partial_text:
                head, _ = frames(api, to_response(item.partial_text, model), model, request, fake.chunk_size)
                self._start_stream()
                self._send_frames(head)
            elif isinstance(item, StreamError):
                self._start_stream()
            if isinstance(item, StreamError):
                self._send_frames([stream_error(api, item.error_type, item.message)])
                self._end_stream()
            else:
                self.close_connection = True
        elif isinstance(item, MalformedBody):
            if streamed:
                self._start_stream()
                self._send_frames([(FIRST_EVENT[api], '{"type": "message_start", "message": {"id": ')])
                self._end_stream()
            else:
                self._send(200, b'{"id": "broken', {"content-type": "application/json"})
        elif isinstance(item, UndecodableBody):
            bad = b"\xc3" if item.cut else b"\xff"
            self._answer_bytes(api, to_response(UNDECODABLE_TEXT, model), request, lambda data: data.replace(_E, bad))
        elif isinstance(item, BadGzip):
            self._answer_bytes(api, to_response("not gzip", model), request, headers={"content-encoding": "gzip"})
        elif isinstance(item, TruncatedBody):
            self._send_truncated(api, to_response(item.partial_text, model), request)
        else:
            self._answer_bytes(api, to_response(item, model), request)

    def _wait_or_leave(self, seconds: float) -> bool:
        """Wait `seconds`; True (and the request noted in `abandoned`) if the client hung up, True on `close()`."""
        fake = self.server.fake
        deadline = time.monotonic() + seconds
        with selectors.DefaultSelector() as selector:
            selector.register(self.connection, selectors.EVENT_READ)
            while (left := deadline - time.monotonic()) > 0:
                if fake._stopping.is_set():
                    return True
                if selector.select(min(left, 0.01)) and self._client_left():
                    with fake._lock:
                        fake.abandoned.append(self._recorded)
                    return True
        return fake._stopping.is_set()

    def _client_left(self) -> bool:
        try:
            return not self.connection.recv(1, socket.MSG_PEEK)
        except OSError:
            return True

    def _answer_bytes(
        self,
        api: str,
        response: ModelResponse,
        request: dict[str, Any],
        change: Callable[[bytes], bytes] = bytes,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        """Answer with `response` (streamed if asked), each body or event passed through `change` as bytes."""
        model = str(request.get("model", "fake-model"))
        if request.get("stream"):
            head, tail = frames(api, response, model, request, self.server.fake.chunk_size)
            self._start_stream(headers)
            for frame in head + tail:
                self._send_chunk(change(_frame_bytes(frame)))
            self._end_stream()
        else:
            data = json.dumps(BODIES[api](response, model)).encode()
            self._send(200, change(data), {"content-type": "application/json", **(headers or {})})

    def _send_truncated(self, api: str, response: ModelResponse, request: dict[str, Any]) -> None:
        model = str(request.get("model", "fake-model"))
        if request.get("stream"):
            head, tail = frames(api, response, model, request, self.server.fake.chunk_size)
            cut = len(head) if response.text else 1
            frames_sent = (head + tail)[:cut]
            self._start_stream()
            for frame in frames_sent:
                self._send_chunk(_frame_bytes(frame))
            half = _frame_bytes((head + tail)[cut])
            self._send_chunk(half[: len(half) // 2])
            self._end_stream()
        else:
            data = json.dumps(BODIES[api](response, model)).encode()
            self._send(200, data[: len(data) // 2], {"content-type": "application/json"})

    def _send(self, status: int, data: bytes, headers: Mapping[str, str]) -> None:
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _send_json(self, status: int, body: Any, headers: Mapping[str, str] | None = None) -> None:
        self._send(status, json.dumps(body).encode(), {"content-type": "application/json", **(headers or {})})

    def _start_stream(self, headers: Mapping[str, str] | None = None) -> None:
        self.send_response(200)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()

    def _send_chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

    def _send_frames(self, frames: list[tuple[str | None, Any]]) -> None:
        for frame in frames:
            self._send_chunk(_frame_bytes(frame))

    def _end_stream(self) -> None:
        self.wfile.write(b"0\r\n\r\n")


UNDECODABLE_TEXT = "café au lait"
"""The answer `UndecodableBody` spoils: its `é` is sent as bytes that are not UTF-8."""

_E = json.dumps("é")[1:-1].encode()
"""How `é` travels inside JSON text: escaped, as all non-ASCII text the server sends."""


def _frame_bytes(frame: tuple[str | None, Any]) -> bytes:
    """One SSE event as bytes."""
    event, data = frame
    text = data if isinstance(data, str) else json.dumps(data)
    return ((f"event: {event}\n" if event else "") + f"data: {text}\n\n").encode()
