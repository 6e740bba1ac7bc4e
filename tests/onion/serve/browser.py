"""Headless Chromium driven over the DevTools protocol (websockets): navigate, click, type, read, screenshot.

Clicks and typing are real input events (`Input.dispatchMouseEvent`, `Input.insertText`) at the element's
place on the page, as a person's would be.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

import websockets

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"]


def chromium_binary() -> str | None:
    """Debian's `chromium`, installed with apt-get first when missing (as root); None when impossible."""
    found = shutil.which("chromium")
    if found is None and shutil.which("apt-get") and os.geteuid() == 0:
        subprocess.run(
            "apt-get update -q && apt-get install -y -q chromium", shell=True, capture_output=True, timeout=900
        )
        found = shutil.which("chromium")
    return found


class Browser:
    """One Chromium with a fresh profile in `folder`, and its first page."""

    def __init__(self, binary: str, folder: Path) -> None:
        self.folder = folder
        command = [binary, *FLAGS, f"--user-data-dir={folder}", "--remote-debugging-port=0", "about:blank"]
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self._ids = 0
        self._socket: Any = None

    async def __aenter__(self) -> Browser:
        active = self.folder / "DevToolsActivePort"
        deadline = time.monotonic() + 30
        while not active.exists() or not active.read_text().strip():
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise RuntimeError("chromium did not start its DevTools endpoint")
            await asyncio.sleep(0.05)
        port = active.read_text().split()[0]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list") as listed:
            page = next(t for t in json.load(listed) if t["type"] == "page")
        self._socket = await websockets.connect(page["webSocketDebuggerUrl"], max_size=None)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._socket.close()
        self.process.terminate()
        self.process.wait(10)

    async def send(self, method: str, **params: Any) -> dict[str, Any]:
        self._ids += 1
        asked = self._ids
        await self._socket.send(json.dumps({"id": asked, "method": method, "params": params}))
        while True:
            message = json.loads(await self._socket.recv())
            if message.get("id") == asked:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return dict(message.get("result", {}))

    async def evaluate(self, expression: str) -> Any:
        answer = await self.send("Runtime.evaluate", expression=expression, returnByValue=True)
        return answer["result"].get("value")

    async def open(self, url: str) -> None:
        await self.send("Page.navigate", url=url)
        await self.loaded(url)

    async def loaded(self, url: str | None = None) -> None:
        """Wait until the page (at `url`, when given) has loaded."""
        for _ in range(200):
            state = await self.evaluate("[document.readyState, location.href]")
            if state and state[0] == "complete" and (url is None or state[1].startswith(url)):
                return
            await asyncio.sleep(0.05)
        raise TimeoutError(f"the page did not load: {state}")

    async def click(self, selector: str) -> None:
        """A left click at the middle of the element `selector` (scrolled into view first)."""
        found = json.dumps(selector)
        box = await self.evaluate(
            f"(() => {{ const e = document.querySelector({found}); if (!e) return null; e.scrollIntoView();"
            " const r = e.getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; })()"
        )
        if box is None:
            raise LookupError(f"no element {selector!r} on the page: {await self.evaluate('document.body.innerText')}")
        for kind in ("mousePressed", "mouseReleased"):
            await self.send("Input.dispatchMouseEvent", type=kind, x=box[0], y=box[1], button="left", clickCount=1)

    async def type(self, text: str) -> None:
        await self.send("Input.insertText", text=text)

    async def text(self, selector: str) -> str | None:
        return await self.evaluate(f"document.querySelector({json.dumps(selector)})?.textContent ?? null")  # type: ignore[no-any-return]

    async def screenshot(self, path: Path) -> None:
        shot = await self.send("Page.captureScreenshot", format="png", captureBeyondViewport=True)
        path.write_bytes(base64.b64decode(shot["data"]))
