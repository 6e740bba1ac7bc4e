"""`instrument()`: OpenTelemetry spans and metrics for every agent, after the GenAI semantic conventions.

Only `opentelemetry-api` is imported, when `instrument()` is called; the SDK
(the tracer and meter providers, exporters) is the application's.
"""

from __future__ import annotations

import json
import re
import traceback
from collections.abc import Iterable
from typing import Any

from .. import clock
from .._calls import ModelCall, ToolBatch, ToolCall
from .._messages import Message, Usage
from .._results import ModelResponse, ToolResult
from .._run import Run, RunResult
from . import _chains
from ._chains import model_name
from ._facts import did, produced
from ._spans import Span

SPAN_NAMES = {
    "run": "invoke_agent {}",
    "model": "chat {}",
    "tools": "tool_batch",
    "tool": "execute_tool {}",
    "request": "request {}",
    "layer": "layer {}",
}
"""How each kind of span is named: the GenAI conventions' names for runs, model calls and tool calls."""

MAX_STATUS = 300
"""Characters of an error's text kept in a span's status description."""


def instrument(
    tracer_provider: Any = None,
    *,
    layers: bool = False,
    content: bool = False,
    meter_provider: Any = None,
    patterns: Iterable[re.Pattern[str] | str] = (),
    real_values: bool = False,
) -> None:
    """Send OpenTelemetry spans and metrics for every agent's runs, from their next call on.

    Spans: `invoke_agent <agent>` per run, `chat <model>` per model call
    (with a `request <model>` child per request that reached the model: a
    cache hit has none, a retried call one per attempt), `tool_batch` per
    batch, `execute_tool <tool>` per tool call, all with `gen_ai.*`
    attributes; with `layers`, a `layer <name>` span per layer pass.
    Metrics: `gen_ai.client.token.usage` and `gen_ai.client.operation.duration`
    per model call. Message content (`gen_ai.input.messages`, tool arguments
    and results, ...) only with `content`, scrubbed of secrets and personal
    data like `middleware.log` (the built-in patterns plus `patterns`); error
    texts are always scrubbed. Content is what the model got (the
    placeholders of `pseudonymize`): messages as sent, tool arguments as the
    model wrote them, the run's output as the model's last message;
    `real_values=True` records the run's input as given, tool arguments as
    the tool got them and the output as the caller got it instead.
    `tracer_provider` / `meter_provider`: None for the global ones. Calling
    it again replaces the settings; `uninstrument()` turns it off.
    """
    try:
        from opentelemetry import metrics, trace
    except ImportError as error:
        raise ImportError("onion.tracing.instrument() needs opentelemetry-api: pip install 'onion[otel]'") from error
    from ..scrub import BUILTIN

    tracer = trace.get_tracer("onion", tracer_provider=tracer_provider)
    meter = metrics.get_meter("onion", meter_provider=meter_provider)
    compiled = tuple(re.compile(p) if isinstance(p, str) else p for p in patterns)
    exporter = OpenTelemetry(
        tracer, meter, layers=layers, content=content, patterns=BUILTIN + compiled, real_values=real_values
    )
    _chains.set_exporter(exporter)


def uninstrument() -> None:
    """Stop sending spans and metrics; agents build their chains without tracing again on their next call."""
    _chains.set_exporter(None)


