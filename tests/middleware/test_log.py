"""`log`: one record per call of every kind, structured, with secrets scrubbed."""

from __future__ import annotations

import asyncio
import io
import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest

from middleware import approve, deny_tools, log, retry
from middleware.patterns import API_KEY, BEARER, scrub
from onion import Agent, Message, ModelResponse, ToolCall, Usage, tool
from onion.errors import AuthenticationError, ConnectionLostError, RateLimitedError
from onion.stores import MemoryStore
from onion.testing import FunctionModel, ScriptedModel, call

SECRET = "sk-ant-api03-SECRETSECRETSECRET"


@tool
def echo(text: str) -> str:
    """Echo the text back."""
    return f"echo {text}"


class Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def records() -> Iterator[list[logging.LogRecord]]:
    logger, handler = logging.getLogger("onion"), Collect()
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    yield handler.records
    logger.removeHandler(handler)
    logger.setLevel(logging.NOTSET)


async def test_bare_log_writes_one_record_per_call_of_every_kind(records: list[logging.LogRecord]) -> None:
    """A run with one tool batch logs: model, tool, tools, model, run (inner calls finish first)."""
    agent = Agent(ScriptedModel([[call("echo", text="hi")], "done"]), tools=[echo]).use(log)
    await agent.run("go")
    kinds = [r.kind for r in records]  # type: ignore[attr-defined]
    assert kinds == ["model", "tool", "tools", "model", "run"]
    assert all(r.outcome == "ok" and r.levelno == logging.INFO for r in records)  # type: ignore[attr-defined]


async def test_records_carry_structured_fields_for_duration_tokens_and_names(
    records: list[logging.LogRecord],
) -> None:
    model = ScriptedModel([ModelResponse(message=Message.assistant("hi"), usage=Usage(3, 4, 1))])
    await Agent(model, name="bot").use(log).run("hello")
    model_record, run_record = records
    assert model_record.what == "scripted"  # type: ignore[attr-defined]
    assert (model_record.input_tokens, model_record.output_tokens) == (3, 4)  # type: ignore[attr-defined]
    assert isinstance(model_record.duration_ms, float)  # type: ignore[attr-defined]
    assert model_record.run_id == run_record.run_id  # type: ignore[attr-defined]
    assert run_record.what == "bot"  # type: ignore[attr-defined]
    assert "in=3 out=4" in model_record.getMessage()


async def test_an_error_is_logged_at_error_level_with_its_type_and_reraised(records: list[logging.LogRecord]) -> None:
    agent = Agent(ScriptedModel([AuthenticationError(f"bad key {SECRET}")])).use(log(level=logging.DEBUG))
    with pytest.raises(AuthenticationError):
        await agent.run("hi")
    model_record = records[0]
    assert model_record.levelno == logging.WARNING
    assert model_record.outcome == "error"  # type: ignore[attr-defined]
    assert model_record.error.startswith("AuthenticationError: bad key")  # type: ignore[attr-defined]
    assert SECRET not in model_record.getMessage()


async def test_cancellation_is_logged_as_cancelled_and_propagates(records: list[logging.LogRecord]) -> None:
    started = asyncio.Event()

    async def slow(_: object) -> str:
        started.set()
        await asyncio.sleep(10)
        return "never"

    task = asyncio.ensure_future(Agent(FunctionModel(slow)).use(log).run("hi"))
    await started.wait()  # cancelled inside the logged model call, not before it began
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert [r.outcome for r in records] == ["cancelled", "cancelled"]  # type: ignore[attr-defined]


async def test_secrets_never_reach_the_log_even_inside_payloads(caplog: pytest.LogCaptureFixture) -> None:
    """API keys, Authorization headers and key assignments in messages, args and results are scrubbed."""
    caplog.set_level(logging.INFO, logger="onion")
    leaks = [SECRET, "sk-proj-ABCDEFGHIJKLMNOPQRSTUV", "eyJhbGciOiJIUzI1NiJ9.payload", "hunter2hunter2"]
    question = f"use {leaks[0]} with header Authorization: Bearer {leaks[2]}"
    model = ScriptedModel([[call("echo", text=f"api_key={leaks[3]} {leaks[1]}")], f"key was {leaks[0]}"])
    await Agent(model, tools=[echo]).use(log(max_chars=None)).run(question)
    logged = caplog.text + " ".join(str(r.__dict__) for r in caplog.records)
    for leak in leaks:
        assert leak not in logged
    assert "[REDACTED]" in logged


