"""Everything onion raises, and the control-flow signals it uses internally."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._messages import Message, Usage

__all__ = [
    "AuthenticationError",
    "BadRequestError",
    "BudgetExceeded",
    "ConnectionLostError",
    "ContextTooLongError",
    "LeaseLost",
    "MCPServerError",
    "MaxStepsExceeded",
    "MessageOrderError",
    "MiddlewareError",
    "ModelError",
    "ModelTimeoutError",
    "OnionError",
    "OutputValidationError",
    "OverloadedError",
    "RateLimitedError",
    "ResponseFormatError",
    "UnsupportedContent",
    "BatchDecided",
    "DecisionRefused",
    "ForeignRun",
    "RunBusy",
    "RunNotFound",
    "StoreUnavailable",
    "RunStateError",
    "ScriptExhausted",
    "ServerError",
    "ToolAborted",
    "ToolArgumentsError",
    "ToolLeftRunning",
    "ToolNameClash",
    "ToolThreadsExhausted",
]


class OnionError(Exception):
    """Base class of every error onion raises."""


class ModelError(OnionError):
    """A model call failed.

    `retryable` says whether trying the same request again may succeed;
    `retry_after` is the delay in seconds the provider asked for, if any.
    Provider SDK errors are mapped to the subclasses below, with the SDK's
    exception chained as `__cause__`.
    """

    retryable_default = False

    def __init__(
        self,
        message: str,
        *,
        retryable: bool | None = None,
        retry_after: float | None = None,
        status_code: int | None = None,
        provider: str | None = None,
    ) -> None:
        super().__init__(message)
        self.retryable = self.retryable_default if retryable is None else retryable
        self.retry_after = retry_after
        self.status_code = status_code
        self.provider = provider

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (type(self), self.args, self.__dict__))


def _rebuild(cls: type[ModelError], args: tuple[Any, ...], state: dict[str, Any]) -> ModelError:
    error = cls.__new__(cls)
    Exception.__init__(error, *args)
    error.__dict__.update(state)
    return error


class RateLimitedError(ModelError):
    """The provider said too many requests (HTTP 429)."""

    retryable_default = True


class OverloadedError(ModelError):
    """The provider is overloaded (Anthropic 529, or `overloaded_error` mid-stream)."""

    retryable_default = True


class ServerError(ModelError):
    """The provider failed (HTTP 5xx)."""

    retryable_default = True


class ModelTimeoutError(ModelError, TimeoutError):
    """The model did not answer in time."""

    retryable_default = True


class ConnectionLostError(ModelError):
    """The connection failed or dropped, possibly mid-stream."""

    retryable_default = True


class BadRequestError(ModelError):
    """The provider rejected the request as malformed (HTTP 400, 404, 422)."""


class UnsupportedContent(BadRequestError):
    """A message part the provider's API cannot carry (raised before the request; names the message and part)."""


class ContextTooLongError(BadRequestError):
    """The request does not fit the model's context window."""


class AuthenticationError(ModelError):
    """The API key is missing, wrong, or lacks permission (HTTP 401, 403)."""


class ResponseFormatError(ModelError):
    """The provider answered with something onion cannot read."""

    retryable_default = True


class ScriptExhausted(ModelError):
    """A scripted test model was asked for more responses than its script holds."""


class MessageOrderError(OnionError):
    """A history about to be sent breaks the tool-call/tool-result order.

    `index` is the position of the offending message in the request's
    messages.
    """

    def __init__(self, message: str, *, index: int) -> None:
        super().__init__(message)
        self.index = index


class MaxStepsExceeded(OnionError):
    """The run made `max_steps` model calls without reaching a final answer.

    `messages` is the history at the stop (every tool call answered);
    `usage` what the run consumed.
    """

    def __init__(self, message: str, *, messages: list[Message], usage: Usage) -> None:
        super().__init__(message)
        self.messages = messages
        self.usage = usage


class MiddlewareError(OnionError):
    """A layer broke the middleware contract; the message names the layer."""


class ToolArgumentsError(OnionError):
    """Arguments given to a tool do not fit its schema (raised by `Tool.validate`)."""


class RunBusy(OnionError):
    """Another worker holds the run (its lease is live), resumed it first, or it has ended.

    `run_id` is the run; `status` its status in the store when the claim failed.
    """

    def __init__(self, message: str, *, run_id: str, status: str | None = None) -> None:
        super().__init__(message)
        self.run_id = run_id
        self.status = status


class LeaseLost(RunBusy):
    """This worker lost its hold while the run went on: another worker took the run (or its session) over.

    Its lease on the run lapsed and another worker claimed the run (`session`
    is None): the run was stopped where it was, its model call and running
    tools cancelled, and nothing more of it recorded by this worker. Or the
    lock of its session `session` lapsed and another run on the session took
    it: the run's messages were not appended (the session keeps the other
    run's turn) and the run is failed in the journal.
    """

    def __init__(self, message: str, *, run_id: str, session: str | None = None, status: str | None = None) -> None:
        super().__init__(message, run_id=run_id, status=status)
        self.session = session


