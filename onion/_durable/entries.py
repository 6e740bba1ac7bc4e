"""The journal's entries, as JSON text (`onion._durable.journal` writes them, `onion._durable.replay` reads them back).

Entries are JSON objects, one per store row. Each begins with its chain fields (`onion._durable.chain`):
`p`, the SHA-256 of the entry before it (the first entry's, of the run's id); `n`, its index; `m`, with
the agent's `state_key`, on the last entry of each write: its HMAC. Then its own fields, by kind `k`:

- `start`: the first messages, `run.state`, the agent's name, the session (if any), the run's
  principal, `run.private` and the decisions on record so far (each when there is one);
- `model`: one model response, with the messages appended to the history
  since the previous entry (or the whole history, `reset`, when a layer
  replaced it), the usage and `run.state` after it (and `run.private`, once a layer used it);
- `tool`: a tool call about to run (written before the tool runs; its
  arguments are those of the response's request, in the history);
- `result`: what a tool call answered (after its whole tool stack), `untrusted` when it is outside content;
- `decided`: a paused call a person approved (`args`: their edit, or null),
  so a crash later runs it as they decided, without asking again; for a
  paused model call or run, `kind` (`"model"`, `"run"`) and `rejected` (the
  reason, or null when approved);
- `decision`: a `DecisionRecord` (who decided a paused call, when, and what), written with the batch
  it decided, before any of its calls runs;
- `end`: the run let go of (`status`: `"paused"`, `"completed"`, `"failed"`, a failed one with `error`, what it
  failed with), written with its release, so a journal whose last entries were removed shows.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from .._content import part_dict
from .._results import ToolResult
from ..errors import OnionError

if TYPE_CHECKING:
    from .._run import Run


def _compact_encoder() -> Callable[[Any, int], Sequence[str]]:
    """The C encoder that `json.dumps(separators=(",", ":"), ensure_ascii=False)` builds on every call, built once.

    It does not track the containers it is inside: a value that contains
    itself raises `RecursionError` instead of `ValueError`.
    """
    encoder = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)
    make: Any = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # no C accelerator: the pure-Python encoder, whole
        return lambda value, _: (encoder.encode(value),)
    chunks: Callable[[Any, int], Sequence[str]] = make(
        None, encoder.default, json.encoder.encode_basestring, None, ":", ",", False, False, True
    )
    return chunks


_chunks = _compact_encoder()
json_string: Callable[[str], str] = json.encoder.encode_basestring
"""A str as the compact encoder writes it (quoted, non-ASCII kept)."""


def dumps(entry: dict[str, Any]) -> str:
    """`entry` as compact JSON text."""
    return "".join(_chunks(entry, 0))


def result_entry(call_id: str, result: ToolResult) -> str:
    """A `result` entry; `"untrusted":true` is added for outside content (`ToolResult.untrusted`)."""
    content = result.content
    if type(content) is str:  # what _dumps writes, without building the dict
        error = "true" if result.is_error else "false"
        label = ',"untrusted":true' if result.untrusted else ""
        return f'{{"k":"result","id":{json_string(call_id)},"content":{json_string(content)},"error":{error}{label}}}'
    entry = {"k": "result", "id": call_id, "content": [part_dict(part) for part in content], "error": result.is_error}
    if result.untrusted:
        entry["untrusted"] = True
    return dumps(entry)


def end_entry(status: str, error: str | None = None) -> str:
    """The entry that ends a run's journal when the run is let go of as `status` (it may go on later); a failed
    run's says what it failed with (`failure_text`)."""
    why = "" if error is None else f',"error":{json_string(error)}'
    return f'{{"k":"end","status":{json_string(status)}{why}}}'


def failure_text(error: BaseException, limit: int = 500) -> str:
    """What a failed run's end entry says it failed with: the error's type and message, secrets scrubbed."""
    from ..scrub import scrub

    if isinstance(error, asyncio.CancelledError):
        return "cancelled"
    text = scrub(f"{type(error).__name__}: {error}")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def failure_of(entries: list[str]) -> str | None:
    """What a run's journal says its last failure was, when the journal ends with one (else None)."""
    last = json.loads(entries[-1]) if entries else {}
    error = last.get("error") if last.get("k") == "end" and last.get("status") == "failed" else None
    return error if isinstance(error, str) else None


def encode(entry: dict[str, Any], run: Run) -> str:
    """`entry` as JSON text; a `run.state` that JSON cannot hold is refused, naming the key."""
    try:
        return dumps(entry)
    except (TypeError, ValueError, RecursionError) as error:
        for key, value in run.state.items():
            try:
                json.dumps(value)
            except (TypeError, ValueError):
                raise OnionError(
                    f"run.state[{key!r}] ({type(value).__name__}) is not JSON-serialisable: a run on an agent "
                    "with a store keeps run.state in the store; keep only JSON values there"
                ) from error
        raise OnionError(f"a journal entry is not JSON-serialisable ({error})") from error
