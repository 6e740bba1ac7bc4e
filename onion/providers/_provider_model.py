"""`ProviderModel`: what the three provider models share (client, error mapping, streaming loop)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import importlib.util
import inspect
import os
import sys
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Callable
from typing import Any, ClassVar, Literal, Protocol, TypeVar

from .._calls import ModelCall
from .._output import OutputSchema, output_schema
from .._results import ModelResponse
from .._text import replace_lone_surrogates
from ..errors import AuthenticationError, ResponseFormatError, UnsupportedContent
from ._answer_tool import ANSWER_TOOL, ANSWER_TOOL_DESCRIPTION, answer_from_tool
from ._errors import model_error
from ._surrogates import call_has_surrogate

T = TypeVar("T")

_UNREADABLE = (AttributeError, KeyError, IndexError, TypeError, ValueError)
"""What reading a response that lacks what onion expects raises (reported as `ResponseFormatError`)."""


@functools.cache
def _keyword_names(function: Any) -> frozenset[str]:
    return frozenset(inspect.signature(function).parameters)


def _keywords(method: Any) -> frozenset[str]:
    """The keywords an SDK method accepts, looked up once per method."""
    return _keyword_names(getattr(method, "__func__", method))


def _own_headers(client: Any) -> dict[str, Any]:
    """The headers a client was given (`default_headers=`), without the SDK's platform headers."""
    headers = getattr(client, "_custom_headers", None)
    return dict(headers) if isinstance(headers, dict) else {}


def _import_sdk(sdk: str, model: str) -> bool:
    """Whether no event loop runs in this thread; `sdk` imported now if so (else `prepare` imports it off the loop).

    Raises `ImportError` naming the extra to install when `sdk` is missing.
    """
    if sdk not in sys.modules and importlib.util.find_spec(sdk) is None:
        raise ImportError(f"{model} needs the {sdk} SDK: pip install 'onion[{sdk}]'")
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        importlib.import_module(sdk)
        return True
    return False


class StreamReader(Protocol):
    """Turns a provider's stream events into onion events and, at the end, the `ModelResponse`."""

    def feed(self, event: Any) -> list[Any]:
        """The onion events (`TextDelta`, `ToolCallStarted`) that `event` produces; may raise `ModelError`."""
        ...

    def finish(self) -> ModelResponse:
        """The assembled response; raises `ResponseFormatError` if the stream ended before its final event.

        A connection that dropped raised `ConnectionLostError` before this is called; a body that
        ended cleanly but early is a malformed response (both are retryable).
        """
        ...


