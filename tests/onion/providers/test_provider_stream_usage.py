"""A streamed Chat Completions request asks for usage unless a setting says otherwise."""

from __future__ import annotations

from typing import Any

import pytest
from openai import AsyncOpenAI

from onion import Agent
from onion.providers import OpenAIChatModel
from onion.testing import FakeProviderServer


@pytest.mark.parametrize(
    ("settings", "sent"),
    [
        ({}, {"include_usage": True}),
        ({"stream_options": {"include_usage": False}}, {"include_usage": False}),
        ({"extra_body": {"stream_options": {"include_obfuscation": False}}}, {"include_obfuscation": False}),
    ],
)
async def test_stream_options_are_onions_unless_a_setting_sets_them(
    settings: dict[str, Any], sent: dict[str, Any]
) -> None:
    """onion's `include_usage` goes out as JSON; a `stream_options` setting, or one in `extra_body`, wins."""
    with FakeProviderServer(["hi"]) as server:
        client = AsyncOpenAI(base_url=server.openai_url, api_key="test", max_retries=0)
        agent = Agent(OpenAIChatModel("gpt-test", client=client), settings=settings)
        async for _ in agent.stream("hello"):
            pass
        await client.close()
    body = server.requests[0].body
    assert body["stream"] is True
    assert body["stream_options"] == sent
