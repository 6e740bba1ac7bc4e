"""Model strings, clients built from the environment, and SDKs imported only when needed."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from typing import Any

import pytest

from onion import Agent
from onion.errors import AuthenticationError, ResponseFormatError
from onion.providers import AnthropicModel, OpenAIChatModel, OpenAIResponsesModel
from onion.testing import FakeProviderServer


def test_import_onion_imports_no_provider_sdk() -> None:
    """`import onion` (and its testing helpers, and the providers package) loads neither SDK; a model made
    outside an event loop loads its own SDK there and then (never during a run), and only that one."""
    code = textwrap.dedent(
        """
        import sys
        import onion, onion.testing, onion.providers
        from onion.providers import AnthropicModel, OpenAIChatModel, OpenAIResponsesModel
        def loaded():
            return ",".join(sorted(name for name in ("anthropic", "openai", "httpx2") if name in sys.modules)) or "none"
        print(loaded())
        agent = onion.Agent("anthropic:claude-test")
        print(loaded())
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.split() == ["none", "anthropic,httpx2"]


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


async def test_missing_anthropic_key_is_an_authentication_error_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Not the SDK's raw TypeError at request time: an AuthenticationError saying what to set."""
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)
    with pytest.raises(AuthenticationError, match="ANTHROPIC_API_KEY") as caught:
        await Agent("anthropic:claude-test").run("hi")
    assert not caught.value.retryable


@pytest.mark.parametrize("api", ["anthropic", "openai", "openai-responses"])
async def test_a_body_without_its_main_field_names_the_field_and_quotes_the_body(api: str) -> None:
    """A 200 whose JSON lacks `content` / `choices` / `output`: say which, quote the start, redact secrets."""
    import http.server
    import json
    import threading

    body = json.dumps({"id": "resp_1", "model": "m", "note": "key sk-ant-api03-" + "a" * 40}).encode()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["content-length"]))
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{httpd.server_port}"
    models = {
        "anthropic": lambda: AnthropicModel("claude-test", base_url=url, api_key="k"),
        "openai": lambda: OpenAIChatModel("gpt-test", base_url=url + "/v1", api_key="k"),
        "openai-responses": lambda: OpenAIResponsesModel("gpt-test", base_url=url + "/v1", api_key="k"),
    }
    model = models[api]()
    field = {"anthropic": "content", "openai": "choices", "openai-responses": "output"}[api]
    try:
        with pytest.raises(ResponseFormatError, match=f"without its `{field}` field; it begins: ") as caught:
            await Agent(model).run("hi")
    finally:
        await model.aclose()
        httpd.shutdown()
        httpd.server_close()
        thread.join()
    assert '"resp_1"' in str(caught.value) and "sk-ant-api03" not in str(caught.value)


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
