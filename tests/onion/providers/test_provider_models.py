"""Model strings, clients built from the environment, and SDKs imported only when needed."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from onion import Agent
from onion.errors import AuthenticationError
from onion.providers import AnthropicModel, OpenAIChatModel, OpenAIResponsesModel
from onion.testing import FakeProviderServer


def test_import_onion_imports_no_provider_sdk() -> None:
    """`import onion` (and its testing helpers, and the providers package) loads neither SDK."""
    code = textwrap.dedent(
        """
        import sys
        import onion, onion.testing, onion.providers
        from onion.providers import AnthropicModel, OpenAIChatModel, OpenAIResponsesModel
        agent = onion.Agent("anthropic:claude-test")
        loaded = sorted(name for name in ("anthropic", "openai", "httpx2") if name in sys.modules)
        print(",".join(loaded) or "none")
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "none"


@pytest.mark.parametrize(
    ("string", "model_class", "path"),
    [
        ("anthropic:claude-test", AnthropicModel, "/v1/messages"),
        ("openai:gpt-test", OpenAIChatModel, "/v1/chat/completions"),
        ("openai-responses:gpt-test", OpenAIResponsesModel, "/v1/responses"),
    ],
)
async def test_model_strings_build_clients_from_the_environment(
    string: str, model_class: type, path: str, server: FakeProviderServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "env-anthropic-key")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
    monkeypatch.setenv("OPENAI_API_KEY", "env-openai-key")
    monkeypatch.setenv("OPENAI_BASE_URL", server.openai_url)
    server.script(["from the environment"])
    agent = Agent(string)
    assert isinstance(agent.model, model_class)
    assert agent.model.name == string.partition(":")[2]
    try:
        result = await agent.run("hi")
    finally:
        await agent.model.aclose()
    assert result.output == "from the environment"
    assert server.requests[0].path == path
    assert server.requests[0].body["model"] == string.partition(":")[2]
    key = "env-anthropic-key" if string.startswith("anthropic") else "env-openai-key"
    assert server.requests[0].headers["authorization"] == f"Bearer {key}"


async def test_missing_openai_key_is_an_authentication_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(AuthenticationError, match="OPENAI_API_KEY"):
        await Agent("openai:gpt-test").run("hi")


def test_client_and_client_options_are_exclusive() -> None:
    with pytest.raises(TypeError, match="either client="):
        AnthropicModel("claude-test", client=object(), api_key="x")  # type: ignore[arg-type]


async def test_aclose_closes_only_a_client_onion_built(server: FakeProviderServer) -> None:
    model = AnthropicModel("claude-test", base_url=server.url, api_key="x")
    client = model.client
    await model.aclose()
    assert client.is_closed()
    assert model.client is not client
    await model.aclose()


def test_models_show_their_name() -> None:
    assert repr(OpenAIResponsesModel("gpt-test", api_key="x")) == "<OpenAIResponsesModel gpt-test>"
