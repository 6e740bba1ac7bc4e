"""`log`: one stdlib logging record per call of every kind, with secrets scrubbed."""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Iterable
from typing import Any

from onion import Handler, Message, ModelCall, ModelResponse, Run, RunResult, ToolBatch, ToolCall, ToolResult

from .attempts import unwatch, watch
from .patterns import BUILTIN, scrub, scrub_value


class log:
    """Log every run, model call, tool batch and tool call as it finishes.

    One record per call, at `level` (`error_level` when the call raised or
    a tool answered with an error), with the message
    `"<kind> <what> <outcome> <ms>ms ..."` and structured `extra` fields:
    `kind`, `what`, `outcome`, `duration_ms`, `run_id`, `input_tokens`,
    `output_tokens`, `error`, `reason`, `retries` and, when `payloads` is
    true, `payload`. The outcome is `"ok"`, `"error"` (the call raised, or a
    tool's error result: `error` holds its text), `"blocked"` (a layer
    refused the tool call with `ToolCall.block`: `reason` says why),
    `"paused"` (a tool call paused for approval, or a run that paused:
    `reason`) or `"cancelled"`. When a `retry` inside tried the call again,
    `retries` lists what failed before each new attempt.

    Secrets and personal data (the one set `redact` uses too,
    `middleware.patterns.BUILTIN`: API keys, bearer tokens, `api_key=` style
    assignments, private keys, e-mail addresses, card numbers; plus
    `patterns`) are scrubbed from every text before it is quoted or escaped
    into the payload, and from error texts, then the line is truncated to
    `max_chars` (`None`: no limit). `logger` is a `logging.Logger`, a logger
    name, or `None` for the `"onion"` logger.
    """

    __slots__ = ("_encode", "error_level", "level", "logger", "max_chars", "patterns", "payloads")

    def __init__(
        self,
        logger: logging.Logger | str | None = None,
        level: int = logging.INFO,
        *,
        error_level: int = logging.WARNING,
        payloads: bool = True,
        max_chars: int | None = 200,
        patterns: Iterable[re.Pattern[str] | str] = (),
    ) -> None:
        self.logger = logger if isinstance(logger, logging.Logger) else logging.getLogger(logger or "onion")
        self.level = level
        self.error_level = error_level
        self.payloads = payloads
        self.max_chars = max_chars
        extra = tuple(re.compile(p) if isinstance(p, str) else p for p in patterns)
        self.patterns: tuple[re.Pattern[str], ...] = BUILTIN + extra
        self._encode = json.JSONEncoder(default=self._repr, ensure_ascii=False).encode

    async def wrap_run(self, run: Run, call_next: Handler) -> RunResult:
        return await self._logged(run, call_next, run.agent.name)  # type: ignore[no-any-return]

    async def wrap_model(self, call: ModelCall, call_next: Handler) -> ModelResponse:
        return await self._logged(call, call_next, str(getattr(call.model, "name", call.model)))  # type: ignore[no-any-return]

    async def wrap_tools(self, batch: ToolBatch, call_next: Handler) -> list[ToolResult]:
        return await self._logged(batch, call_next, ",".join(c.name for c in batch.calls))  # type: ignore[no-any-return]

    async def wrap_tool(self, call: ToolCall, call_next: Handler) -> ToolResult:
        return await self._logged(call, call_next, call.name)  # type: ignore[no-any-return]

    async def _logged(self, ctx: Any, call_next: Handler, what: str) -> Any:
        if not self.logger.isEnabledFor(min(self.level, self.error_level)):
            return await call_next(ctx)
        started = time.perf_counter()
        failures, token = watch()
        try:
            result = await call_next(ctx)
        except BaseException as error:
            outcome = "error" if isinstance(error, Exception) else "cancelled"
            self._record(ctx, what, outcome, started, None, error, failures)
            raise
        finally:
            unwatch(token)
        self._record(ctx, what, "ok", started, result, None, failures)
        return result

    def _record(
        self,
        ctx: Any,
        what: str,
        outcome: str,
        started: float,
        result: Any,
        error: BaseException | None,
        failures: list[tuple[Any, BaseException]],
    ) -> None:
        reason = None
        if error is None:
            outcome, reason = _outcome(ctx, result)
        level = self.level if error is None and outcome != "error" else self.error_level
        if not self.logger.isEnabledFor(level):
            return
        kind = ctx.kind
        ms = round((time.perf_counter() - started) * 1000, 2)
        fields: dict[str, Any] = {
            "kind": kind,
            "what": what,
            "outcome": outcome,
            "duration_ms": ms,
            "run_id": ctx.run.id,
        }
        message = f"{kind} {what} {outcome} {ms}ms"
        usage = result.usage if isinstance(result, (ModelResponse, RunResult)) else None
        if usage is not None:
            fields["input_tokens"], fields["output_tokens"] = usage.input_tokens, usage.output_tokens
            message += f" in={usage.input_tokens} out={usage.output_tokens}"
            if isinstance(result, ModelResponse) and result.cached:
                message += " cached"
        if error is not None:
            fields["error"] = self._truncated(scrub(f"{type(error).__name__}: {error}", self.patterns))
            message += f" {fields['error']}"
        elif reason is not None:
            name = "error" if outcome == "error" else "reason"
            fields[name] = self._truncated(scrub(reason, self.patterns))
            message += f" ({fields[name]})"
        retried = [self._truncated(scrub(f"{type(e).__name__}: {e}", self.patterns)) for c, e in failures if c is ctx]
        if retried:
            fields["retries"] = retried
            message += f" after {len(retried)} {'retry' if len(retried) == 1 else 'retries'} ({'; '.join(retried)})"
        if self.payloads:
            fields["payload"] = payload = self._truncated(self._payload(ctx, result))
            message += f" {payload}"
        logger = self.logger
        if type(logger)._log is not _STDLIB_LOG or type(logger).findCaller is not _STDLIB_FIND_CALLER:
            logger.log(level, "%s", message, extra=fields)
            return
        # Logger._log without findCaller's stack walk: the caller is always this method.
        path, line, function = _WHERE
        logger.handle(logger.makeRecord(logger.name, level, path, line, "%s", (message,), None, function, fields))

    def _payload(self, ctx: Any, result: Any) -> str:
        """What went in and what came out, as one line; every text is scrubbed before it is quoted or escaped."""
        scrubbed, encode = self._scrubbed, self._encode
        if isinstance(ctx, ToolCall):
            sent = encode(scrubbed(ctx.args))
            return f"args={sent} -> {scrubbed(result.text)!r}" if isinstance(result, ToolResult) else f"args={sent}"
        if isinstance(ctx, ModelCall):
            last = scrubbed(ctx.messages[-1].text if ctx.messages else "")
            if not isinstance(result, ModelResponse):
                return f"last={last!r}"
            calls = [f"{c.name}({encode(scrubbed(c.args))})" for c in result.tool_calls]
            return f"last={last!r} -> {scrubbed(result.text)!r}" + (f" tools={calls}" if calls else "")
        if isinstance(ctx, Run):
            sent = f"input={scrubbed(_text_of(ctx.input))!r}"
            return sent + (f" -> {scrubbed(result.output)!r}" if isinstance(result, RunResult) else "")
        if isinstance(result, list):
            return f"results={[scrubbed(r.text) for r in result if isinstance(r, ToolResult)]!r}"
        return ""

    def _scrubbed(self, value: Any) -> Any:
        return scrub_value(value, self.patterns)

    def _repr(self, value: Any) -> str:
        """What JSON cannot hold, shown by its scrubbed `repr`."""
        return scrub(repr(value), self.patterns)

    def _truncated(self, text: str) -> str:
        if self.max_chars is not None and len(text) > self.max_chars:
            text = text[: self.max_chars] + f"...(+{len(text) - self.max_chars} chars)"
        return text