class OpenTelemetry:
    """Turns onion's spans into OpenTelemetry spans as they open and close, and records the metrics."""

    def __init__(
        self,
        tracer: Any,
        meter: Any,
        *,
        layers: bool,
        content: bool,
        patterns: tuple[re.Pattern[str], ...],
        real_values: bool = False,
    ) -> None:
        from opentelemetry import context, trace
        from opentelemetry.trace import SpanKind, Status, StatusCode

        self.layers = layers
        self.content = content
        self.real_values = real_values
        self.patterns = patterns
        self._tracer = tracer
        self._attach, self._detach, self._in_context = context.attach, context.detach, trace.set_span_in_context
        self._client, self._internal = SpanKind.CLIENT, SpanKind.INTERNAL
        self._status, self._error = Status, StatusCode.ERROR
        self._tokens = meter.create_histogram(
            "gen_ai.client.token.usage", unit="{token}", description="Tokens used per model call"
        )
        self._duration = meter.create_histogram(
            "gen_ai.client.operation.duration", unit="s", description="Duration of each model call"
        )

    def open(self, span: Span) -> None:
        kind = self._client if span.kind == "model" else self._internal
        name = SPAN_NAMES[span.kind].format(span.name)
        start = round(clock.time() * 1e9) if clock.replaying() else None  # the time it first opened, not now
        opened = self._tracer.start_span(name, kind=kind, attributes=self._opening(span), start_time=start)
        given = len(span.ctx.messages) if span.kind == "run" else 0
        span.handle = (opened, self._attach(self._in_context(opened)), given)

    def close(self, span: Span) -> None:
        opened, token, given = span.handle
        span.handle = None
        self._detach(token)
        if clock.replaying():  # a durable engine replays what was exported when it happened: not again
            return
        opened.set_attributes(self._closing(span, given))
        error = span.error
        if error is not None:
            self._failed(opened, error)
        elif isinstance(span.result, ToolResult) and span.result.is_error and span.kind == "tool":
            opened.set_attribute("error.type", "tool_error")
            opened.set_status(self._status(self._error))
        for text in span.notes:
            opened.add_event("onion.note", {"onion.note": text})
        opened.end()
        if span.kind == "model":
            self._measure(span)

    # -- attributes ------------------------------------------------------------

    def _opening(self, span: Span) -> dict[str, Any]:
        ctx = span.ctx
        if span.kind == "layer":
            return {"onion.layer.name": span.name, "onion.layer.kind": ctx.kind}
        if isinstance(ctx, Run):
            model = ctx.agent.model
            found: dict[str, Any] = {
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": ctx.agent.name,
                "gen_ai.provider.name": provider_of(model),
                "gen_ai.request.model": model_name(model),
                "onion.run.id": ctx.id,
            }
            if self.content and self.real_values:
                found["gen_ai.input.messages"] = self._messages(ctx.messages)
            return found
        if isinstance(ctx, ModelCall):
            found = {
                "gen_ai.provider.name": provider_of(ctx.model),
                "gen_ai.request.model": model_name(ctx.model),
            }
            if span.kind == "request":
                return found
            found["gen_ai.operation.name"] = "chat"
            found["onion.step"] = ctx.run.steps
            for setting in ("temperature", "max_tokens", "top_p", "top_k", "seed"):
                value = ctx.settings.get(setting)
                if isinstance(value, int | float):
                    found[f"gen_ai.request.{setting}"] = value
            return found
        if isinstance(ctx, ToolBatch):
            return {"onion.tool_batch.size": len(ctx.calls), "onion.tool_batch.tools": [c.name for c in ctx.calls]}
        assert isinstance(ctx, ToolCall)
        found = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": ctx.name,
            "gen_ai.tool.call.id": ctx.id,
            "gen_ai.tool.type": "function",
        }
        if self.content and not self.real_values:
            found["gen_ai.tool.call.arguments"] = self._json(span.args if span.args is not None else ctx.args)
        if span.untrusted_before:
            found["onion.tool.after_untrusted"] = [
                f"{source.tool or 'message'} ({source.call_id or source.index})" for source in span.untrusted_before
            ]
        return found

    def _closing(self, span: Span, given: int) -> dict[str, Any]:
        result, ctx = span.result, span.ctx
        if self.content and span.kind == "model":  # as sent: after the layers that edit messages (pseudonymize)
            return {**self._sent(ctx), **self._answered(span)}
        if span.kind == "layer":
            found: dict[str, Any] = {"onion.layer.passes": span.passes}
            facts = did(span)
            if facts:
                found["onion.layer.did"] = facts
            if span.waited:
                found["onion.layer.waited_s"] = span.waited
            return found
        if isinstance(result, RunResult):
            found = usage_attributes(result.usage)
            found["onion.run.status"] = result.status
            found["onion.run.steps"] = ctx.steps
            if self.content:
                if not self.real_values:
                    found["gen_ai.input.messages"] = self._messages(ctx.messages[:given])
                output = result.output if self.real_values else _last_answer(ctx.messages)
                found["gen_ai.output.messages"] = self._json([{"role": "assistant", "parts": _text(output)}])
            return found
        if isinstance(ctx, ToolCall) and self.content and self.real_values:
            return {**self._answered(span), "gen_ai.tool.call.arguments": self._json(ctx.args)}
        return self._answered(span)

    def _sent(self, call: ModelCall) -> dict[str, Any]:
        """A model call's messages as sent: its system instructions and the others."""
        found: dict[str, Any] = {}
        system = [m.text for m in call.messages if m.role == "system"]
        if system:
            found["gen_ai.system_instructions"] = self._json([{"type": "text", "content": t} for t in system])
        found["gen_ai.input.messages"] = self._messages([m for m in call.messages if m.role != "system"])
        return found

    def _answered(self, span: Span) -> dict[str, Any]:
        """What a model call or tool call came to: its response or result."""
        result = span.result
        found: dict[str, Any]
        if isinstance(result, ModelResponse):
            found = {"gen_ai.response.finish_reasons": [result.stop_reason]}
            if result.model:
                found["gen_ai.response.model"] = result.model
            if span.kind == "request":
                return found
            found.update(usage_attributes(produced(span.ctx)))
            found["onion.cached"] = result.cached
            if self.content:
                output = _message(result.message)
                output["finish_reason"] = result.stop_reason
                found["gen_ai.output.messages"] = self._json([output])
            return found
        if isinstance(result, ToolResult):
            found = {"onion.tool.is_error": result.is_error}
            if result.untrusted:
                found["onion.tool.untrusted"] = True
            if span.ctx.pause_reason is not None:
                found["onion.tool.paused"] = True
            if self.content:
                found["gen_ai.tool.call.result"] = self._scrubbed(result.text)
            return found
        return {}

    def _failed(self, opened: Any, error: BaseException) -> None:
        kind = type(error).__qualname__
        text = self._scrubbed(str(error))
        opened.set_attribute("error.type", kind)
        opened.set_status(self._status(self._error, f"{kind}: {text}"[:MAX_STATUS]))
        stack = "".join(traceback.format_exception(error))
        attributes = {"exception.type": kind, "exception.message": text, "exception.stacktrace": self._scrubbed(stack)}
        opened.add_event("exception", attributes)

    def _measure(self, span: Span) -> None:
        ctx = span.ctx
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": provider_of(ctx.model),
            "gen_ai.request.model": model_name(ctx.model),
        }
        if isinstance(span.result, ModelResponse) and span.result.model:
            attributes["gen_ai.response.model"] = span.result.model
        if span.error is not None:
            attributes["error.type"] = type(span.error).__qualname__
        self._duration.record(span.duration_ns / 1e9, attributes)
        if ctx._counted:
            usage = produced(ctx)
            self._tokens.record(usage.input_tokens, {**attributes, "gen_ai.token.type": "input"})
            self._tokens.record(usage.output_tokens, {**attributes, "gen_ai.token.type": "output"})

    # -- content ---------------------------------------------------------------

    def _messages(self, messages: list[Message]) -> str:
        return self._json([_message(m) for m in messages])

    def _json(self, value: Any) -> str:
        from ..scrub import scrub_value

        return json.dumps(scrub_value(value, self.patterns), ensure_ascii=False, default=repr)

    def _scrubbed(self, text: str) -> str:
        from ..scrub import scrub

        return scrub(text, self.patterns)


