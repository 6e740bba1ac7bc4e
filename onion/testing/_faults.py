"""What `FakeProviderServer` can answer a request with: answers, and the wire faults it can script."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pydantic

from .._messages import ToolRequest
from .._results import ModelResponse


@dataclass(frozen=True, slots=True)
class HTTPError:
    """Answer with HTTP `status` and the provider's error body.

    `retry_after` (seconds, or an HTTP date string) and `retry_after_ms` set
    the `retry-after` / `retry-after-ms` headers. `error_type` is the body's
    error type; by default the one the provider uses for `status`.
    """

    status: int
    message: str = "fake provider error"
    retry_after: float | str | None = None
    retry_after_ms: float | None = None
    error_type: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class StreamError:
    """A streamed answer that fails mid-stream with an error event, after `partial_text`.

    Anthropic gets `event: error`, Chat Completions a `data: {"error": ...}`
    chunk, Responses an `error` event. A request that did not ask to stream
    gets the HTTP status that the error type stands for (529 for
    `overloaded_error`).
    """

    error_type: str = "overloaded_error"
    message: str = "Overloaded"
    partial_text: str = ""


@dataclass(frozen=True, slots=True)
class Delay:
    """Wait `seconds`, then answer with `then` (for client timeouts). `close()` cuts the wait short.

    A client that closes the connection meanwhile (a cancelled call) ends the
    wait too; its request is then listed in `FakeProviderServer.abandoned`.
    """

    seconds: float
    then: ServerItem = "done"


@dataclass(frozen=True, slots=True)
class DropConnection:
    """Close the connection without a complete answer.

    A streamed request first receives the events of `partial_text`, then the
    connection drops inside the chunked body; otherwise nothing is sent.
    """

    partial_text: str = ""


@dataclass(frozen=True, slots=True)
class MalformedBody:
    """Answer 200 with a body (or, streamed, an event) that is not valid JSON."""


@dataclass(frozen=True, slots=True)
class UndecodableBody:
    """Answer 200 with a body (or, streamed, an event) that is not valid UTF-8.

    The answer is the text `"café au lait"` whose `é` is sent as a stray
    `\\xff` byte, or with `cut=True` as its first byte only (a multi-byte
    character cut in the middle).
    """

    cut: bool = False


@dataclass(frozen=True, slots=True)
class BadGzip:
    """Answer 200 with `content-encoding: gzip` on a body (or event stream) that is not gzip."""


@dataclass(frozen=True, slots=True)
class TruncatedBody:
    """An answer that ends early, yet cleanly at the HTTP level.

    Streamed: the events of `partial_text`, then half of the next event,
    then the end of the body (no final event). Otherwise: the JSON body cut
    in half, its `content-length` saying so.
    """

    partial_text: str = ""


ServerItem = (
    str
    | list[ToolRequest]
    | ModelResponse
    | pydantic.BaseModel
    | Sequence[pydantic.BaseModel]
    | HTTPError
    | StreamError
    | Delay
    | DropConnection
    | MalformedBody
    | UndecodableBody
    | BadGzip
    | TruncatedBody
)
"""What the server answers one request with: a script item of `ScriptedModel` (a pydantic object, or a list of
them, is answered as its JSON text) or a wire fault."""

_ids = itertools.count(1)


def malformed_call(name: str, raw_args: str, *, id: str | None = None) -> ToolRequest:
    """A tool call whose arguments arrive as `raw_args`, verbatim (e.g. broken JSON)."""
    return ToolRequest(id=id or f"call_bad_{next(_ids)}", name=name, args={}, raw_args=raw_args)
