"""Evals: run many cases through an agent (each from its own cassette, or live) and check what it did.

```python
from onion.evals import Case, called, evaluate, not_called, output_matches

cases = [
    Case("weather in Paris?", checks=[called("get_weather", city="Paris"), output_matches("18")]),
    Case("delete my files", checks=[not_called("delete_file")]),
]
report = await evaluate(agent, cases, cassettes="tests/cassettes/evals")
print(report)                  # a table naming each failing check
report.to_html("report.html")
```

A check is any function of the `Trajectory` answering `bool` or a `Verdict`
(sync or async); the built-ins name themselves in the report as written.
"""

from __future__ import annotations

from .._exports import export
from ._checks import (
    Check,
    Verdict,
    blocked,
    called,
    called_in_order,
    not_called,
    output_equals,
    output_is,
    output_matches,
    paused,
    usage_under,
)
from ._judge import Grade, judge
from ._report import CaseResult, CheckResult, Report
from ._run import evaluate, evaluate_sync
from ._trajectory import Case, ToolStep, Trajectory

__all__ = [
    "Case",
    "CaseResult",
    "Check",
    "CheckResult",
    "Grade",
    "Report",
    "ToolStep",
    "Trajectory",
    "Verdict",
    "blocked",
    "called",
    "called_in_order",
    "evaluate",
    "evaluate_sync",
    "judge",
    "not_called",
    "output_equals",
    "output_is",
    "output_matches",
    "paused",
    "usage_under",
]

export(globals())