class RunNotFound(OnionError, KeyError):
    """The store holds no run with this id (never journaled there, or deleted)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class StoreUnavailable(OnionError):
    """The store could not be reached or written (Redis down or unreachable; an SQLite file locked past its
    busy timeout, full or read-only): the operation did not happen.

    A journal write that raises it left the journal as it was; the run fails
    and can be resumed (`agent.resume(run_id)`) once the store is back.
    """


class ToolAborted(OnionError):
    """A tool raised a `BaseException` that is not cancellation (`SystemExit`, `KeyboardInterrupt`, ...).

    It ends that call only (the model reads it as an error result), never
    the event loop or the other runs on it. The original is `__cause__`.
    Not retryable (`retryable` is false): `retry` runs the tool once.
    """

    retryable = False


class HookFailed(BaseException):
    """Carries the exception of a hook in a tool stack to where that stack ends (a control-flow signal).

    A guard hook (`before_each_tool`, `after_each_tool`, `on_error` on a
    tool call) that raises stops the run: as a `BaseException` this passes
    `retry` and `on_error` layers untouched (the tool is not run again, its
    failure is not reported to the model), and onion re-raises `error`, the
    hook's own exception, out of the tool stack. `hook` names the hook.
    """

    def __init__(self, hook: str, error: Exception) -> None:
        super().__init__(f"hook {hook} raised {type(error).__name__}: {error}")
        self.hook, self.error = hook, error


class ToolLeftRunning(OnionError):
    """A tool call was asked to run again while an earlier attempt of it was left running.

    onion stopped waiting for that attempt (a timeout, a cancelled batch)
    while its sync tool's thread ran; the tool may still complete, so onion
    never starts the same call again. Not retryable.
    """

    retryable = False


class ToolThreadsExhausted(OnionError):
    """A sync tool call could not start: `ToolThreads.max_abandoned` threads are left running.

    The message names the tools whose threads hang.
    """


class RunStateError(OnionError):
    """A run cannot be paused, saved, loaded or resumed as asked; the message says what to do.

    Raised for a state text that is corrupt, truncated or of an unknown
    version, a `run.state` that is not JSON-serialisable when the run pauses,
    a decision about a call that is not pending, and a resume that cannot go
    on (a completed run, undecided calls, tools the agent no longer has).
    """


class BatchDecided(RunStateError, RunBusy):
    """The paused batch a resume was given was decided and resumed already: nothing ran again.

    A `RunStateError` (as DESIGN says) and a `RunBusy` (as onion raised before
    for a run no longer paused), so code catching either keeps working.
    """

    def __init__(self, message: str, *, run_id: str, status: str | None = None) -> None:
        RunBusy.__init__(self, message, run_id=run_id, status=status)


class DecisionRefused(RunStateError):
    """Decisions that do not fit the paused run they are for; nothing was decided or ran.

    `why` names the check that refused them: `"not_paused"` (the run runs, failed or completed),
    `"not_pending"` (a call id the run does not wait on, or one decided already), `"undecided"` (a
    pending call left without a decision), `"conflict"` (one call approved, rejected or edited twice),
    `"not_editable"` (an edit of a paused model call or run, which has no arguments, or of a call that may have
    run), `"not_resolvable"` (a result given for a call that is not in doubt), `"invalid_edit"` (edited arguments
    the tool refuses), `"malformed"` (not a set of call ids, reasons and arguments).
    """

    def __init__(self, message: str, *, run_id: str, why: str) -> None:
        super().__init__(message)
        self.run_id = run_id
        self.why = why


class ForeignRun(RunStateError):
    """A run of another agent, or of another tenant than the principal asking: refused, as if it did not
    exist (over HTTP, 404). The message names nothing of the other tenant's run."""

    def __init__(self, message: str, *, run_id: str) -> None:
        super().__init__(message)
        self.run_id = run_id


class OutputValidationError(OnionError):
    """The final answer did not validate as the run's `output_type`, after every retry (`output_retries`).

    `errors` is pydantic's list of errors for the last answer (each a dict
    with `loc`, `msg`, `type`); `text` is that answer's text; `messages` the
    history (the feedback sent included).
    """

    def __init__(self, message: str, *, errors: list[Any], text: str, messages: list[Message]) -> None:
        super().__init__(message)
        self.errors = errors
        self.text = text
        self.messages = messages


class ToolNameClash(OnionError, ValueError):
    """Two tools offered to one model call share a name (an agent's own and an MCP server's, or two servers').

    The message names both; give an MCP server a `prefix=` to tell its tools apart.
    """


class MCPServerError(OnionError):
    """An MCP server could not be reached: it did not start, died, or answered a request with an error.

    Raised while listing its tools (the run stops: the server is part of the
    agent's configuration); from a tool call it travels up the tool stack and
    the model reads it as an error result. The message names the server.
    """


class CallRejected(OnionError):
    """A person rejected a paused model call or run (`state.reject(id, reason)`): the run ends, nothing is called.

    `reason` is the rejection's reason, `kind` what was paused (`"model"` or `"run"`). A rejected tool call
    does not raise: the model reads the reason as the call's error result.
    """

    def __init__(self, message: str, *, reason: str, kind: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.kind = kind


class BudgetExceeded(OnionError):
    """A run went over its `middleware.budget`, or a person rejected going on past its soft line.

    `usage` is the run's usage at the stop (the response that went over
    included), `cost` the run's own cost in USD so far (0 without `max_cost`, or
    when a person rejected the soft line). `scope` names whose allowance it was
    (`"run"`, `"tenant 'acme'"`, ...), `window` which one (`"day 2026-12-01"`,
    `"month 2026-12"`, `"the last 3600 s"`, or `"for ever"`), `spent` what that
    allowance had spent (USD, or tokens for a budget without `max_cost`); all
    three None where a person rejected the soft line (the reason they were
    shown names them). Never retried (`retryable` is false).
    """

    retryable = False

    def __init__(
        self,
        message: str,
        *,
        usage: Usage,
        cost: float = 0.0,
        scope: str | None = None,
        window: str | None = None,
        spent: float | None = None,
    ) -> None:
        super().__init__(message)
        self.usage, self.cost = usage, cost
        self.scope, self.window, self.spent = scope, window, spent
