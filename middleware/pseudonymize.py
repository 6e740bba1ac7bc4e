"""`pseudonymize`: personal data reaches the model, the history and the store as stable placeholders;
tools and the user get the real values."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from typing import Any

from onion import (
    Handler,
    Message,
    ModelCall,
    ModelCallFinished,
    ModelResponse,
    Run,
    RunResult,
    StreamReset,
    TextDelta,
    ToolCall,
    ToolCallStarted,
    ToolRequest,
    ToolResult,
    ToolResultEvent,
    output_schema,
)
from onion.errors import MiddlewareError, RunBusy, RunStateError
from onion.scrub import rewrite_message

from ._message_memo import MessageMemo
from ._vault import PROCESS_VAULT, MemoryVault, Vault, vault_key
from .patterns import CARD_NUMBER, EMAIL, IBAN, PHONE, iban_valid, luhn_valid, phone_valid

__all__ = [
    "PROCESS_VAULT",
    "MemoryVault",
    "Pseudonyms",
    "RestoredEvents",
    "RestoredStream",
    "Vault",
    "pseudonymize",
    "vault_key",
]

Rule = tuple[str, re.Pattern[str], Callable[[str], bool] | None]

BUILTIN: tuple[Rule, ...] = (
    ("IBAN", IBAN, iban_valid),
    ("EMAIL", EMAIL, None),
    ("CARD", CARD_NUMBER, luhn_valid),
    ("PHONE", PHONE, phone_valid),
)
"""The built-in kinds, in the order they are applied: IBANs, e-mail addresses, card numbers, phone numbers."""

PLACEHOLDER = re.compile(r"<[A-Z][A-Z0-9_]*_[0-9]+>")
_OPEN_PLACEHOLDER = re.compile(r"<[A-Z0-9_]{0,64}\Z")
"""The start of a placeholder the next delta may complete, at the end of the text."""

_LABEL = re.compile(r"[A-Z][A-Z0-9_]*\Z")
_KEY = "pseudonymize"
"""Where a `RunState` saved before `vault` existed kept the mapping in clear (`run.private`): still read."""


class Pseudonyms:
    """The placeholders of one run: each real value and its `<LABEL_n>`, numbered per label in order of first sight."""

    __slots__ = ("counts", "placeholders", "values")

    def __init__(self, values: dict[str, str] | None = None) -> None:
        self.values: dict[str, str] = dict(values or {})
        """Each placeholder's real value."""
        self.placeholders = {value: placeholder for placeholder, value in self.values.items()}
        self.counts: dict[str, int] = {}
        for placeholder in self.values:
            label = placeholder[1:].rpartition("_")[0]
            self.counts[label] = self.counts.get(label, 0) + 1

    def skip(self, placeholders: set[str]) -> None:
        """Number new values after `placeholders` (made by a run whose values are not known here)."""
        for placeholder in placeholders:
            label, _, number = placeholder[1:-1].rpartition("_")
            self.counts[label] = max(self.counts.get(label, 0), int(number))

    def placeholder(self, label: str, value: str) -> str:
        """`value`'s placeholder, a new one (`<LABEL_n>`, the next `n` of that label) the first time."""
        known = self.placeholders.get(value)
        if known is None:
            count = self.counts[label] = self.counts.get(label, 0) + 1
            known = self.placeholders[value] = f"<{label}_{count}>"
            self.values[known] = value
        return known

    def restore(self, text: str) -> str:
        """`text` with every placeholder of this run replaced by its real value (others left as they are)."""
        if "<" not in text or not self.values:
            return text
        return PLACEHOLDER.sub(lambda match: self.values.get(match.group(), match.group()), text)

    def restore_json(self, text: str) -> str:
        """`text` (JSON) with every placeholder of this run replaced by its real value escaped as in a JSON string."""
        if "<" not in text or not self.values:
            return text
        return PLACEHOLDER.sub(lambda match: _in_json(self.values.get(match.group(), match.group())), text)

    def restore_value(self, value: Any) -> Any:
        """`value` (JSON-like data) with the placeholders in its strings restored."""
        if isinstance(value, str):
            return self.restore(value)
        if isinstance(value, dict):
            return {key: self.restore_value(item) for key, item in value.items()}
        if isinstance(value, list | tuple):
            return [self.restore_value(item) for item in value]
        return value


