"""Test doubles that ship with onion: scripted models, a fake provider, cassettes, fake time, a throwaway Redis."""

from __future__ import annotations

from .._exports import export
from ._cassette import Cassette, CassetteMode, cassette
from ._cassette_match import CassetteMismatch
from ._models import FunctionModel, ScriptedModel, ScriptItem, call, to_response
from ._redis import RedisServer
from ._time import FakeTime
from .server import (
    BadGzip,
    Delay,
    DropConnection,
    FakeProviderServer,
    HTTPError,
    MalformedBody,
    RecordedRequest,
    ServerItem,
    StreamError,
    TruncatedBody,
    UndecodableBody,
    malformed_call,
)

__all__ = [
    "BadGzip",
    "Cassette",
    "CassetteMode",
    "CassetteMismatch",
    "Delay",
    "DropConnection",
    "FakeTime",
    "FakeProviderServer",
    "FunctionModel",
    "HTTPError",
    "MalformedBody",
    "RecordedRequest",
    "RedisServer",
    "ScriptItem",
    "ScriptedModel",
    "ServerItem",
    "StreamError",
    "TruncatedBody",
    "UndecodableBody",
    "call",
    "cassette",
    "malformed_call",
    "to_response",
]

export(globals())