_STDLIB_LOG = logging.Logger._log
_STDLIB_FIND_CALLER = logging.Logger.findCaller
_WHERE = (log._record.__code__.co_filename, log._record.__code__.co_firstlineno, log._record.__name__)
"""The `pathname`, `lineno` and `funcName` of every record (where the stdlib's `findCaller` would point)."""


def _text_of(input: Any) -> Any:
    """A run's input as text: a message's text, a list of messages' texts."""
    if isinstance(input, Message):
        return input.text
    if isinstance(input, list | tuple):
        return [_text_of(item) for item in input]
    return input if isinstance(input, str) else repr(input)


def _outcome(ctx: Any, result: Any) -> tuple[str, str | None]:
    """What a call that returned came to, and why: `ok`, `paused`, `blocked` or `error` (a tool's error result)."""
    if isinstance(result, ToolResult):
        paused = getattr(ctx, "pause_reason", None)
        if paused is not None:
            return "paused", paused
        if not result.is_error:
            return "ok", None
        refusal = ctx.block("").text if isinstance(ctx, ToolCall) else None
        text = result.text
        if refusal and text.startswith(refusal):
            return "blocked", text[len(refusal) :]
        return "error", text
    if isinstance(result, RunResult) and result.paused:
        return "paused", "waiting for " + ", ".join(call.name for call in result.pending)
    return "ok", None
