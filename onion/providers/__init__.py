"""Models backed by provider APIs: Anthropic Messages, OpenAI Chat Completions, OpenAI Responses.

Importing this package imports no SDK. `from onion.providers import
AnthropicModel` (or `OpenAIChatModel`, `OpenAIResponsesModel`) loads only the
module of that model; each SDK is imported when a client is built.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .anthropic import AnthropicModel
    from .openai import OpenAIChatModel
    from .openai_responses import OpenAIResponsesModel

__all__ = ["AnthropicModel", "OpenAIChatModel", "OpenAIResponsesModel"]

_MODULES = {"AnthropicModel": "anthropic", "OpenAIChatModel": "openai", "OpenAIResponsesModel": "openai_responses"}


def __getattr__(name: str) -> Any:
    module = _MODULES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