def _last_answer(messages: list[Message]) -> str:
    """The text of the model's last message in a run's history: its answer as the model wrote it."""
    return next((message.text for message in reversed(messages) if message.role == "assistant"), "")


def _message(message: Message) -> dict[str, Any]:
    """A message in the GenAI conventions' shape: a role and its parts."""
    parts: list[dict[str, Any]] = _text(message.text)
    if message.role == "tool":
        parts = [{"type": "tool_call_response", "id": message.tool_call_id, "response": message.text}]
    parts += [{"type": "tool_call", "id": r.id, "name": r.name, "arguments": r.args} for r in message.tool_calls]
    return {"role": message.role, "parts": parts}


def _text(text: str) -> list[dict[str, Any]]:
    return [{"type": "text", "content": text}] if text else []


def usage_attributes(usage: Usage) -> dict[str, Any]:
    return {
        "gen_ai.usage.input_tokens": usage.input_tokens,
        "gen_ai.usage.output_tokens": usage.output_tokens,
        "gen_ai.usage.cache_read.input_tokens": usage.cached_input_tokens,
    }


def provider_of(model: Any) -> str:
    """The `gen_ai.provider.name` of a model: its `provider` (`anthropic`, `openai`), else its class name."""
    provider = getattr(model, "provider", None)
    return provider if isinstance(provider, str) else type(model).__name__
