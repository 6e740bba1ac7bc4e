"""`log`: one stdlib logging record per call of every kind, with secrets scrubbed."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Awaitable, Callable, Iterable
from typing import IO, Any, TypeVar

from onion import (
    Message,
    ModelCall,
    ModelNext,
    ModelResponse,
    Run,
    RunNext,
    RunResult,
    ToolBatch,
    ToolCall,
    ToolNext,
    ToolResult,
    ToolsNext,
    clock,
)

from . import _decisions
from .attempts import unwatch, watch
from .patterns import BUILTIN, scrub, scrub_value

C = TypeVar("C", Run, ModelCall, ToolBatch, ToolCall)
R = TypeVar("R")


class log:
    """Log every run, model call, tool batch and tool call as it finishes.

    One record per call, at `level` (`error_level` when the call raised or
    a tool answered with an error), with the message
    `"<kind> <what> <outcome> <ms>ms ..."` and structured `extra` fields:
    `kind`, `what`, `outcome`, `duration_ms`, `run_id`, `input_tokens`,
    `output_tokens`, `error`, `reason`, `retries`, `decision` and, when
    `payloads` is true, `payload`. The outcome is `"ok"`, `"error"` (the call raised, or a
    tool's error result: `error` holds its text), `"blocked"` (a layer
    refused the tool call with `ToolCall.block`: `reason` says why),
    `"paused"` (a tool call paused for approval, or a run that paused:
    `reason`) or `"cancelled"`. When a `retry` inside tried the call again,
    `retries` lists what failed before each new attempt; when an `authorize`
    inside decided the tool call, `decision` says how and by which rule.

    Secrets and personal data (the one set `redact` uses too,
    `middleware.patterns.BUILTIN`: API keys, bearer tokens, `api_key=` style
    assignments, private keys, e-mail addresses, card numbers; plus
    `patterns`) are scrubbed from every text before it is quoted or escaped
    into the payload, and from error texts, then the line is truncated to
    `max_chars` (`None`: no limit). Every text that can hold a newline or a
    control character (error texts, reasons, names, payloads) is escaped
    (`\\n`, `\\x1b`), so one record is always one line. A resumed run's
    payload is not its input but `resumed <run id>: ` and what was decided (a
    recovered one: `recovered <run id>: ` and what it goes on with).

    `logger` is a `logging.Logger`, a logger name, or `None` for the `"onion"`
    logger. Records go through stdlib logging: with logging not configured,
    Python shows only WARNING and up, so the INFO records show nowhere.
    `logging.basicConfig(level=logging.INFO)` shows them; or pass `stream`
    (e.g. `log(stream=sys.stderr)`): the layer then writes its records there
    itself, one line each (`<time> <level> <logger name> <message>`), on a
    logger of its own that no logging configuration reaches (a `Logger`
    object with a stream is a `TypeError`).
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
        stream: IO[str] | None = None,
    ) -> None:
        if stream is not None:
            if isinstance(logger, logging.Logger):
                raise TypeError(
                    "log(logger, stream=...): a Logger object and a stream do not go together "
                    "(with a stream, give the logger's name, or none)"
                )
            self.logger = _writing_to(stream, logger or "onion")
        else:
            self.logger = logger if isinstance(logger, logging.Logger) else logging.getLogger(logger or "onion")
        self.level = level
        self.error_level = error_level
        self.payloads = payloads
        self.max_chars = max_chars
        extra = tuple(re.compile(p) if isinstance(p, str) else p for p in patterns)
        self.patterns: tuple[re.Pattern[str], ...] = BUILTIN + extra
        encode = json.JSONEncoder(default=self._repr, ensure_ascii=False).encode
        self._encode: Callable[[Any], str] = lambda value: _printable_json(encode(value))

    async def wrap_run(self, run: Run, call_next: RunNext) -> RunResult:
        return await self._logged(run, call_next, run.agent.name, _resumption(run))

    async def wrap_model(self, call: ModelCall, call_next: ModelNext) -> ModelResponse:
        return await self._logged(call, call_next, str(getattr(call.model, "name", call.model)))

    async def wrap_tools(self, batch: ToolBatch, call_next: ToolsNext) -> list[ToolResult]:
        return await self._logged(batch, call_next, ",".join(c.name for c in batch.calls))

    async def wrap_tool(self, call: ToolCall, call_next: ToolNext) -> ToolResult:
        return await self._logged(call, call_next, call.name)

    async def _logged(self, ctx: C, call_next: Callable[[C], Awaitable[R]], what: str, resumed: str | None = None) -> R:
        if not self.logger.isEnabledFor(min(self.level, self.error_level)):
            return await call_next(ctx)
        started = clock.monotonic()
        failures, token = watch()
        told, telling = _decisions.watch()
        try:
            result = await call_next(ctx)
        except BaseException as error:
            outcome = "error" if isinstance(error, Exception) else "cancelled"
            self._record(ctx, what, outcome, started, None, error, failures, resumed, told)
            raise
        finally:
            _decisions.unwatch(telling)
            unwatch(token)
        self._record(ctx, what, "ok", started, result, None, failures, resumed, told)
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
        resumed: str | None,
        told: list[tuple[Any, str]],
    ) -> None:
        reason = None
        if error is None:
            outcome, reason = _outcome(ctx, result)
        level = self.level if error is None and outcome != "error" else self.error_level
        if not self.logger.isEnabledFor(level) or clock.replaying():  # logged once, when it happened
            return
        kind = ctx.kind
        what = one_line(what)
        ms = round((clock.monotonic() - started) * 1000, 2)
        fields: dict[str, Any] = {
            "kind": kind,
            "what": what,
            "outcome": outcome,
            "duration_ms": ms,
            "run_id": one_line(ctx.run.id),
        }
        message = f"{kind} {what} {outcome} {ms}ms"
        usage = result.usage if isinstance(result, (ModelResponse, RunResult)) else None
        if usage is not None:
            fields["input_tokens"], fields["output_tokens"] = usage.input_tokens, usage.output_tokens
            message += f" in={usage.input_tokens} out={usage.output_tokens}"
            if isinstance(result, ModelResponse) and result.cached:
                message += " cached"
        if error is not None:
            fields["error"] = self._line(f"{type(error).__name__}: {error}")
            message += f" {fields['error']}"
        elif reason is not None:
            name = "error" if outcome == "error" else "reason"
            fields[name] = self._line(reason)
            message += f" ({fields[name]})"
        decisions = [self._line(text) for c, text in told if c is ctx]
        if decisions:
            fields["decision"] = "; ".join(decisions)
            message += f" policy: {fields['decision']}"
        retried = [self._line(f"{type(e).__name__}: {e}") for c, e in failures if c is ctx]
        if retried:
            fields["retries"] = retried
            message += f" after {len(retried)} {'retry' if len(retried) == 1 else 'retries'} ({'; '.join(retried)})"
        if self.payloads:
            fields["payload"] = payload = self._truncated(self._payload(ctx, result, resumed))
            message += f" {payload}"
        logger = self.logger
        if type(logger)._log is not _STDLIB_LOG or type(logger).findCaller is not _STDLIB_FIND_CALLER:
            logger.log(level, "%s", message, extra=fields)
            return
        # Logger._log without findCaller's stack walk: the caller is always this method.
        path, line, function = _WHERE
        logger.handle(logger.makeRecord(logger.name, level, path, line, "%s", (message,), None, function, fields))

    def _payload(self, ctx: Any, result: Any, resumed: str | None) -> str:
        """What went in and what came out, as one line; every text is scrubbed before it is quoted or escaped.

        A resumed (or recovered) run's input is its whole history: `resumed` says what it went on with instead.
        """
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
            sent = one_line(scrub(resumed, self.patterns)) if resumed else f"input={scrubbed(_text_of(ctx.input))!r}"
            return sent + (f" -> {scrubbed(result.output)!r}" if isinstance(result, RunResult) else "")
        if isinstance(result, list):
            return f"results={[scrubbed(r.text) for r in result if isinstance(r, ToolResult)]!r}"
        return ""

    def _scrubbed(self, value: Any) -> Any:
        return scrub_value(value, self.patterns)

    def _repr(self, value: Any) -> str:
        """What JSON cannot hold, shown by its scrubbed `repr`."""
        return scrub(repr(value), self.patterns)

    def _line(self, text: str) -> str:
        """`text` scrubbed, escaped to one line, then truncated."""
        return self._truncated(one_line(scrub(text, self.patterns)))

    def _truncated(self, text: str) -> str:
        if self.max_chars is not None and len(text) > self.max_chars:
            text = text[: self.max_chars] + f"...(+{len(text) - self.max_chars} chars)"
        return text


