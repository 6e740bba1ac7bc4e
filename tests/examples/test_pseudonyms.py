"""examples/pseudonyms.py runs offline and keeps the address from the model only."""

from __future__ import annotations

import os
import runpy
from pathlib import Path

from forker import Forker

EXAMPLE = Path(__file__).parents[2] / "examples" / "pseudonyms.py"


async def test_the_model_sees_placeholders_and_the_tool_and_reader_the_real_values() -> None:
    shown, sent, mailbox = await runpy.run_path(str(EXAMPLE), run_name="example_pseudonyms")["main"]()
    assert shown == "I wrote to ana.silva@example.com about the order on card 4111 1111 1111 1111."
    assert sent[0] == "Mail <EMAIL_1> about the order paid with <CARD_1>."
    assert not any("ana.silva" in text or "4111" in text for text in sent)
    assert mailbox == ["ana.silva@example.com"]


def test_the_example_runs_as_a_script(forker: Forker) -> None:
    root = str(EXAMPLE.parents[1])  # this checkout's onion and middleware, not an installed copy
    env = {**os.environ, "PYTHONPATH": root}
    done = forker.run(str(EXAMPLE), timeout=60, env=env)
    assert done.returncode == 0 and "ana.silva@example.com" in done.stdout, done.stderr
