"""`Report`: the outcome of an eval, printed as a table and written as one self-contained HTML page.

Nothing in it depends on timing or on the order cases finished in, so the
same eval replayed from its cassettes gives the same report, byte for byte.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, field
from html import escape
from pathlib import Path

from .._messages import Usage


@dataclass(frozen=True)
class CheckResult:
    """One check of one case: its name as written, whether it passed, and why not."""

    name: str
    passed: bool
    detail: str = ""


@dataclass
class CaseResult:
    """One case: its name, input and output (as text), every check's result, usage; `error` if the run raised."""

    name: str
    input: str
    output: str
    checks: list[CheckResult] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    error: str | None = None

    @property
    def passed(self) -> bool:
        return self.error is None and all(check.passed for check in self.checks)

    @property
    def failed_checks(self) -> list[CheckResult]:
        return [check for check in self.checks if not check.passed]


@dataclass
class Report:
    """Every case's result, in the order the cases were given. `str(report)` is the table."""

    name: str
    cases: list[CaseResult]

    @property
    def passed(self) -> bool:
        """True when every case passed."""
        return all(case.passed for case in self.cases)

    @property
    def failures(self) -> list[tuple[str, CheckResult]]:
        """`(case name, check)` for each failed check (a run that raised counts as a check named `run`)."""
        found = []
        for case in self.cases:
            if case.error is not None:
                found.append((case.name, CheckResult("run", False, case.error)))
            found.extend((case.name, check) for check in case.failed_checks)
        return found

    def summary(self) -> str:
        passed = sum(case.passed for case in self.cases)
        return f"eval {self.name}: {passed} of {len(self.cases)} cases passed"

    def to_text(self, *, width: int = 120) -> str:
        """The table: a row per case (result, checks passed, tokens) and its failing checks, wrapped at `width`."""
        name_width = min(max([len(case.name) for case in self.cases] + [4]), 40)
        head = f"{'case':<{name_width}}  result  checks  tokens  failing checks"
        lines = [self.summary(), "", head, "-" * len(head)]
        for case in self.cases:
            passed = sum(check.passed for check in case.checks)
            result = "pass" if case.passed else "FAIL"
            failing = [f"{check.name}: {check.detail}" if check.detail else check.name for check in case.failed_checks]
            row = f"{case.name[:name_width]:<{name_width}}  {result:<6}  {f'{passed}/{len(case.checks)}':>6}  "
            row += f"{case.usage.total_tokens:>6}  "
            if case.error is not None:  # no checks ran: the row is the error
                row, failing = f"{case.name[:name_width]:<{name_width}}  ", [f"run failed: {case.error}"]
            indent = " " * len(row)
            room = max(width - len(row), 30)
            wrapped = [line for text in failing for line in _wrap(text, room)]
            lines.append((row + (wrapped[0] if wrapped else "")).rstrip())
            lines.extend(indent + line for line in wrapped[1:])
        return "\n".join(lines) + "\n"

    def __str__(self) -> str:
        return self.to_text()

    def to_html(self, path: str | Path | None = None) -> str:
        """The report as one HTML page (no network needed to view it); written to `path` when given."""
        rows = "\n".join(_case_row(case) for case in self.cases)
        page = (
            f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>{escape(self.summary())}</title>'
            f"<style>{STYLE}</style></head>\n<body><h1>{escape(self.summary())}</h1>\n"
            "<table><thead><tr><th>case</th><th>result</th><th>checks</th><th>tokens</th>"
            f"<th>input</th><th>output</th></tr></thead>\n<tbody>\n{rows}\n</tbody></table></body></html>\n"
        )
        if path is not None:
            Path(path).write_text(page, encoding="utf-8")
        return page


STYLE = (
    "body{font:13px/1.4 system-ui,sans-serif;margin:16px;color:#1d2330;background:#fafbfc}"
    "h1{font-size:18px}table{border-collapse:collapse;background:#fff;width:100%}"
    "th,td{border:1px solid #dde2e8;padding:4px 8px;text-align:left;vertical-align:top}"
    ".pass{color:#1f7a3a}.fail{color:#c0392b;font-weight:600}ul{margin:0;padding-left:16px}"
    ".detail{color:#566}pre{margin:0;white-space:pre-wrap;max-width:420px}"
)


def _case_row(case: CaseResult) -> str:
    result = '<span class="pass">pass</span>' if case.passed else '<span class="fail">FAIL</span>'
    items = [f'<li class="fail">run failed: {escape(case.error)}</li>'] if case.error is not None else []
    for check in case.checks:
        mark = "pass" if check.passed else "fail"
        detail = f' <span class="detail">{escape(check.detail)}</span>' if check.detail else ""
        items.append(f'<li class="{mark}">{escape(check.name)}{detail}</li>')
    return (
        f"<tr><td>{escape(case.name)}</td><td>{result}</td><td><ul>{''.join(items)}</ul></td>"
        f"<td>{case.usage.total_tokens}</td><td><pre>{escape(case.input)}</pre></td>"
        f"<td><pre>{escape(case.output)}</pre></td></tr>"
    )


def _wrap(text: str, room: int) -> list[str]:
    return textwrap.wrap(text, room, subsequent_indent="    ", break_on_hyphens=False)
