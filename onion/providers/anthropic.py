"""`AnthropicModel`: the Anthropic Messages API through the `anthropic` SDK.

The model string `"anthropic:<model>"` builds one. The SDK is imported when
one is made (or, made inside an event loop, in a worker thread before its
first run), never by `import onion`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Literal

from .._calls import ModelCall
from .._output import OutputSchema
from .._results import ModelResponse
from ..errors import AuthenticationError
from ._anthropic_wire import AnthropicStreamReader, read_response, request_params
from ._provider_model import ProviderModel, StreamReader

if TYPE_CHECKING:
    from anthropic import AsyncAnthropic

__all__ = ["AnthropicModel"]


class AnthropicModel(ProviderModel):
    """A Claude model: `AnthropicModel("claude-sonnet-5-5")`.

    Builds an `AsyncAnthropic` from `ANTHROPIC_API_KEY` / `ANTHROPIC_BASE_URL`
    unless given `client=`. `max_tokens` is the default for the API's required
    `max_tokens` (a `max_tokens` setting overrides it). What goes on the wire:
    docs/providers.md ("Translation") and docs/output.md.
    """

    provider = "anthropic"
    credential_variables: ClassVar[dict[str, str]] = {
        "api_key": "ANTHROPIC_API_KEY",
        "auth_token": "ANTHROPIC_AUTH_TOKEN",
    }
    required_fields = ("content", "usage")

    def __init__(
        self,
        name: str,
        *,
        client: AsyncAnthropic | None = None,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float | None = None,
        max_tokens: int = 4096,
        output_mode: Literal["native", "tool"] = "native",
    ) -> None:
        super().__init__(
            name, client=client, api_key=api_key, base_url=base_url, timeout=timeout, output_mode=output_mode
        )
        self.max_tokens = max_tokens

    def _build_client(self, options: dict[str, Any]) -> Any:
        from anthropic import AsyncAnthropic

        client = AsyncAnthropic(**options)
        if client.api_key is None and client.auth_token is None and getattr(client, "credentials", None) is None:
            raise AuthenticationError(
                "no Anthropic credentials: set ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN), "
                "or pass AnthropicModel(api_key=...) or client=",
                provider=self.provider,
            )
        return client

    def _params(self, call: ModelCall) -> dict[str, Any]:
        return request_params(call, self.name, self.max_tokens)

    def _takes_natively(self, schema: OutputSchema) -> bool:
        return schema.strict is not None and not schema.recursive

    def _add_native_output(self, params: dict[str, Any], schema: OutputSchema) -> None:
        config = dict(params.get("output_config") or {})
        config["format"] = {"type": "json_schema", "schema": schema.strict}
        params["output_config"] = config

    def _tool_param(self, name: str, description: str, schema: dict[str, Any]) -> dict[str, Any]:
        return {"name": name, "description": description, "input_schema": schema}

    def _create_method(self, client: Any) -> Any:
        return client.messages.create

    def _response(self, raw: Any) -> ModelResponse:
        return read_response(raw)

    def _reader(self) -> StreamReader:
        return AnthropicStreamReader()
