"""`OpenAIResponsesModel`: the OpenAI Responses API through the `openai` SDK.

The model string `"openai-responses:<model>"` builds one. The SDK is imported
when one is made (or, made inside an event loop, in a worker thread before
its first run), never by `import onion`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Literal

from .._calls import ModelCall
from .._output import OutputSchema
from .._results import ModelResponse
from ._openai_responses_wire import ResponsesStreamReader, read_response, request_params
from ._provider_model import ProviderModel, StreamReader
from .openai import build_openai_client, json_schema_format

if TYPE_CHECKING:
    from openai import AsyncOpenAI

__all__ = ["OpenAIResponsesModel"]


class OpenAIResponsesModel(ProviderModel):
    """A model behind the Responses API: `OpenAIResponsesModel("gpt-5")`.

    Clients as for `OpenAIChatModel`. Every request carries the whole history
    (`input`); onion does not use `previous_response_id`. What goes on the
    wire: docs/providers.md ("Translation") and docs/output.md.
    """

    provider = "openai"
    credential_variables: ClassVar[dict[str, str]] = {
        "api_key": "OPENAI_API_KEY",
        "organization": "OPENAI_ORG_ID",
        "project": "OPENAI_PROJECT_ID",
    }
    required_fields = ("output",)

    def __init__(
        self,
        name: str,
        *,
        client: AsyncOpenAI | None = None,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float | None = None,
        output_mode: Literal["native", "tool"] = "native",
    ) -> None:
        super().__init__(
            name, client=client, api_key=api_key, base_url=base_url, timeout=timeout, output_mode=output_mode
        )

    def _build_client(self, options: dict[str, Any]) -> Any:
        return build_openai_client(options)

    def _params(self, call: ModelCall) -> dict[str, Any]:
        return request_params(call, self.name)

    def _add_native_output(self, params: dict[str, Any], schema: OutputSchema) -> None:
        text = dict(params.get("text") or {})
        text["format"] = {"type": "json_schema", **json_schema_format(schema)}
        params["text"] = text

    def _tool_param(self, name: str, description: str, schema: dict[str, Any]) -> dict[str, Any]:
        return {"type": "function", "name": name, "description": description, "parameters": schema, "strict": False}

    def _create_method(self, client: Any) -> Any:
        return client.responses.create

    def _response(self, raw: Any) -> ModelResponse:
        return read_response(raw)

    def _reader(self) -> StreamReader:
        return ResponsesStreamReader()