async def test_payloads_are_truncated_to_max_chars_and_can_be_switched_off(records: list[logging.LogRecord]) -> None:
    agent = Agent(ScriptedModel(["x" * 1000, "y"])).use(log(max_chars=50))
    await agent.run("hi")
    assert len(records[0].payload) < 80  # type: ignore[attr-defined]
    assert "chars)" in records[0].payload  # type: ignore[attr-defined]
    records.clear()
    await Agent(ScriptedModel(["y"])).use(log(payloads=False)).run("hi")
    assert not hasattr(records[0], "payload")


async def test_log_accepts_a_logger_name_and_extra_patterns(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="mine")
    await Agent(ScriptedModel(["employee 12345"])).use(log("mine", patterns=[r"employee \d+"])).run("hi")
    assert caplog.records[0].name == "mine"
    assert "12345" not in caplog.text


async def test_a_disabled_logger_costs_no_record(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.ERROR, logger="onion")
    result = await Agent(ScriptedModel(["fine"])).use(log).run("hi")
    assert result.output == "fine" and caplog.records == []


def test_shared_patterns_match_the_common_key_formats() -> None:
    assert API_KEY.fullmatch("sk-ant-api03-abcdefghijkl")
    assert API_KEY.fullmatch("sk-proj-" + "a" * 20)
    assert BEARER.search("Authorization: Bearer abcdefghijkl")
    assert scrub('{"password": "p4ss", "ok": 1}') == '{"password": [REDACTED], "ok": 1}'


async def test_records_point_at_the_log_layer_and_a_custom_logger_class_is_still_used() -> None:
    """Records skip the stack walk (their source is always `middleware/log.py`) unless `_log` is overridden."""

    class Tagging(logging.Logger):
        def _log(self, level: int, msg: object, args: Any, *rest: Any, **options: Any) -> None:
            super()._log(level, f"tagged {msg}", args, *rest, **options)

    plain, tagging, handler = logging.Logger("plain"), Tagging("tagging"), Collect()
    for logger in (plain, tagging):
        logger.addHandler(handler)
    await Agent(ScriptedModel(["ok"])).use(log(plain), log(tagging)).run("hi")
    by_logger = {r.name: r for r in handler.records if r.kind == "run"}  # type: ignore[attr-defined]
    assert by_logger["plain"].pathname.endswith("log.py") and by_logger["plain"].funcName == "_record"
    assert by_logger["tagging"].getMessage().startswith("tagged run")


async def test_keys_after_newlines_tabs_quotes_and_in_nested_json_never_reach_the_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Payloads are scrubbed before `repr` or JSON escapes them: `\\nsk-...` is not logged, in any field."""
    caplog.set_level(logging.INFO, logger="onion")
    keys = ["sk-ant-api03-" + "Ab1_" * 6, "sk-proj-" + "Cd2-" * 6, "AKIA" + "IOSFODNN7EXAMPLE", "ghp_" + "Gh4i" * 9]
    texts = [
        variant
        for key in keys
        for variant in (f"a\n{key}", f"b\t{key}", f'"{key}"', json.dumps({"cfg": {"env": f"X=1\n{key}"}}))
    ]
    arguments = {"text": texts[0], "nested": {"deeper": [texts[1], texts[3]]}, "password": "hunter2hunter2"}
    model = ScriptedModel([[call("echo", **arguments)], "\n".join(texts)])

    @tool
    def echo(text: str, nested: dict[str, Any], password: str) -> str:
        """Echo everything back."""
        return json.dumps({"text": text, "nested": nested, "all": texts})

    await Agent(model, tools=[echo]).use(log(max_chars=None)).run("\n".join(texts))
    logged = caplog.text + " ".join(str(r.__dict__) for r in caplog.records)
    for key in keys:
        assert key[8:] not in logged
    assert "hunter2hunter2" not in logged


@tool
def fails(text: str) -> str:
    """Always fails."""
    raise ValueError(f"cannot handle {text}")


async def test_blocked_calls_are_logged_as_blocked_with_the_reason_and_error_results_as_errors(
    records: list[logging.LogRecord],
) -> None:
    """A refused call is `blocked` (why, at INFO); a tool's error result is `error` (its text, at WARNING)."""
    model = ScriptedModel([[call("echo", text="hi"), call("fails", text="x")], "done"])
    agent = Agent(model, tools=[echo, fails]).use(log, deny_tools("echo", reason="not today"))
    await agent.run("go")
    by_name = {r.what: r for r in records if r.kind == "tool"}  # type: ignore[attr-defined]
    blocked, failed = by_name["echo"], by_name["fails"]
    assert (blocked.outcome, blocked.reason, blocked.levelno) == ("blocked", "not today", logging.INFO)  # type: ignore[attr-defined]
    assert "tool echo blocked" in blocked.getMessage() and "(not today)" in blocked.getMessage()
    assert (failed.outcome, failed.levelno) == ("error", logging.WARNING)  # type: ignore[attr-defined]
    assert "ValueError: cannot handle x" in failed.error  # type: ignore[attr-defined]


