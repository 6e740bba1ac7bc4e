"""A headless Chromium driven over the Chrome DevTools protocol, for the trace page tests.

Debian's `chromium` package is installed with apt-get when it is missing
(the tests are skipped, saying why, only where that is impossible). The
protocol client is a few methods over `websockets`' sync client.

Run as a script, it makes the picture of the demo's trace page in docs/:
`python tests/onion/tracing/conftest.py docs/tracing-page.png`.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

INSTALL = ["apt-get", "install", "-y", "-q", "chromium"]


def chromium_binary() -> str:
    """The path of a Chromium, installing Debian's package if none is found; raises RuntimeError saying why not."""
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    if shutil.which("apt-get") is None or os.geteuid() != 0:
        raise RuntimeError("chromium is not installed and apt-get cannot install it here (needs Debian and root)")
    environment = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for command in (["apt-get", "update", "-q"], INSTALL):
        done = subprocess.run(command, capture_output=True, text=True, env=environment, timeout=900)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} failed: {done.stderr.strip()[-300:]}")
    found = shutil.which("chromium")
    if found is None:
        raise RuntimeError("apt-get installed chromium but no `chromium` binary is on PATH")
    return found


class Page:
    """One browser tab: send protocol commands, read the events they cause."""

    def __init__(self, url: str) -> None:
        from websockets.sync.client import connect

        self._closing = contextlib.ExitStack()
        self._socket = self._closing.enter_context(connect(url, max_size=None, open_timeout=30))
        self._ids = itertools.count(1)
        self.events: list[dict[str, Any]] = []
        for domain in ("Page", "Runtime", "Log"):
            self.send(f"{domain}.enable")

    def send(self, method: str, **params: Any) -> dict[str, Any]:
        """Send a command and return its result; events arriving meanwhile go to `events`."""
        ident = next(self._ids)
        self._socket.send(json.dumps({"id": ident, "method": method, "params": params}))
        while True:
            message = json.loads(self._socket.recv(timeout=30))
            if message.get("id") == ident:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})  # type: ignore[no-any-return]
            self.events.append(message)

    def wait_for(self, event: str) -> dict[str, Any]:
        """The first event named `event` (one already received, or the next to arrive)."""
        while True:
            for message in self.events:
                if message.get("method") == event:
                    self.events.remove(message)
                    return message
            self.events.append(json.loads(self._socket.recv(timeout=30)))

    def open(self, url: str) -> None:
        self.send("Page.navigate", url=url)
        self.wait_for("Page.loadEventFired")

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page."""
        result = self.send("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression!r} threw {result['exceptionDetails']}")
        return result["result"].get("value")

    def click(self, selector: str) -> None:
        """A real mouse click (press and release) at the middle of the element `selector` finds."""
        box = self.evaluate(
            f"(() => {{ const r = document.querySelector({json.dumps(selector)}).getBoundingClientRect();"
            " return [r.x + r.width / 2, r.y + r.height / 2]; })()"
        )
        x, y = box
        for kind in ("mousePressed", "mouseReleased"):
            self.send("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=1)

    def errors(self) -> list[str]:
        """Console errors, uncaught exceptions and error log entries seen so far."""
        found = []
        for message in self.events:
            method, params = message.get("method"), message.get("params", {})
            if method == "Runtime.exceptionThrown":
                found.append(str(params["exceptionDetails"]))
            elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                found.append(str(params.get("args")))
            elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
                found.append(str(params["entry"]))
        return found

    def screenshot(self, path: Path) -> None:
        height = self.evaluate("Math.ceil(document.body.getBoundingClientRect().bottom) + 16")
        self.send(
            "Emulation.setDeviceMetricsOverride", width=1400, height=int(height), deviceScaleFactor=1, mobile=False
        )
        data = self.send("Page.captureScreenshot", format="png")["data"]
        path.write_bytes(base64.b64decode(data))

    def close(self) -> None:
        self._closing.close()


class Chromium:
    """A headless Chromium with its DevTools endpoint open on an ephemeral port."""

    def __init__(self, binary: str) -> None:
        self._profile = tempfile.mkdtemp(prefix="onion-chromium-")
        self._process = subprocess.Popen(
            [
                binary,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--remote-debugging-port=0",
                f"--user-data-dir={self._profile}",
                "--window-size=1400,1000",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        watchdog = threading.Timer(60, self._process.kill)  # a browser that never says where it listens
        watchdog.start()
        try:
            assert self._process.stderr is not None
            for line in self._process.stderr:
                if line.startswith("DevTools listening on "):
                    self._endpoint = line.split()[-1].split("/devtools/")[0].replace("ws://", "http://")
                    break
            else:
                raise RuntimeError(f"chromium exited ({self._process.wait()}) without opening its DevTools endpoint")
        finally:
            watchdog.cancel()
        threading.Thread(target=self._process.stderr.read, daemon=True).start()  # keep its pipe drained

    def page(self) -> Page:
        """The first tab, connected."""
        with urllib.request.urlopen(f"{self._endpoint}/json/list", timeout=30) as answer:
            targets = json.load(answer)
        tab = next(target for target in targets if target["type"] == "page")
        return Page(tab["webSocketDebuggerUrl"])

    def close(self) -> None:
        self._process.kill()
        self._process.wait()
        shutil.rmtree(self._profile, ignore_errors=True)


@pytest.fixture(scope="session")
def chromium() -> Iterator[Chromium]:
    try:
        binary = chromium_binary()
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as error:
        pytest.skip(f"no headless Chromium for the trace page tests: {error}")
    browser = Chromium(binary)
    yield browser
    browser.close()


@pytest.fixture
def page(chromium: Chromium) -> Iterator[Page]:
    tab = chromium.page()
    yield tab
    tab.close()


def make_picture(target: Path) -> None:
    """The demo's trace page, with model call 1 and the blocked tool call expanded, as a PNG at `target`."""
    from onion._demo import main

    with tempfile.TemporaryDirectory() as directory:
        html = Path(directory) / "trace.html"
        asyncio.run(main(out=lambda line: None, html=html))
        browser = Chromium(chromium_binary())
        try:
            tab = browser.page()
            tab.open(html.as_uri())
            tab.evaluate("document.querySelectorAll('.run')[1].remove()")
            tab.click('.call[data-kind="model"] .label')
            tab.evaluate(
                "[...document.querySelectorAll('.call[data-kind=tool]')]"
                ".find(row => row.textContent.includes('delete_files')).querySelector('.label').click()"
            )
            tab.screenshot(target)
            tab.close()
        finally:
            browser.close()


if __name__ == "__main__":
    make_picture(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/tracing-page.png"))