class ProviderModel(ABC):
    """A model reached through a provider SDK client (see docs/providers.md, "Clients").

    Pass your own client as `client=` (used as configured), or let onion build
    one per event loop from the environment with `max_retries=0`; `api_key`,
    `base_url` and `timeout` (seconds) apply only to a client onion builds.
    Every SDK or transport failure is raised as an `onion.errors.ModelError`,
    the SDK's exception as `__cause__`. `output_mode`: how a call's
    `output_type` reaches the model, `"native"` or as a `final_answer` tool
    (docs/output.md).
    """

    provider: ClassVar[str]
    """The SDK's import name, which is also the `ModelError.provider` value."""
    required_fields: ClassVar[tuple[str, ...]]
    """Top-level fields of a whole (not streamed) response that onion reads; a response without one is named."""
    credential_variables: ClassVar[dict[str, str]]
    """Each client attribute that identifies who pays (`api_key`, ...) and the variable the SDK reads it from."""

    def __init__(
        self,
        name: str,
        *,
        client: Any = None,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float | None = None,
        output_mode: Literal["native", "tool"] = "native",
    ) -> None:
        if output_mode not in ("native", "tool"):
            raise ValueError(f'{type(self).__name__}: output_mode must be "native" or "tool", got {output_mode!r}')
        if client is not None and (api_key is not None or base_url is not None or timeout is not None):
            raise TypeError("pass either client= or api_key=/base_url=/timeout= (which build a client), not both")
        self.name = name
        self.output_mode = output_mode
        """How a call's `output_type` reaches the model: `"native"` (its structured output) or `"tool"`."""
        self._given = client
        self._owns_client = client is None
        self._clients: dict[asyncio.AbstractEventLoop | None, Any] = {}
        self._spare: Any = None  # built with the model, outside any loop: the first loop to ask takes it
        self._options: dict[str, Any] = {"max_retries": 0}
        for key, value in (("api_key", api_key), ("base_url", base_url), ("timeout", timeout)):
            if value is not None:
                self._options[key] = value
        if client is None and _import_sdk(self.provider, type(self).__name__):
            with contextlib.suppress(Exception):  # the call that needs the client reports why there is none
                self._spare = self._new_client()

    @property
    def client(self) -> Any:
        """The SDK client: the one given, else the running event loop's own (built now if `prepare` did not)."""
        if self._given is not None:
            return self._given
        try:
            loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        client = self._clients.get(loop)
        if client is None:
            spare, self._spare = self._spare, None
            client = self._keep(loop, spare if spare is not None else self._new_client())
        return client

    async def prepare(self) -> None:
        """Import the SDK and build this event loop's client in a worker thread, unless done.

        onion awaits it before a run's layers start; a call that finds no
        client (a model a layer switched to) builds one the same way. A client
        that cannot be built is reported by the call that needs it.
        """
        if self._given is None and asyncio.get_running_loop() not in self._clients:
            with contextlib.suppress(Exception):
                await self._loop_client()

    async def _loop_client(self) -> Any:
        """The running loop's client, built in a worker thread when it has none."""
        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None:
            spare, self._spare = self._spare, None
            client = self._keep(loop, spare if spare is not None else await asyncio.to_thread(self._new_client))
        return client

    def _keep(self, loop: asyncio.AbstractEventLoop | None, client: Any) -> Any:
        """`loop`'s client from now on (an earlier one wins), forgetting those of closed loops."""
        for other in [other for other in self._clients if other is not None and other.is_closed()]:
            del self._clients[other]
        return self._clients.setdefault(loop, client)

    def _new_client(self) -> Any:
        """A client built from the options, its create method looked up once (the SDK imports it then).

        Failures are raised as `ModelError`s.
        """
        try:
            client = self._build_client(dict(self._options))
            self._create_method(client)
            return client
        except Exception as error:
            mapped = model_error(error, self.provider)
            if mapped is not None:
                raise mapped from error
            if type(error).__module__.partition(".")[0] == self.provider:
                message = f"cannot build the {self.provider} client: {error}"
                raise AuthenticationError(message, provider=self.provider) from error
            raise

    @property
    def base_url(self) -> str | None:
        """Where requests go: the given client's base URL, else `base_url=`, else `<PROVIDER>_BASE_URL`.

        `None` means the SDK's default endpoint. Read without building a client.
        """
        if self._given is not None:
            return str(self._given.base_url)
        url = self._options.get("base_url") or os.environ.get(f"{self.provider.upper()}_BASE_URL")
        return None if url is None else str(url)

    def credentials(self) -> dict[str, str]:
        """Who the requests are made as: API key, token, organization, a given client's own headers, by name.

        Read from the client (given or built), else from `api_key=` and the
        SDK's environment variables, without building one: the same either
        way. For keeping tenants apart (`cache` keys by a hash of each);
        these are secrets, never log or store them.
        """
        client = self._given if self._given is not None else next(iter(self._clients.values()), self._spare)
        if client is None:
            found = {name: os.environ.get(variable) for name, variable in self.credential_variables.items()}
            found["api_key"] = self._options.get("api_key") or found.get("api_key")
            return {name: str(value) for name, value in found.items() if value}
        found = {name: getattr(client, name, None) for name in self.credential_variables}
        found.update({f"header {name.lower()}": value for name, value in _own_headers(client).items()})
        return {name: str(value) for name, value in found.items() if isinstance(value, str) and value}

    async def aclose(self) -> None:
        """Close the running loop's client if onion built it (a client passed in stays open).

        Clients of loops that closed are forgotten; one of another loop that
        still runs stays with it.
        """
        loop = asyncio.get_running_loop()
        for key in [key for key in self._clients if key is None or key is loop or key.is_closed()]:
            client = self._clients.pop(key)
            if key is None or key is loop:
                await client.close()

    def _request_params(self, call: ModelCall) -> tuple[dict[str, Any], bool]:
        """The create call's keywords for `call`, and whether its answer comes as the `final_answer` tool."""
        _refuse_assistant_parts(call, self.provider)
        params = self._params(call)
        if call.output_type is str:
            return params, False
        schema = output_schema(call.output_type)
        if self.output_mode == "native" and self._takes_natively(schema):
            self._add_native_output(params, schema)
            return params, False
        if any(tool.name == ANSWER_TOOL for tool in call.tools):
            raise ValueError(
                f"{self!r}: a tool named {ANSWER_TOOL!r} clashes with the tool that carries the output schema "
                f"of {schema.name} (output_mode={self.output_mode!r}); rename your tool (@tool(name=...))"
            )
        answer = self._tool_param(ANSWER_TOOL, ANSWER_TOOL_DESCRIPTION, schema.schema)
        params["tools"] = [*params.get("tools", ()), answer]
        return params, True

    def _valid_request_params(self, call: ModelCall) -> tuple[dict[str, Any], bool]:
        """`_request_params`, lone surrogates replaced (the body walked only when the call's text holds one)."""
        params, by_tool = self._request_params(call)
        if call.output_type is not str or call_has_surrogate(call, self.name):
            params = replace_lone_surrogates(params)
        return params, by_tool

    async def request(self, call: ModelCall) -> ModelResponse:
        """Send `call` and return the whole response."""
        params, by_tool = self._valid_request_params(call)
        try:
            raw = await self._send(params, stream=False)
        except Exception as error:
            mapped = model_error(error, self.provider)
            if mapped is None or mapped is error:
                raise
            raise mapped from error
        for field in self.required_fields:
            if getattr(raw, field, None) is None:
                message = f"{self.provider} sent a response without its `{field}` field; it begins: {_start(raw)}"
                raise ResponseFormatError(message, provider=self.provider)
        response = self._read(self._response, raw)
        return answer_from_tool(response) if by_tool else response

    async def stream(self, call: ModelCall) -> AsyncIterator[Any]:
        """Send `call` streamed: yield `TextDelta` / `ToolCallStarted` events, then the `ModelResponse`."""
        params, by_tool = self._valid_request_params(call)
        reader = self._reader()
        try:
            events = await self._send(params, stream=True)
            async with events:
                feed = reader.feed
                async for event in events:
                    try:
                        items = feed(event)
                    except _UNREADABLE as error:
                        raise self._unreadable(error, event) from error
                    for item in items:
                        yield item
            response = self._read(reader.finish)
        except Exception as error:
            mapped = model_error(error, self.provider)
            if mapped is None or mapped is error:
                raise
            raise mapped from error
        yield answer_from_tool(response) if by_tool else response

    def _read(self, reader: Callable[..., T], *args: Any) -> T:
        """`reader(*args)`, a response that lacks what onion expects raised as `ResponseFormatError`."""
        try:
            return reader(*args)
        except _UNREADABLE as error:
            raise self._unreadable(error, *args) from error

    def _unreadable(self, error: Exception, *raw: Any) -> ResponseFormatError:
        """The `ResponseFormatError` for a response (its start quoted, if given) that raised `error` as it was read."""
        message = f"{self.provider} sent a response onion cannot read: {type(error).__name__}: {error}"
        if raw:
            message += f"; it begins: {_start(raw[0])}"
        return ResponseFormatError(message, provider=self.provider)

    @abstractmethod
    def _build_client(self, options: dict[str, Any]) -> Any:
        """A new SDK client from `options` (`max_retries`, and `api_key`, `base_url`, `timeout` when set)."""

    @abstractmethod
    def _params(self, call: ModelCall) -> dict[str, Any]:
        """The keyword arguments of the SDK's create call for `call` (without `stream`)."""

    async def _send(self, params: dict[str, Any], *, stream: bool) -> Any:
        """Call the SDK: the response object, or its async event stream when `stream`.

        onion decides `stream`; a `stream` setting is dropped. Settings the
        SDK method has no keyword for (it may lag behind the API) travel in
        `extra_body`, so they still reach the wire.
        """
        create = self._create_method(self._given if self._given is not None else await self._loop_client())
        if "stream" in params:
            params = {key: value for key, value in params.items() if key != "stream"}
        if stream:
            params = self._stream_params(params)
        known = _keywords(create)
        if not known.issuperset(params):  # `params` is this request's own: taking keys out changes no caller's
            unknown = {key: params.pop(key) for key in [key for key in params if key not in known]}
            params["extra_body"] = {**unknown, **(params.get("extra_body") or {})}
        if stream:
            return await create(**params, stream=True)
        return await create(**params)

    def _takes_natively(self, schema: OutputSchema) -> bool:
        """Whether this API's structured output can carry `schema` (else the answer tool carries it)."""
        return True

    @abstractmethod
    def _add_native_output(self, params: dict[str, Any], schema: OutputSchema) -> None:
        """Put `schema` into `params` as this API's structured output field."""

    @abstractmethod
    def _tool_param(self, name: str, description: str, schema: dict[str, Any]) -> dict[str, Any]:
        """One tool definition in this API's shape."""

    @abstractmethod
    def _create_method(self, client: Any) -> Any:
        """`client`'s create method (e.g. `client.messages.create`; SDKs import its module on first access)."""

    def _stream_params(self, params: dict[str, Any]) -> dict[str, Any]:
        """`params` for a streamed request (an API may want more, e.g. usage in the stream)."""
        return params

    @abstractmethod
    def _response(self, raw: Any) -> ModelResponse:
        """The `ModelResponse` for the SDK's response object."""

    @abstractmethod
    def _reader(self) -> StreamReader:
        """A fresh reader for one streamed response."""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"


def _start(raw: Any, limit: int = 200) -> str:
    """The first `limit` characters of a response as JSON, secrets redacted, for error messages."""
    from ..scrub import scrub

    try:
        text = raw.to_json(indent=None) if hasattr(raw, "to_json") else repr(raw)
    except Exception:
        text = repr(raw)
    return repr(scrub(text[:limit]) + ("..." if len(text) > limit else ""))


def _refuse_assistant_parts(call: ModelCall, provider: str) -> None:
    """No API here takes images or documents in an assistant turn: refuse them, never drop them silently."""
    for index, message in enumerate(call.messages):
        if message.content is not None and message.role == "assistant":
            kinds = sorted({type(part).__name__ for part in message.content if not isinstance(part, str)})
            if kinds:
                raise UnsupportedContent(
                    f"message {index}: an assistant message cannot carry {' or '.join(kinds)} parts on {provider}; "
                    "put them in a user message",
                    provider=provider,
                )