def _in_json(value: str) -> str:
    """`value` as the inside of a JSON string: quotes, backslashes and control characters escaped."""
    return json.dumps(value, ensure_ascii=False)[1:-1]


class pseudonymize:
    """Replace personal data with stable placeholders in the run's history; tools and the user get the real values.

    Each value found (built in: IBANs passing their checksum, e-mail
    addresses, card numbers passing the Luhn check, phone numbers; then each
    of `patterns`, a regex whose matches become `<PII_n>`, and each of
    `labelled`, `LABEL=regex`, whose matches become `<LABEL_n>`) gets one
    placeholder for the whole run (`<EMAIL_1>` every time the same address
    comes up), so the model can still tell values apart and refer to them.
    Your own patterns are applied first.

    The history holds the placeholders: the input, every message before
    each model call (injected ones too), the model's answers and tool
    results; so do `result.messages`, the journal, sessions and a paused
    run's `RunState`: nothing onion persists holds a value it replaced.
    The real values come back where they are used: a tool gets its
    arguments restored, `result.output` is the final answer restored, and a
    streamed run's `TextDelta`s show them (a placeholder split across deltas
    is held until whole). Placeholders the run never made are left as they
    are.

    The mapping lives in `vault` (by default `PROCESS_VAULT`, this
    process's memory, shared by every layer given none): under the run's id
    while it is paused, and under the session for a run on one, each scoped
    by the agent's store (`vault_key`). A paused (or crashed) run resumed
    where the vault does not have its values raises `RunStateError` before
    anything runs; give every process one shared `Vault` to resume anywhere.
    A new run whose history holds placeholders it has no values for leaves
    them as they are and numbers new values after them; a run on a session
    takes only the values of placeholders its session's history holds.
    """

    __slots__ = ("_memos", "_runs", "rules", "vault")

    covers_sub_agents = True
    """A sub-agent called from this layer's agent (`agent.as_tool()`) runs through this layer too, without `inherit`."""

    def __init__(
        self,
        *patterns: str | re.Pattern[str],
        builtin: bool = True,
        vault: Vault | None = None,
        **labelled: str | re.Pattern[str],
    ) -> None:
        rules: list[Rule] = []
        for label, pattern in [*(("PII", p) for p in patterns), *labelled.items()]:
            if not isinstance(pattern, str | re.Pattern):
                raise TypeError(f"pseudonymize: {pattern!r} is not a regex (a str or a compiled pattern)")
            if not _LABEL.match(label):
                raise ValueError(
                    f"pseudonymize: label {label!r} must be upper case letters, digits and _ (EMPLOYEE_ID=...)"
                )
            rules.append((label, re.compile(pattern), None))
        if builtin:
            rules.extend(BUILTIN)
        if not rules:
            raise TypeError("pseudonymize(builtin=False) needs at least one pattern")
        if vault is not None and not all(callable(getattr(vault, name, None)) for name in ("get", "set", "delete")):
            raise TypeError(f"pseudonymize: vault must have async get, set and delete methods (a Vault), got {vault!r}")
        self.rules: tuple[Rule, ...] = tuple(rules)
        self.vault: Vault = vault if vault is not None else PROCESS_VAULT
        self._runs: dict[Run, Pseudonyms] = {}
        """The placeholders of each running run."""
        self._memos: dict[Run, MessageMemo] = {}
        """Per running run, what each message seen so far became (the mapping only grows, so it stays right)."""

    def text(self, text: str, pseudonyms: Pseudonyms) -> str:
        """`text` with every value found replaced by its placeholder."""
        for label, pattern, valid in self.rules:

            def swap(match: re.Match[str], label: str = label, valid: Callable[[str], bool] | None = valid) -> str:
                value = match.group()
                return value if valid is not None and not valid(value) else pseudonyms.placeholder(label, value)

            text = pattern.sub(swap, text)
        return text

    def _value(self, value: Any, pseudonyms: Pseudonyms) -> Any:
        if isinstance(value, str):
            return self.text(value, pseudonyms)
        if isinstance(value, dict):
            return {key: self._value(item, pseudonyms) for key, item in value.items()}
        if isinstance(value, list | tuple):
            return [self._value(item, pseudonyms) for item in value]
        return value

    def message(self, message: Message, pseudonyms: Pseudonyms) -> Message:
        """`message` with its values replaced: itself when nothing matched, otherwise a new `Message`."""
        return rewrite_message(
            message, lambda text: self.text(text, pseudonyms), lambda args: self._value(args, pseudonyms)
        )

    def _input(self, value: Any, pseudonyms: Pseudonyms) -> Any:
        """The run's input (`run.input`, kept in its `RunState`) with its values replaced."""
        if isinstance(value, str):
            return self.text(value, pseudonyms)
        if isinstance(value, Message):
            return self.message(value, pseudonyms)
        if isinstance(value, list):
            return [self._input(item, pseudonyms) for item in value]
        return value

    async def wrap_run(self, run: Run, call_next: Handler) -> RunResult:
        """Puts placeholders in the run's input and history, keeps the mapping in the vault, restores the output."""
        if run in self._runs:  # the same layer twice in a stack
            result: RunResult = await call_next(run)
            return result
        going_on = run.steps > 0  # resumed after a pause, or recovered from the journal
        pseudonyms, forgotten = await self._pseudonyms(run, going_on)
        self._runs[run] = pseudonyms
        self._memos[run] = MessageMemo()
        emit = run.emit
        if emit is not None:
            run.emit = RestoredEvents(emit, pseudonyms, json_text=run.output_type is not str)
        try:
            run.input = self._input(run.input, pseudonyms)
            self._memos[run].rewrite(run.messages, partial(self.message, pseudonyms=pseudonyms))
            result = await call_next(run)
        except BaseException:
            if pseudonyms.values:  # a failed run can be resumed from its journal
                await self.vault.set(vault_key("run", run.id, run.agent.store), pseudonyms.values)
            raise
        finally:
            del self._runs[run], self._memos[run]
            run.emit = emit
        if result.paused:
            if pseudonyms.values:
                await self.vault.set(vault_key("run", run.id, run.agent.store), pseudonyms.values)
            return result
        session = _session_key(run)
        if session is not None and (pseudonyms.values or forgotten):
            await self._keep(session, pseudonyms.values)
        if pseudonyms.values:
            if going_on:
                await self.vault.delete(vault_key("run", run.id, run.agent.store))
            result.output = _restored_output(run, result.output, pseudonyms)
        return result

    async def _keep(self, key: str, values: dict[str, str]) -> None:
        """`values` under `key` in the vault; none: the key deleted."""
        if values:
            await self.vault.set(key, values)
        else:
            await self.vault.delete(key)

    async def _pseudonyms(self, run: Run, going_on: bool) -> tuple[Pseudonyms, bool]:
        """The run's mapping: from the vault (its run, else its session), or a `RunState` of an older onion.

        From its session, only the values of placeholders the session's history still holds (none once it was
        cleared); the flag says the vault kept others, to forget when the run completes.
        """
        values = run.private.pop(_KEY, None)
        forgotten, session = False, _session_key(run)
        if values is None and going_on:
            values = await self.vault.get(vault_key("run", run.id, run.agent.store))
        if values is None and session is not None:
            kept = await self.vault.get(session) or {}
            held = {found for message in run.messages[: run.session_from] for found in _placeholders(message)}
            values = {placeholder: value for placeholder, value in kept.items() if placeholder in held}
            forgotten = len(values) < len(kept)
        pseudonyms = Pseudonyms(values)
        unknown = {found for message in run.messages for found in _placeholders(message)} - pseudonyms.values.keys()
        if unknown and going_on:
            raise RunStateError(
                f"pseudonymize: run {run.id} goes on with placeholders ({', '.join(sorted(unknown))}) whose real "
                "values are not in this process's vault: it paused (or stopped) in another process, or its mapping "
                "was evicted. Resume it where it paused, or give every process one shared "
                "pseudonymize(vault=...)"
            )
        pseudonyms.skip(unknown)
        return pseudonyms, forgotten

    async def wrap_model(self, call: ModelCall, call_next: Handler) -> ModelResponse:
        """Puts placeholders in the history and the request, and in the answer; streamed text shows real values."""
        pseudonyms = self._runs.get(call.run)
        if pseudonyms is None:
            raise RuntimeError("pseudonymize is a run and model layer: add it with agent.use(...), not to one chain")
        memo, hide = self._memos[call.run], partial(self.message, pseudonyms=pseudonyms)
        memo.rewrite(call.run.messages, hide)
        memo.rewrite(call.messages, hide)
        if call.run.emit is not None:
            with call.edit_stream(RestoredStream(pseudonyms, json_text=call.output_type is not str)):
                response: ModelResponse = await call_next(call)
        else:
            response = await call_next(call)
        return _with_message(response, self.message(response.message, pseudonyms))

    async def wrap_tool(self, call: ToolCall, call_next: Handler) -> ToolResult:
        """Runs the tool with its arguments restored; its result, or the error it raised, goes on with placeholders.

        An error whose text holds a value to hide becomes its error result here, worded as onion words it.
        """
        pseudonyms = self._runs.get(call.run)
        if pseudonyms is None:
            raise RuntimeError("pseudonymize is a run and tool layer: add it with agent.use(...), not to one chain")
        call.args = pseudonyms.restore_value(call.args)
        if call.raw_args is not None:
            call.raw_args = pseudonyms.restore(call.raw_args)
        try:
            result: ToolResult = await call_next(call)
        except (MiddlewareError, RunBusy):
            raise
        except Exception as error:  # its text becomes the error result journaled: with placeholders too
            failure = f"{type(error).__name__}: {error}"
            hidden_failure = self.text(failure, pseudonyms)
            if hidden_failure == failure:
                raise
            outcome = "gave no result" if call.left_running else "failed"
            return ToolResult(f"Tool {call.name} {outcome}: {hidden_failure}", is_error=True, call_id=call.id)
        content = result.content
        if isinstance(content, str):
            hidden: str | list[Any] = self.text(content, pseudonyms)
        else:
            hidden = [self.text(part, pseudonyms) if isinstance(part, str) else part for part in content]
        if hidden == content:
            return result
        return result.replace(content=hidden)