_STDLIB_LOG = logging.Logger._log
_STDLIB_FIND_CALLER = logging.Logger.findCaller
_WHERE = (log._record.__code__.co_filename, log._record.__code__.co_firstlineno, log._record.__name__)
"""The `pathname`, `lineno` and `funcName` of every record (where the stdlib's `findCaller` would point)."""


_ESCAPES = {"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def one_line(text: str) -> str:
    """`text` with its backslashes and every unprintable character escaped as `repr` escapes them: one line."""
    if text.isprintable() and "\\" not in text:
        return text
    return "".join(c if c.isprintable() and c != "\\" else _ESCAPES.get(c) or repr(c)[1:-1] for c in text)


def _printable_json(text: str) -> str:
    """JSON text with the unprintable characters JSON leaves raw (`\\x85`, `\\u2028`, ...) escaped, still JSON."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else json.dumps(c)[1:-1] for c in text)


def _writing_to(stream: IO[str], name: str) -> logging.Logger:
    """A logger outside the logging tree (no configuration reaches it) writing each record to `stream`, one line."""
    logger = logging.Logger(name)
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    logger.addHandler(handler)
    return logger


def _resumption(run: Run) -> str | None:
    """What a resumed or recovered run goes on with (`None` for a fresh run): read before the run starts.

    A resumed run names the decisions on its paused batch; a recovered one
    (`agent.recover`, after its worker stopped) counts the calls it holds.
    """
    pending = getattr(run, "_pending", None)  # onion's `Pending` batch, set on the run before it starts
    if pending is None:
        return None
    if pending.final:
        return f"recovered {run.id}: its final answer, recorded"
    last = run.messages[-1] if run.messages else None
    asked = {c.id: c for c in last.tool_calls} if last is not None else {}
    if not pending.approved:
        settled, todo = len(pending.settled), [r.name for r in pending.requests]
        to_run = f"{len(todo)} to run" + (f" ({', '.join(todo)})" if todo else "")
        return f"recovered {run.id}: {settled} {'call' if settled == 1 else 'calls'} answered already, {to_run}"
    decided = []
    for request in pending.requests:
        original = asked.get(request.id)
        verb = "approved" if original is None or original.args == request.args else "edited"
        decided.append(f"{verb} {request.name}({request.id})")
    for call_id, message in pending.settled.items():
        name = asked[call_id].name if call_id in asked else ""
        refusal = f"Tool call {name} was rejected: "  # what the model reads for a rejection (onion._durable.trust)
        if message.text.startswith(refusal):
            decided.append(f"rejected {name}({call_id}): {message.text[len(refusal) :]}")
    return f"resumed {run.id}: " + "; ".join(decided)


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
