"""Test doubles that ship with onion: scripted models for offline runs and tests."""

from __future__ import annotations

from ._models import FunctionModel, ScriptedModel, ScriptItem, call, to_response
from .server import (
    Delay,
    DropConnection,
    FakeProviderServer,
    HTTPError,
    MalformedBody,
    RecordedRequest,
    ServerItem,
    StreamError,
    malformed_call,
)

__all__ = [
    "Delay",
    "DropConnection",
    "FakeProviderServer",
    "FunctionModel",
    "HTTPError",
    "MalformedBody",
    "RecordedRequest",
    "ScriptItem",
    "ScriptedModel",
    "ServerItem",
    "StreamError",
    "call",
    "malformed_call",
    "to_response",
]