def _session_key(run: Run) -> str | None:
    """Where the vault keeps the values of `run`'s session; None without one, or when its store is not the agent's.

    A `Session` of another store given to an agent without one: the run does
    not say which store, so its values are not kept for the next run there.
    """
    if run.session is None or run.agent.store is None:
        return None
    return vault_key("session", run.session, run.agent.store)


def _with_message(response: ModelResponse, message: Message) -> ModelResponse:
    """`response` with `message` in place of its own (itself when that is the same)."""
    if message is response.message:
        return response
    return response.replace(message=message)


class RestoredEvents:
    """A streamed run's `emit` that shows its consumer the real values: in text, tool calls, results, responses.

    Text deltas arrive restored already (`RestoredStream`, holding back a
    split placeholder); whole ones (a model that does not stream, a cache
    hit) are restored here. `json_text`: the model answers in JSON (a typed
    run), so values restored into its text are escaped as JSON.
    """

    __slots__ = ("emit", "pseudonyms", "restore_text")

    def __init__(self, emit: Callable[[Any], None], pseudonyms: Pseudonyms, *, json_text: bool = False) -> None:
        self.emit = emit
        self.pseudonyms = pseudonyms
        self.restore_text = pseudonyms.restore_json if json_text else pseudonyms.restore

    def __call__(self, event: Any) -> None:
        restore = self.pseudonyms.restore
        if isinstance(event, TextDelta):
            event = TextDelta(self.restore_text(event.text))
        elif isinstance(event, ModelCallFinished):
            response = _restored(event.response, self.pseudonyms, self.restore_text)
            event = ModelCallFinished(response, event.usage, event.cached)
        elif isinstance(event, ToolCallStarted):
            event = ToolCallStarted(event.id, event.name, self.pseudonyms.restore_value(event.args))
        elif isinstance(event, ToolResultEvent):
            result = event.result
            content = restore(result.content) if isinstance(result.content, str) else result.content
            if isinstance(content, list):
                content = [restore(part) if isinstance(part, str) else part for part in content]
            restored = result.replace(content=content)
            event = ToolResultEvent(event.call_id, event.name, restored)
        self.emit(event)


