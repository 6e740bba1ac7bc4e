"""`FakeProviderServer`: a local HTTP server that speaks the Anthropic and OpenAI APIs, for the real SDKs.

Scripts, faults, recorded requests and streaming: docs/providers.md ("Testing with the fake provider server").
"""

from __future__ import annotations

import atexit
import contextlib
import socket
import threading
import warnings
from collections.abc import Callable, Iterable

from ._fake_http import FakeHTTPServer, FakeRequestHandler, RecordedRequest
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
    malformed_call,
)

__all__ = [
    "BadGzip",
    "Delay",
    "DropConnection",
    "FakeProviderServer",
    "HTTPError",
    "MalformedBody",
    "RecordedRequest",
    "ServerItem",
    "StreamError",
    "TruncatedBody",
    "UndecodableBody",
    "malformed_call",
]


class FakeProviderServer:
    """A scripted Anthropic / OpenAI API on 127.0.0.1 (an ephemeral port), for tests.

    `url` is the Anthropic base URL, `openai_url` the OpenAI one (with `/v1`).
    A request past the end of the script gets a 400 saying so. `chunk_size`
    is the number of characters per streamed text or argument fragment.

    `respond`, a function of the `RecordedRequest` returning a script item,
    answers every request instead of the script (for concurrent tests, where
    arrival order is not known). It runs in a server thread; if it raises,
    the request gets a 400 naming the exception.
    """

    def __init__(
        self,
        script: Iterable[ServerItem] = (),
        *,
        host: str = "127.0.0.1",
        chunk_size: int = 4,
        respond: Callable[[RecordedRequest], ServerItem] | None = None,
    ) -> None:
        self.requests: list[RecordedRequest] = []
        """Every request received, in arrival order."""
        self.abandoned: list[RecordedRequest] = []
        """Requests whose client closed the connection while a `Delay` held the answer back."""
        self.chunk_size = chunk_size
        self.respond = respond
        self._script: list[ServerItem] = list(script)
        self._served = 0
        self._host = host
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._connections: set[socket.socket] = set()
        self._httpd: FakeHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def script(self, items: Iterable[ServerItem]) -> FakeProviderServer:
        """Append `items` to the script; returns the server."""
        with self._lock:
            self._script.extend(items)
        return self

    @property
    def remaining(self) -> int:
        """Script items not used yet."""
        with self._lock:
            return len(self._script) - self._served

    @property
    def url(self) -> str:
        """The base URL for `AsyncAnthropic(base_url=...)`."""
        if self._httpd is None:
            raise RuntimeError(
                "FakeProviderServer is not running: use `with FakeProviderServer() as server:` or `server.start()`"
            )
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def openai_url(self) -> str:
        """The base URL for `AsyncOpenAI(base_url=...)` (it includes `/v1`)."""
        return f"{self.url}/v1"

    def start(self) -> FakeProviderServer:
        """Listen and serve in a background thread; returns the server."""
        if self._httpd is not None:
            return self
        self._stopping.clear()
        self._httpd = FakeHTTPServer((self._host, 0), FakeRequestHandler, self)
        self._thread = threading.Thread(target=self._httpd.serve_until_woken, name="FakeProviderServer", daemon=True)
        self._thread.start()
        atexit.register(self._close_left_open)
        return self

    def close(self) -> None:
        """Stop serving, drop open connections, join every thread. Safe to call twice."""
        httpd, thread = self._httpd, self._thread
        if httpd is None or thread is None:
            return
        atexit.unregister(self._close_left_open)
        self._stopping.set()
        httpd.wake()
        thread.join()
        with self._lock:
            connections = list(self._connections)
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
        httpd.server_close()
        self._httpd = self._thread = None

    def _close_left_open(self) -> None:
        """At exit: close a server nobody closed, and say so."""
        warnings.warn(
            f"FakeProviderServer at {self.url} was left open: closed at exit; "
            "use `with FakeProviderServer() as server:` or call server.close()",
            stacklevel=1,
        )
        self.close()

    def __enter__(self) -> FakeProviderServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    async def __aenter__(self) -> FakeProviderServer:
        return self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        self.close()

    def _take(self, request: RecordedRequest) -> ServerItem | None:
        with self._lock:
            self.requests.append(request)
            if self.respond is not None or self._served >= len(self._script):
                return None
            item = self._script[self._served]
            self._served += 1
            return item

    def __repr__(self) -> str:
        where = self.url if self._httpd is not None else "stopped"
        return f"<FakeProviderServer {where} requests={len(self.requests)} remaining={self.remaining}>"
