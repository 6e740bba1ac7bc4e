"""`python -m onion demo` runs offline and shows what the layers did."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from onion import check_history
from onion._demo import main


async def test_demo_runs_twice_and_the_second_run_is_served_from_the_cache() -> None:
    lines: list[str] = []
    first, second = await main(out=lines.append)
    assert first.usage.requests == 3 and first.usage.input_tokens == 590
    assert second.usage.requests == 0 and second.usage.total_tokens == 0
    assert second.output == first.output == "Paris is warmer: 64.4°F against 39.2°F in Oslo."
    text = "\n".join(lines)
    assert "served from the cache" in text
    assert "retried 1x after RateLimitedError, waited 0.05 s" in text
    assert "delete_files was blocked" in text and "before_each_tool(no_deletes)" in text
    assert "│  └─ cache" in text and "  hit" in text
    for result in (first, second):
        check_history(result.messages)


def test_python_m_onion_demo_prints_a_run_and_writes_the_trace_page_with_html(tmp_path: Path) -> None:
    """`python -m onion demo --html trace.html` prints both runs' trees and writes one page with both runs."""
    page = tmp_path / "trace.html"
    done = subprocess.run(
        [sys.executable, "-m", "onion", "demo", "--html", str(page)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "== run 2" in done.stdout and "model:  log -> rate_limit -> cache -> retry" in done.stdout
    assert f"the trace page: {page}" in done.stdout
    assert page.read_text().count('<section class="run">') == 2