def _restored(response: ModelResponse, pseudonyms: Pseudonyms, restore_text: Callable[[str], str]) -> ModelResponse:
    """`response` with the run's placeholders in its text (`restore_text`) and tool-call arguments replaced by the
    real values."""
    message = response.message
    calls = [
        ToolRequest(
            id=call.id,
            name=call.name,
            args=pseudonyms.restore_value(call.args),
            raw_args=None if call.raw_args is None else pseudonyms.restore(call.raw_args),
        )
        for call in message.tool_calls
    ]
    return _with_message(response, replace(message, text=restore_text(message.text), tool_calls=calls))


def _placeholders(message: Message) -> set[str]:
    """The placeholders `message` holds, in its text, text parts and tool-call arguments."""
    found = set(PLACEHOLDER.findall(message.text)) if "<" in message.text else set()
    for call in message.tool_calls:
        found.update(PLACEHOLDER.findall(repr(call.args)))
    return found


def _restored_output(run: Run, output: Any, pseudonyms: Pseudonyms) -> Any:
    """The final answer with the real values: its text restored, a typed one validated again from its JSON (the
    values restored into it escaped as JSON)."""
    if isinstance(output, str):
        return pseudonyms.restore(output)
    text = run.messages[-1].text if run.messages else ""
    restored = pseudonyms.restore_json(text)
    return output if restored == text else output_schema(run.output_type).validate(restored)


