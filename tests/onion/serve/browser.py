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
        box = await self.middle(selector)
        for kind in ("mousePressed", "mouseReleased"):
            await self.send("Input.dispatchMouseEvent", type=kind, x=box[0], y=box[1], button="left", clickCount=1)

    async def double_click(self, selector: str, gap: float = 0.25) -> None:
        """A double click (two presses `gap` seconds apart, the second with `clickCount` 2), as a person's: the
        second press comes once the first one's effect (a form submitted) is under way."""
        box = await self.middle(selector)
        for count in (1, 2):
            if count == 2:
                await asyncio.sleep(gap)
            for kind in ("mousePressed", "mouseReleased"):
                await self.send(
                    "Input.dispatchMouseEvent", type=kind, x=box[0], y=box[1], button="left", clickCount=count
                )

    async def middle(self, selector: str) -> list[float]:
        found = json.dumps(selector)
        box = await self.evaluate(
            f"(() => {{ const e = document.querySelector({found}); if (!e) return null; e.scrollIntoView();"
            " const r = e.getClientRects()[0] || e.getBoundingClientRect();"  # a link over two lines: its first
            " return [r.x + r.width / 2, r.y + r.height / 2]; })()"
        )
        if box is None:
            raise LookupError(f"no element {selector!r} on the page: {await self.evaluate('document.body.innerText')}")
        return list(box)

    async def slow_network(self, latency_ms: float) -> None:
        """Every answer from now on arrives `latency_ms` later (0: as fast as it comes), as on a slow network."""
        await self.send("Network.enable")
        await self.send(
            "Network.emulateNetworkConditions",
            offline=False,
            latency=latency_ms,
            downloadThroughput=-1,
            uploadThroughput=-1,
        )

    async def press(self, key: str, code: int, shift: bool = False) -> None:
        """A key pressed and released (`Tab`, 9): a real key event, as the keyboard sends it."""
        modifiers = 8 if shift else 0
        for kind in ("rawKeyDown", "keyUp"):
            await self.send(
                "Input.dispatchKeyEvent", type=kind, key=key, code=key, windowsVirtualKeyCode=code, modifiers=modifiers
            )

    async def viewport(self, width: int, height: int, *, mobile: bool = False) -> None:
        """Show the page as a screen `width` x `height` CSS pixels wide (`mobile`: a phone's, with its viewport)."""
        await self.send(
            "Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=mobile
        )

    async def unnamed_controls(self) -> list[str]:
        """The controls (buttons, fields, choices, links) without an accessible name, as Chromium computes
        names for assistive technology (`Accessibility.getFullAXTree`): each as `role (its DOM id)`."""
        roles = {"button", "textbox", "radio", "checkbox", "combobox", "link", "searchbox", "spinbutton", "listbox"}
        tree = await self.send("Accessibility.getFullAXTree")
        missing = []
        for node in tree["nodes"]:
            role = node.get("role", {}).get("value")
            if role in roles and not node.get("ignored") and not str(node.get("name", {}).get("value", "")).strip():
                missing.append(f"{role} (node {node.get('backendDOMNodeId')})")
        return missing

    async def type(self, text: str) -> None:
        await self.send("Input.insertText", text=text)

    async def text(self, selector: str) -> str | None:
        return await self.evaluate(f"document.querySelector({json.dumps(selector)})?.textContent ?? null")  # type: ignore[no-any-return]

    async def screenshot(self, path: Path, selector: str | None = None) -> None:
        """The whole page as a PNG at `path`, or only the element `selector` (and a margin of 8 pixels)."""
        clip: dict[str, Any] = {}
        if selector is not None:
            box = await self.evaluate(
                f"(() => {{ const r = document.querySelector({json.dumps(selector)}).getBoundingClientRect();"
                " return [r.x + scrollX, r.y + scrollY, r.width, r.height]; })()"
            )
            x, y = max(0, box[0] - 8), max(0, box[1] - 8)
            clip = {"clip": {"x": x, "y": y, "width": box[2] + 16, "height": box[3] + 16, "scale": 1}}
        shot = await self.send("Page.captureScreenshot", format="png", captureBeyondViewport=True, **clip)
        path.write_bytes(base64.b64decode(shot["data"]))
