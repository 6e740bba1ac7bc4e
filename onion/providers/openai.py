"""`OpenAIChatModel`: the OpenAI Chat Completions API through the `openai` SDK.

The model strings `"openai:<model>"` and `"openai-chat:<model>"` build one.
The SDK is imported when onion builds a client, never by `import onion`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Literal

from .._calls import ModelCall
from .._output import OutputSchema
from .._results import ModelResponse
from ._openai_chat_wire import ChatStreamReader, read_response, request_params
from ._provider_model import ProviderModel, StreamReader

if TYPE_CHECKING:
    from openai import AsyncOpenAI

__all__ = ["OpenAIChatModel", "build_openai_client", "json_schema_format"]


def json_schema_format(schema: OutputSchema) -> dict[str, Any]:
    """`name`, `schema` and `strict` of an OpenAI json_schema format: strict when the schema has a strict form."""
    strict = schema.strict is not None
    return {"name": schema.name, "schema": schema.strict if strict else schema.schema, "strict": strict}


def build_openai_client(options: dict[str, Any]) -> Any:
    """An `AsyncOpenAI` from `options`; the SDK reads `OPENAI_API_KEY` / `OPENAI_BASE_URL` itself."""
    from openai import AsyncOpenAI

    return AsyncOpenAI(**options)


class OpenAIChatModel(ProviderModel):
    """A model behind Chat Completions: `OpenAIChatModel("gpt-5.5")`.

    Builds an `AsyncOpenAI` from `OPENAI_API_KEY` / `OPENAI_BASE_URL` (which
    includes `/v1`) unless given `client=`. `system_role` is the role system
    messages are sent with (`"developer"` for models that want it). What goes
    on the wire: docs/providers.md ("Translation") and docs/output.md.
    """

    provider = "openai"
    credential_variables: ClassVar[dict[str, str]] = {
        "api_key": "OPENAI_API_KEY",
        "organization": "OPENAI_ORG_ID",
        "project": "OPENAI_PROJECT_ID",
    }
    required_fields = ("choices",)

    def __init__(
        self,
        name: str,
        *,
        client: AsyncOpenAI | None = None,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float | None = None,
        system_role: str = "system",
        output_mode: Literal["native", "tool"] = "native",
    ) -> None:
        super().__init__(
            name, client=client, api_key=api_key, base_url=base_url, timeout=timeout, output_mode=output_mode
        )
        self.system_role = system_role

    def _build_client(self, options: dict[str, Any]) -> Any:
        return build_openai_client(options)

    def _params(self, call: ModelCall) -> dict[str, Any]:
        return request_params(call, self.name, self.system_role)

    def _add_native_output(self, params: dict[str, Any], schema: OutputSchema) -> None:
        params["response_format"] = {"type": "json_schema", "json_schema": json_schema_format(schema)}

    def _tool_param(self, name: str, description: str, schema: dict[str, Any]) -> dict[str, Any]:
        return {"type": "function", "function": {"name": name, "description": description, "parameters": schema}}

    def _create_method(self, client: Any) -> Any:
        return client.chat.completions.create

    def _stream_params(self, params: dict[str, Any]) -> dict[str, Any]:
        if "stream_options" in params:
            return params
        # as extra_body: the SDK's typed transform of the keyword cost about 140k instructions a request
        return {**params, "extra_body": {"stream_options": {"include_usage": True}, **(params.get("extra_body") or {})}}

    def _response(self, raw: Any) -> ModelResponse:
        return read_response(raw)

    def _reader(self) -> StreamReader:
        return ChatStreamReader()
