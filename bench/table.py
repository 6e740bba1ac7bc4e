"""The one table `python -m bench` prints: a row per figure, with its baseline and ratio."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Row:
    """One figure: `value` against `baseline` (same unit), within `bar` times it at most.

    A row with `skipped` set carries no figure, only the reason.
    """

    section: str
    name: str
    value: float = 0.0
    unit: str = ""
    baseline: float | None = None
    baseline_name: str = ""
    bar: float | None = None
    skipped: str = ""
    aim: float | None = None
    """The ratio issue 23 aims at: at most `aim`, or at least `-aim` when negative (a rate: higher is better)."""

    @property
    def ratio(self) -> float | None:
        if self.baseline is None or self.baseline <= 0 or self.skipped:
            return None
        return self.value / self.baseline

    @property
    def verdict(self) -> str:
        ratio = self.ratio
        if self.bar is None or ratio is None:
            return ""
        return f"<= {self.bar:g}x {'ok' if ratio <= self.bar else 'OVER'}"

    @property
    def aim_verdict(self) -> str:
        ratio = self.ratio
        if self.aim is None or ratio is None:
            return ""
        if self.aim < 0:
            return f"{'met' if ratio >= -self.aim else 'SHORT'}: >= {-self.aim:g}x"
        return f"{'met' if ratio <= self.aim else 'SHORT'}: <= {self.aim:g}x"


def figure(value: float, unit: str) -> str:
    """`value` in `unit`, with as many digits as it deserves."""
    if unit == "MB":
        return f"{value:,.1f} {unit}"
    digits = 2 if abs(value) < 10 else 1 if abs(value) < 100 else 0
    return f"{value:,.{digits}f} {unit}"


def render(rows: Iterable[Row]) -> str:
    """The rows as an aligned text table, sections in the order they come."""
    header = ("section", "benchmark", "measured", "baseline", "ratio", "bar", "aim")
    lines: list[tuple[str, ...]] = [header]
    for row in rows:
        if row.skipped:
            lines.append((row.section, row.name, "skipped", row.skipped, "", "", ""))
            continue
        baseline = "" if row.baseline is None else f"{figure(row.baseline, row.unit)} {row.baseline_name}".rstrip()
        ratio = "n/a" if row.ratio is None else f"{row.ratio:.2f}x"
        measured = figure(row.value, row.unit)
        lines.append((row.section, row.name, measured, baseline, ratio, row.verdict, row.aim_verdict))
    widths = [max(len(line[i]) for line in lines if i < 2 or line[2] != "skipped") for i in range(len(header))]
    out = []
    for index, line in enumerate(lines):
        if line[2] == "skipped":
            out.append(f"{line[0]:<{widths[0]}}  {line[1]:<{widths[1]}}  skipped: {line[3]}")
        else:
            cells = [
                f"{cell:<{w}}" if i < 2 else f"{cell:>{w}}"
                for i, (cell, w) in enumerate(zip(line, widths, strict=True))
            ]
            out.append("  ".join(cells).rstrip())
        if index == 0:
            out.append("  ".join("-" * w for w in widths))
    return "\n".join(out)