class RestoredStream:
    """A stream edit (`ModelCall.edit_stream`): placeholders in `TextDelta`s restored to the real values.

    Holds back only a trailing `<...` that the next delta may complete into
    a placeholder (at most 65 characters); a `StreamReset` drops it.
    `json_text`: the deltas are JSON (a typed run), the values restored into
    them escaped as JSON.
    """

    __slots__ = ("held", "pseudonyms", "restore")

    def __init__(self, pseudonyms: Pseudonyms, *, json_text: bool = False) -> None:
        self.pseudonyms = pseudonyms
        self.restore = pseudonyms.restore_json if json_text else pseudonyms.restore
        self.held = ""

    def __call__(self, event: Any) -> list[Any]:
        if isinstance(event, TextDelta):
            text = self.held + event.text
            found = _OPEN_PLACEHOLDER.search(text, max(0, len(text) - 66))
            cut = len(text) if found is None else found.start()
            self.held = text[cut:]
            head = self.restore(text[:cut])
            return [TextDelta(head)] if head else []
        if isinstance(event, StreamReset):
            self.held = ""
            return [event]
        return [*self.end(), event]

    def end(self) -> list[Any]:
        """What is held, restored."""
        if not self.held:
            return []
        held, self.held = self.held, ""
        return [TextDelta(self.restore(held))]