async def test_paused_calls_and_runs_are_logged_as_paused(records: list[logging.LogRecord]) -> None:
    """A call paused for approval is `paused`, with the reason; so is the run it paused."""
    model = ScriptedModel([[call("echo", text="hi")], "done"])
    result = await Agent(model, tools=[echo]).use(log, approve(reason="a person must look")).run("go")
    assert result.paused
    tool_record, run_record = (r for r in records if r.kind in ("tool", "run"))  # type: ignore[attr-defined]
    assert (tool_record.outcome, tool_record.reason) == ("paused", "a person must look")  # type: ignore[attr-defined]
    assert (run_record.outcome, run_record.reason) == ("paused", "waiting for echo")  # type: ignore[attr-defined]


async def test_a_log_outside_retry_says_what_failed_before_each_new_attempt(records: list[logging.LogRecord]) -> None:
    """`retry` tells the `log` around it each failure it retried: the record lists them, in order."""

    async def no_wait(seconds: float) -> None:
        return None

    model = ScriptedModel([ConnectionLostError("reset by peer"), RateLimitedError("slow down"), "done"])
    await Agent(model).use(log, retry(attempts=3, sleep=no_wait, jitter=0)).run("go")
    model_record, run_record = records
    assert model_record.outcome == "ok"  # type: ignore[attr-defined]
    assert model_record.retries == ["ConnectionLostError: reset by peer", "RateLimitedError: slow down"]  # type: ignore[attr-defined]
    assert "ok" in model_record.getMessage() and "after 2 retries (ConnectionLostError: reset by peer;" in (
        model_record.getMessage()
    )
    assert not hasattr(run_record, "retries")


AWKWARD = "one\ntwo\rthree\tfour\x1b[31mfive\x00six\x85seven\u2028eight\u2029nine\x1cten"
"""Every character `str.splitlines` breaks on, and the control characters a terminal acts on."""


def one_line(value: object) -> bool:
    return isinstance(value, str) and len(value.splitlines()) == 1 and value.isprintable()


async def test_every_text_that_can_hold_newlines_or_control_characters_is_escaped_so_a_record_is_one_line(
    records: list[logging.LogRecord],
) -> None:
    """Error texts, block reasons, retried failures, names and payloads: escaped (`\\n`), never written raw."""

    async def no_wait(seconds: float) -> None:
        return None

    @tool
    def breaks(text: str) -> str:
        """Fails with an awkward message."""
        raise ValueError(AWKWARD)

    model = ScriptedModel(
        [
            ConnectionLostError(AWKWARD),
            [call("breaks", text=AWKWARD), call("echo", text=AWKWARD)],
            AWKWARD,
        ],
        name=f"model {AWKWARD}",
    )
    agent = Agent(model, tools=[breaks, echo], name=f"bot {AWKWARD}").use(
        log(max_chars=None), retry(attempts=2, sleep=no_wait, jitter=0), deny_tools("echo", reason=AWKWARD)
    )
    await agent.run(AWKWARD)
    assert {r.outcome for r in records} >= {"error", "blocked", "ok"}  # type: ignore[attr-defined]
    for record in records:
        assert one_line(record.getMessage()), record.getMessage()
        for field in ("what", "error", "reason", "payload", "run_id"):
            assert not hasattr(record, field) or one_line(getattr(record, field)), (field, getattr(record, field))
        assert all(one_line(text) for text in getattr(record, "retries", []))
    failed = next(r for r in records if getattr(r, "error", None) and r.kind == "tool")  # type: ignore[attr-defined]
    assert failed.error == "ValueError: " + AWKWARD.encode("unicode_escape").decode()  # type: ignore[attr-defined]


