"""Provider failures mapped to `onion.errors.ModelError` subclasses, for every SDK alike.

`model_error(error, provider)` returns the `ModelError` to raise (the caller
chains the original with `raise ... from error`), or `None` when `error` is
not a provider or transport failure (a bug, a wrong argument), which the
caller must let through unchanged.
"""

from __future__ import annotations

import email.utils
import json
import sys
import time
from collections.abc import Mapping
from typing import Any

from ..errors import (
    AuthenticationError,
    BadRequestError,
    ConnectionLostError,
    ContextTooLongError,
    ModelError,
    ModelTimeoutError,
    OverloadedError,
    RateLimitedError,
    ResponseFormatError,
    ServerError,
)

_CONTEXT_TOO_LONG = (
    "prompt is too long",
    "context length",
    "context_length_exceeded",
    "context window",
    "maximum context",
    "too many tokens",
)

_BY_ERROR_TYPE: dict[str, type[ModelError]] = {
    "overloaded_error": OverloadedError,
    "rate_limit_error": RateLimitedError,
    "rate_limit_exceeded": RateLimitedError,
    "api_error": ServerError,
    "server_error": ServerError,
    "timeout_error": ModelTimeoutError,
    "invalid_request_error": BadRequestError,
    "invalid_prompt": BadRequestError,
    "not_found_error": BadRequestError,
    "request_too_large": BadRequestError,
    "context_length_exceeded": ContextTooLongError,
    "authentication_error": AuthenticationError,
    "permission_error": AuthenticationError,
}


def model_error(error: BaseException, provider: str) -> ModelError | None:
    """The `ModelError` standing for `error` raised by `provider`'s SDK or transport, else `None`."""
    if isinstance(error, ModelError):
        return error
    if isinstance(error, json.JSONDecodeError):
        return ResponseFormatError(f"{provider} sent a response that is not valid JSON: {error}", provider=provider)
    if isinstance(error, UnicodeDecodeError):
        return ResponseFormatError(f"{provider} sent a response that is not valid UTF-8: {error}", provider=provider)
    if isinstance(error, RecursionError):
        message = f"{provider} sent a response nested too deeply to read: {error}"
        return ResponseFormatError(message, provider=provider)
    sdk = _sdk_of(error, provider)
    if sdk is not None:
        if isinstance(error, sdk.APIResponseValidationError):
            return ResponseFormatError(f"{provider} sent a response onion cannot read: {error}", provider=provider)
        if isinstance(error, sdk.APITimeoutError):
            return ModelTimeoutError(f"{provider} did not answer in time: {error}", provider=provider)
        if isinstance(error, sdk.APIConnectionError):
            return ConnectionLostError(f"{provider} connection failed: {_reason(error)}", provider=provider)
        status = getattr(error, "status_code", None)
        error_type = str(getattr(error, "type", None) or getattr(error, "code", None) or "")
        if isinstance(status, int) and status != 200:
            headers = getattr(getattr(error, "response", None), "headers", None)
            return from_status(status, _message(error), provider, headers=headers, error_type=error_type)
        return from_error_type(error_type, _message(error), provider)
    kind = _transport_failure(error)
    if kind is not None:
        return kind(f"{provider} connection failed: {type(error).__name__}: {error}", provider=provider)
    return None


def from_status(
    status: int, message: str, provider: str, *, headers: Mapping[str, str] | None = None, error_type: str = ""
) -> ModelError:
    """The error for an HTTP `status` answer; `retry_after` comes from `headers`.

    A 429 saying `insufficient_quota` (OpenAI: the account is out of credit)
    is a `RateLimitedError` that is not retryable: waiting does not help.
    """
    retry_after = retry_after_seconds(headers) if headers is not None else None
    text = f"{provider} answered HTTP {status}: {message}"
    kind: type[ModelError]
    if status == 429 and error_type == "insufficient_quota":
        return RateLimitedError(text, retryable=False, status_code=status, provider=provider)
    if status == 429:
        kind = RateLimitedError
    elif status == 529:
        kind = OverloadedError
    elif status == 408:
        kind = ModelTimeoutError
    elif status >= 500:
        kind = ServerError
    elif status in (401, 403):
        kind = AuthenticationError
    elif status in (400, 404, 413, 422) and _says_too_long(message):
        kind = ContextTooLongError
    elif status == 409:
        return ModelError(text, retryable=True, retry_after=retry_after, status_code=status, provider=provider)
    else:
        kind = BadRequestError
    return kind(text, retry_after=retry_after, status_code=status, provider=provider)


def from_error_type(error_type: str, message: str, provider: str, *, status_code: int | None = None) -> ModelError:
    """The error for an error event inside a stream (`overloaded_error`, `rate_limit_exceeded`, ...).

    An unknown type counts as a server failure (retryable): the request
    itself was accepted when the stream began.
    """
    kind = _BY_ERROR_TYPE.get(error_type, ServerError)
    if issubclass(kind, BadRequestError) and _says_too_long(message):
        kind = ContextTooLongError
    label = error_type or "error"
    return kind(f"{provider} stream failed ({label}): {message}", status_code=status_code, provider=provider)


def retry_after_seconds(headers: Mapping[str, str]) -> float | None:
    """The delay asked for by `retry-after-ms`, else `retry-after` (seconds or an HTTP date)."""
    millis = headers.get("retry-after-ms")
    if millis:
        try:
            return max(float(millis) / 1000, 0.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(when.timestamp() - time.time(), 0.0)


def _says_too_long(message: str) -> bool:
    lowered = message.lower()
    return any(marker in lowered for marker in _CONTEXT_TOO_LONG)


def _message(error: BaseException) -> str:
    body: Any = getattr(error, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and isinstance(inner.get("message"), str):
            return str(inner["message"])
    return str(getattr(error, "message", None) or error)


def _reason(error: BaseException) -> str:
    cause = error.__cause__ or error.__context__
    return f"{error} ({type(cause).__name__}: {cause})" if cause is not None else str(error)


def _sdk_of(error: BaseException, provider: str) -> Any:
    """The SDK module when `error` is one of its `APIError`s (never imports it)."""
    module = sys.modules.get(provider)
    base = getattr(module, "APIError", None)
    return module if isinstance(base, type) and isinstance(error, base) else None


def _transport_failure(error: BaseException) -> type[ModelError] | None:
    """For a raw httpx2 (or httpx) transport error, which some SDK paths let through mid-stream.

    A body that fails content decoding (`DecodingError`: labelled gzip, not
    gzip) counts as a lost connection, as it does when the SDK wraps it.
    """
    for name in ("httpx2", "httpx"):
        module = sys.modules.get(name)
        if module is None:
            continue
        if isinstance(error, module.TimeoutException):
            return ModelTimeoutError
        if isinstance(error, module.TransportError | module.DecodingError):
            return ConnectionLostError
    return None
