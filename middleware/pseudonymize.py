"""`pseudonymize`: personal data reaches the model, the history and the store as stable placeholders;
tools and the user get the real values."""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import partial
from typing import Any

from onion import (
    Message,
    ModelCall,
    ModelNext,
    ModelResponse,
    Run,
    RunNext,
    RunResult,
    ToolCall,
    ToolNext,
    ToolResult,
)
from onion.errors import MiddlewareError, RunBusy, RunStateError
from onion.scrub import rewrite_message

from ._message_memo import MessageMemo
from ._pseudonyms import Pseudonyms, RestoredEvents, RestoredStream, placeholders_in, restored_output, with_message
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

_LABEL = re.compile(r"[A-Z][A-Z0-9_]*\Z")
_KEY = "pseudonymize"
"""Where a `RunState` saved before `vault` existed kept the mapping in clear (`run.private`): still read."""


class pseudonymize:
    """Replace personal data with stable placeholders in the run's history; tools and the user get the real values.

    Built in: IBANs, e-mail addresses, card numbers and phone numbers (each
    checked); `patterns` become `<PII_n>`, `labelled` (`LABEL=regex`)
    `<LABEL_n>`, applied first. One placeholder per value for the whole run;
    nothing onion persists holds a replaced value. The mapping lives in
    `vault` (default `PROCESS_VAULT`): give every process one shared `Vault`
    to resume a paused run anywhere. Details: docs/middleware-library.md.
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

    async def wrap_run(self, run: Run, call_next: RunNext) -> RunResult:
        """Puts placeholders in the run's input and history, keeps the mapping in the vault, restores the output."""
        if run in self._runs:  # the same layer twice in a stack
            result = await call_next(run)
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
            result.output = restored_output(run, result.output, pseudonyms)
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
            held = {found for message in run.messages[: run.session_from] for found in placeholders_in(message)}
            values = {placeholder: value for placeholder, value in kept.items() if placeholder in held}
            forgotten = len(values) < len(kept)
        pseudonyms = Pseudonyms(values)
        unknown = {found for message in run.messages for found in placeholders_in(message)} - pseudonyms.values.keys()
        if unknown and going_on:
            raise RunStateError(
                f"pseudonymize: run {run.id} goes on with placeholders ({', '.join(sorted(unknown))}) whose real "
                "values are not in this process's vault: it paused (or stopped) in another process, or its mapping "
                "was evicted. Resume it where it paused, or give every process one shared "
                "pseudonymize(vault=...)"
            )
        pseudonyms.skip(unknown)
        return pseudonyms, forgotten

    async def wrap_model(self, call: ModelCall, call_next: ModelNext) -> ModelResponse:
        """Puts placeholders in the history and the request, and in the answer; streamed text shows real values."""
        pseudonyms = self._runs.get(call.run)
        if pseudonyms is None:
            raise RuntimeError("pseudonymize is a run and model layer: add it with agent.use(...), not to one chain")
        memo, hide = self._memos[call.run], partial(self.message, pseudonyms=pseudonyms)
        memo.rewrite(call.run.messages, hide)
        memo.rewrite(call.messages, hide)
        if call.run.emit is not None:
            with call.edit_stream(RestoredStream(pseudonyms, json_text=call.output_type is not str)):
                response = await call_next(call)
        else:
            response = await call_next(call)
        return with_message(response, self.message(response.message, pseudonyms))

    async def wrap_tool(self, call: ToolCall, call_next: ToolNext) -> ToolResult:
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
            result = await call_next(call)
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
