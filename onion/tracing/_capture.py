"""`capture()`: an in-process record of the runs started inside a `with` block, no OpenTelemetry needed."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from contextvars import Token
from pathlib import Path
from types import TracebackType

from . import _chains
from ._spans import Span, capturing
from ._tree import tree

MAX_RUNS = 1_000
"""How many runs a `capture()` keeps by default: the last 1,000 (a few KB each, more with long messages)."""


class Trace:
    """The runs `capture()` recorded: `runs` holds one `Span` tree per run, in the order they started.

    Only the last `max_runs` are kept (all of them with None): older runs are
    let go as new ones start.

    `print(trace)` draws each run as a tree (calls, their layers and each
    layer's own time); `trace.to_html(path)` writes one self-contained page
    with a timeline of them.
    """

    def __init__(self, max_runs: int | None = MAX_RUNS) -> None:
        if max_runs is not None and max_runs < 1:
            raise ValueError(f"capture(max_runs={max_runs!r}): keep at least one run, or None for all")
        self.runs: deque[Span] = deque(maxlen=max_runs)
        self._token: Token[deque[Span] | None] | None = None

    def __enter__(self) -> Trace:
        if self._token is not None:
            raise RuntimeError("this capture is already recording: start another with tracing.capture()")
        self._token = capturing.set(self.runs)
        _chains.count_capture(+1)
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        assert self._token is not None
        capturing.reset(self._token)
        self._token = None
        _chains.count_capture(-1)

    def to_html(self, path: str | Path) -> Path:
        """Write the page showing every captured run as a timeline; returns its path.

        One file, no network needed: styles and script are inside it. Each
        call is a bar; clicking it shows (or hides) its layers, each a bar
        inside it with its own time.
        """
        from ._html import page

        target = Path(path)
        target.write_text(page(list(self.runs)), encoding="utf-8")
        return target

    def __iter__(self) -> Iterator[Span]:
        return iter(self.runs)

    def __len__(self) -> int:
        return len(self.runs)

    def __str__(self) -> str:
        return "\n\n".join(tree(run) for run in self.runs) if self.runs else "(no runs captured)"

    def __repr__(self) -> str:
        return f"<Trace runs={len(self.runs)}>"


def capture(*, max_runs: int | None = MAX_RUNS) -> Trace:
    """Record the runs started in this context while the `with` block runs: `with capture() as trace: ...`.

    Agents build their chains with tracing while any capture is open (and
    without it again after); runs started elsewhere meanwhile, in other
    tasks or threads, are not recorded. The trace keeps the last `max_runs`
    runs (default 1,000; None: every run, so memory grows with each).
    """
    return Trace(max_runs)
