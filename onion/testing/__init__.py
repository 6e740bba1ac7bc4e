"""Test doubles that ship with onion: scripted models for offline runs and tests."""

from __future__ import annotations

from ._models import FunctionModel, ScriptedModel, ScriptItem, call, to_response

__all__ = ["FunctionModel", "ScriptItem", "ScriptedModel", "call", "to_response"]
