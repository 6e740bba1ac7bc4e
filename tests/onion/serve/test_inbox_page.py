"""The inbox page in headless Chromium, with real clicks: sign in, see the paused run, edit, approve, see it done."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest
from browser import Browser, chromium_binary
from live_server import TOKEN, Served

from onion import Message, ModelResponse, ToolRequest


@pytest.fixture(scope="module")
def chromium() -> str:
    """The chromium binary; the test is skipped (saying why) when it is missing and cannot be installed."""
    binary = chromium_binary()
    if binary is None:
        pytest.skip("chromium is not installed and cannot be (apt-get install -y chromium needs root)")
    return binary


async def test_a_person_signs_in_edits_a_paused_call_approves_it_and_sees_the_run_complete(
    serving: Callable[..., Served], chromium: str, tmp_path: Path
) -> None:
    """The whole inbox flow in a browser; the page after the decision is kept as tmp_path/inbox.png."""
    served = serving()
    asked = ModelResponse(Message.assistant("", [ToolRequest("toolu_p", "delete", {"path": "inbox.txt"})]))
    served.fake.script([asked])
    async with served.client() as client:
        run_id = (await client.post("/runs", json={"input": "tidy up"})).json()["run_id"]
    async with Browser(chromium, tmp_path / "profile") as browser:
        await browser.open(served.url + "/")
        assert await browser.text("h1") == "Sign in" and run_id not in str(await browser.text("body"))
        await browser.click("#token")
        await browser.type(TOKEN)
        await browser.click("#sign-in")
        await asyncio.sleep(0.2)
        await browser.loaded(served.url + "/")
        assert await browser.text(f"#run-{run_id} legend") == "tool call delete (toolu_p): deleting needs a person"
        assert await browser.evaluate(f"document.querySelector('#arg-{run_id}-toolu_p-path').value") == "inbox.txt"
        assert await browser.text(f"#run-{run_id} p b") == "Asked:"
        await browser.click(f"#edit-{run_id}-toolu_p")
        await browser.click(f"#arg-{run_id}-toolu_p-path")
        await browser.evaluate(f"document.querySelector('#arg-{run_id}-toolu_p-path').select()")
        await browser.type("edited-in-browser.txt")
        served.fake.script(["Deleted it, as edited."])
        await browser.click(f"#decide-{run_id}")
        for _ in range(100):  # the decision answers once the run is claimed; the run ends in the background
            if await browser.text(f"#row-{run_id} .status") == "completed":
                break
            await asyncio.sleep(0.1)
            await browser.open(served.url + "/")
        await browser.screenshot(tmp_path / "inbox.png")
        assert await browser.text(f"#row-{run_id} .status") == "completed"
        assert await browser.evaluate(f"document.querySelector('#run-{run_id}')") is None
    assert (tmp_path / "inbox.png").read_bytes().startswith(b"\x89PNG")
    assert served.effects_lines().count("delete edited-in-browser.txt") == 1
    assert "delete inbox.txt" not in served.effects_lines()