async def test_an_escaped_text_keeps_its_backslashes_apart_from_its_escapes(records: list[logging.LogRecord]) -> None:
    """A literal backslash-n in an error reads `\\\\n`, a newline `\\n`: the two stay told apart."""
    agent = Agent(ScriptedModel([AuthenticationError("C:\\new\nline")])).use(log)
    with pytest.raises(AuthenticationError):
        await agent.run("hi")
    assert records[0].error == "AuthenticationError: C:\\\\new\\nline"  # type: ignore[attr-defined]


async def test_a_resumed_run_logs_that_it_resumed_its_run_id_and_the_decisions_not_its_input_or_history(
    records: list[logging.LogRecord],
) -> None:
    """The run record of a resume: `resumed <run id>: approved echo(call_1); rejected fails(call_2): <reason>`."""
    model = ScriptedModel([[call("echo", text="hi"), call("fails", text="x")], "done"])
    agent = Agent(model, tools=[echo, fails]).use(log(max_chars=None), approve(reason="a person must look"))
    paused = await agent.run("the original question")
    state = paused.to_state()
    first, second = paused.pending
    state.approve(first.id)
    state.reject(second.id, reason=f"not now {SECRET}")
    records.clear()
    result = await agent.resume(state)
    assert result.output == "done"
    (run_record,) = (r for r in records if r.kind == "run")  # type: ignore[attr-defined]
    payload = run_record.payload  # type: ignore[attr-defined]
    assert payload == (
        f"resumed {paused.run_id}: approved echo({first.id}); rejected fails({second.id}): not now [REDACTED] -> 'done'"
    )


class Crash(BaseException):
    """Stands in for the worker dying: nothing in the run catches it."""


async def test_a_recovered_run_logs_that_it_was_recovered_and_what_it_goes_on_with_not_its_history(
    records: list[logging.LogRecord],
) -> None:
    """`agent.recover(run_id)` gives its run the whole journaled history as input: the log says what it resumes."""

    async def crash(call_: ToolCall, call_next: Any) -> Any:
        await call_next(call_)
        raise Crash

    store = MemoryStore()
    worker = Agent(ScriptedModel([[call("echo", text="hi")]]), tools=[echo], store=store).use(crash)
    with pytest.raises(Crash):
        await worker.run("the original question")
    (stopped,) = await store.runs()
    records.clear()
    await Agent(ScriptedModel(["done"]), tools=[echo], store=store).use(log(max_chars=None)).recover(stopped.run_id)
    (run_record,) = (r for r in records if r.kind == "run")  # type: ignore[attr-defined]
    assert run_record.payload == f"recovered {stopped.run_id}: 1 call answered already, 0 to run -> 'done'"  # type: ignore[attr-defined]


async def test_log_with_a_stream_writes_each_record_there_as_one_line_without_any_logging_configuration(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """`log(stream=...)`: its own handler, one line per record (time, level, logger, message), nothing to the tree."""
    caplog.set_level(logging.DEBUG)
    stream = io.StringIO()
    await Agent(ScriptedModel([[call("echo", text="a\nb")], "done"]), tools=[echo]).use(log(stream=stream)).run("go")
    lines = stream.getvalue().splitlines()
    assert [line.split()[2:4] for line in lines] == [
        ["INFO", "onion"],
        ["INFO", "onion"],
        ["INFO", "onion"],
        ["INFO", "onion"],
        ["INFO", "onion"],
    ]
    assert [line.split()[4] for line in lines] == ["model", "tool", "tools", "model", "run"]
    assert caplog.records == []


def test_log_refuses_a_logger_object_together_with_a_stream() -> None:
    """A stream gets a logger of its own (named by `logger`): a `Logger` object with it is ambiguous."""
    with pytest.raises(TypeError, match="a Logger object and a stream"):
        log(logging.getLogger("mine"), stream=io.StringIO())
