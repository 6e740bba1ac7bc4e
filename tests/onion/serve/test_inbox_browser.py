"""The inbox page in headless Chromium, with real clicks and keys, against a real uvicorn on an SQLite store.

One browser and one server for the module (the tests run in order: each leaves no run waiting but the ones it
names). Each state's screenshot is kept in tests/artefacts/inbox/ (ignored by git); docs/images/ holds copies.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx2
import pytest
import pytest_asyncio
from browser import Browser, chromium_binary
from live_server import ROOT, TOKEN, free_port, start, stop

pytestmark = pytest.mark.asyncio(loop_scope="module")
SHOTS = ROOT / "tests" / "artefacts" / "inbox"
API_KEY = "sk-ant-api03-" + "q" * 40
"""The key inbox_agent.py's e-mails are sent with."""
PAUSED: list[str] = []
"""Every run the module's tests paused on the desk, once each: the webhook hears of each once."""


class Hook:
    """A local webhook: keeps each JSON message it is posted; `failing`: answers 500 after two seconds."""

    def __init__(self, failing: bool = False) -> None:
        self.heard: list[dict[str, Any]] = []
        heard = self.heard

        class Answer(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["content-length"]))
                if failing:
                    time.sleep(2)
                    self.send_response(500)
                else:
                    heard.append(json.loads(body))
                    self.send_response(200)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Answer)
        self.url = f"http://127.0.0.1:{self.server.server_port}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@dataclass
class Desk:
    """A uvicorn server of `inbox_agent:app`: its URL, its process, the file its tools write to, its store."""

    url: str
    process: Any
    effects: Path
    database: Path

    def done(self) -> list[dict[str, Any]]:
        """What the tools did, in order."""
        return [json.loads(line) for line in self.effects.read_text().splitlines()] if self.effects.exists() else []

    def client(self) -> httpx2.AsyncClient:
        return httpx2.AsyncClient(base_url=self.url, headers={"authorization": f"Bearer {TOKEN}"}, timeout=30)


def desk_at(folder: Path, notify: str = "", lease: str = "30") -> Desk:
    port = free_port()
    env = {"EFFECTS": str(folder / "effects"), "ONION_TEST_DB": str(folder / "onion.db"), "ONION_TEST_TOKEN": TOKEN}
    env.update(NOTIFY=notify, LEASE=lease)
    command = [sys.executable, "-m", "uvicorn", "inbox_agent:app", "--port", str(port), "--log-level", "warning"]
    return Desk(f"http://127.0.0.1:{port}", start(command, env, port), folder / "effects", folder / "onion.db")


@pytest.fixture(scope="module")
def chromium() -> str:
    binary = chromium_binary()
    if binary is None:
        pytest.skip("chromium is not installed and cannot be (apt-get install -y chromium needs root)")
    return binary


@pytest.fixture(scope="module")
def hook() -> Iterator[Hook]:
    listening = Hook()
    yield listening
    listening.server.shutdown()


@pytest.fixture(scope="module")
def desk(tmp_path_factory: pytest.TempPathFactory, hook: Hook) -> Iterator[Desk]:
    served = desk_at(tmp_path_factory.mktemp("desk"), notify=hook.url)
    yield served
    stop(served.process)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def browser(chromium: str, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Browser]:
    SHOTS.mkdir(parents=True, exist_ok=True)
    async with Browser(chromium, tmp_path_factory.mktemp("profile")) as opened:
        await opened.viewport(1000, 800)
        yield opened


async def shot(browser: Browser, name: str, selector: str | None = None) -> None:
    """Keep the page (or the element `selector`) as tests/artefacts/inbox/`name`.png."""
    await browser.screenshot(SHOTS / f"{name}.png", selector)


async def until(browser: Browser, expression: str, seconds: float = 15.0) -> Any:
    """The first truthy value of `expression` in the page, polled (the page may be loading, or reload itself)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            value = await browser.evaluate(expression)
        except RuntimeError:  # the page navigated while evaluating
            value = None
        if value:
            return value
        await asyncio.sleep(0.1)
    raise AssertionError(f"{expression} never held; the page said: {await browser.evaluate('document.body.innerText')}")


async def paused(desk: Desk, question: str, **body: Any) -> dict[str, Any]:
    """Start a run over HTTP (as ana) that waits for a decision; its JSON answer."""
    async with desk.client() as client:
        answer = (await client.post("/runs", json={"input": question, **body})).json()
    assert answer["status"] == "paused", answer
    PAUSED.append(answer["run_id"])
    return answer


COMPLETED = "(t => t && t.includes('It completed') && t)(document.querySelector('#notice')?.textContent)"
"""The notice, once it says the run completed (the page reloads itself until then)."""


async def test_a_wrong_token_is_told_and_the_right_one_signs_in(desk: Desk, browser: Browser) -> None:
    """The sign-in form says a wrong token is wrong (nothing of the app shown), then signs in with the right one."""
    await browser.open(desk.url + "/")
    assert await browser.text("h1") == "Sign in"
    assert await browser.unnamed_controls() == []
    await browser.press("Tab", 9)  # the field has the focus already (autofocus): Tab goes on to the button
    assert await browser.evaluate("document.activeElement.id") == "sign-in"
    await browser.click("#token")
    await browser.type("not-the-token")
    await browser.click("#sign-in")
    said = await until(browser, "document.querySelector('#wrong')?.textContent")
    assert said == "That token is not one of this server's: try again."
    await shot(browser, "sign-in-wrong-token")
    await browser.click("#token")
    await browser.type(TOKEN)
    await browser.click("#sign-in")
    assert "waiting for a decision" in await until(browser, "document.querySelector('#waiting')?.textContent")
    assert await browser.text("h1") == "Runs of desk"


async def test_a_card_shows_its_context_and_one_call_of_a_batch_is_approved_the_other_rejected(
    desk: Desk, browser: Browser
) -> None:
    """The card shows the question, the earlier look-up's result (opened with a click), the tools' descriptions and
    the real recipient, the key as its size only; approving the refund and rejecting the e-mail (with a reason)
    runs the refund alone, and the page says what it returned and, once the run ends, its answer."""
    run = await paused(desk, "refund order 7 for Ada")
    run_id = run["run_id"]
    mail, refund = (f"{run_id}-{call['id']}" for call in run["pending"])
    await browser.open(desk.url + "/")
    card = f"#run-{run_id}"
    assert "Asked: refund order 7 for Ada" in str(await browser.text(card))
    await browser.click(f"{card} details summary")
    assert await browser.evaluate(f"document.querySelector('{card} details').open")
    history = await browser.evaluate(f"document.querySelector('{card} details').innerText")
    assert "Ada Lovelace <ada@example.com>" in history
    assert await browser.text(f"#about-{mail}") == "Send an e-mail to a customer from our account."
    assert await browser.text(f"#about-{refund}") == "Refund an order to the customer's card."
    assert await browser.evaluate(f"document.querySelector('#arg-{mail}-to').value") == "exfil@attacker.example"
    body = await browser.evaluate(f"document.querySelector('#arg-{mail}-body').value")
    assert body == "Dear Ada,\nyour refund of order 7\nis on its way."
    assert await browser.text(f"#arg-{mail}-api_key-secret") == f"a secret, {len(API_KEY)} characters"
    html = await browser.evaluate("document.documentElement.outerHTML")
    assert API_KEY not in html and "[REDACTED]" not in html
    assert await browser.evaluate("document.querySelectorAll('input:checked').length") == 0
    await shot(browser, "card")

    await browser.click(f"#approve-{refund}")
    await browser.click(f"#reject-{mail}")
    await browser.click(f"#reason-{mail}")
    await browser.type("not this address")
    await shot(browser, "card-chosen")
    await shot(browser, "docs-card", card)
    await browser.click(f"#decide-{run_id}")
    said = await until(browser, COMPLETED)
    assert f"{run['pending'][1]['id']} returned 'refunded 30.00 EUR on order 7'" in said
    assert "It completed: Done: " in said and "refunded 30.00 EUR on order 7" in said.partition("It completed")[2]
    await shot(browser, "decided")
    await shot(browser, "docs-decided", "#notice")
    assert [effect["tool"] for effect in desk.done()] == ["refund"]


async def test_an_edit_of_one_field_keeps_the_real_secret(desk: Desk, browser: Browser) -> None:
    """Changing the recipient of an e-mail that holds an API key (left as "unchanged"): the tool gets the edited
    recipient, the real key and the body as it was."""
    run = await paused(desk, "mail Ada")
    run_id = run["run_id"]
    mail = f"{run_id}-{run['pending'][0]['id']}"
    await browser.open(desk.url + "/")
    await browser.click(f"#edit-{mail}")
    await browser.click(f"#arg-{mail}-to")
    await browser.evaluate(f"document.querySelector('#arg-{mail}-to').select()")
    await browser.type("ada@example.com")
    assert await browser.evaluate(f"document.querySelector('#arg-{mail}-api_key').placeholder") == "unchanged"
    await shot(browser, "edit")
    await browser.click(f"#decide-{run_id}")
    await until(browser, COMPLETED)
    sent = [effect for effect in desk.done() if effect["tool"] == "send_email"]
    assert sent == [{"tool": "send_email", "to": "ada@example.com", "body": "Hello Ada", "api_key": API_KEY}]


async def test_a_double_click_on_decide_runs_the_tool_once_and_says_it_was_already_decided(
    desk: Desk, browser: Browser
) -> None:
    """A double click on a slow network submits the form twice: one claims the run, the other is told who decided it
    and when (the page the person sees); the tool ran once."""
    run = await paused(desk, "delete twice.txt")
    run_id = run["run_id"]
    await browser.open(desk.url + "/")
    await browser.click(f"#approve-{run_id}-{run['pending'][0]['id']}")
    await browser.slow_network(600)  # the answer to the first click is still on its way at the second
    try:
        await browser.double_click(f"#decide-{run_id}", gap=0.2)
        said = await until(browser, "document.querySelector('#notice')?.textContent")
    finally:
        await browser.slow_network(0)
    assert said.startswith(f"Run {run_id} was already decided by ana at 20"), said
    assert "nothing ran twice" in said and await browser.text("h1") == "Already decided"
    await shot(browser, "already-decided")
    await shot(browser, "docs-already-decided", "#notice")
    await browser.click("a[href='/']")
    await until(browser, f"document.querySelector('#row-{run_id} .status')?.textContent === 'completed'")
    assert [effect for effect in desk.done() if effect["tool"] == "delete"] == [{"tool": "delete", "path": "twice.txt"}]


async def test_a_runs_trace_link_opens_its_trace_and_its_script_runs(desk: Desk, browser: Browser) -> None:
    """The row's trace link opens onion's trace page of the run (both its passes: to the pause, after the
    decision); its script runs under the page's policy (showing every layer), and the key is not in it."""
    async with desk.client() as client:
        refund_run = next(r for r in (await client.get("/runs")).json()["runs"] if r["run_id"] == PAUSED[0])
    await browser.open(desk.url + "/")
    await browser.click(f"#row-trace-{refund_run['run_id']}")
    await until(browser, "document.title === 'onion trace'")
    assert await browser.evaluate("document.querySelectorAll('section.run').length") == 2
    text = await browser.evaluate("document.body.innerText")
    assert "tool find_customer(name='Ada')" in text and "tool refund(order=7, amount=30.0)" in text
    assert API_KEY not in await browser.evaluate("document.documentElement.outerHTML")
    assert await browser.evaluate("document.querySelectorAll('.layer:not([hidden])').length") == 0
    await browser.click("#expand-all")
    assert await until(browser, "document.querySelectorAll('.layer:not([hidden])').length")
    await shot(browser, "trace")


async def test_every_control_is_named_and_reached_with_tab_and_the_page_fits_a_phone(
    desk: Desk, browser: Browser
) -> None:
    """On a page with a card, the filters and the runs: every control has an accessible name (as Chromium gives
    assistive technology), Tab alone reaches each one (a group of radios once, as browsers do), and on a phone's
    screen nothing is wider than the screen."""
    run = await paused(desk, "refund order 8 for Bob")
    await browser.open(desk.url + "/")
    assert await browser.unnamed_controls() == []
    controls = await browser.evaluate(
        "(() => { const all = [...document.querySelectorAll('a[href], button, input:not([type=hidden]), select,"
        " textarea')]; all.forEach((e, i) => e.dataset.n = i); return all.map(e => e.type === 'radio' ?"
        " 'radio:' + e.name : 'n:' + e.dataset.n); })()"
    )
    reached = set()
    for _ in range(len(controls) + 5):
        await browser.press("Tab", 9)
        focused = await browser.evaluate(
            "(e => e && e.dataset.n !== undefined ? (e.type === 'radio' ? 'radio:' + e.name : 'n:' + e.dataset.n)"
            " : null)(document.activeElement)"
        )
        reached.add(focused)
    assert set(controls) - reached == set()
    await browser.viewport(390, 844, mobile=True)
    await browser.open(desk.url + "/")
    assert await browser.evaluate("document.documentElement.scrollWidth") <= 390
    await shot(browser, "phone")
    await shot(browser, "docs-phone", "form.paused fieldset")
    await browser.viewport(1000, 800)
    await browser.open(desk.url + "/")
    await browser.click(f"#reject-all-{run['run_id']}")
    await until(browser, COMPLETED)


async def test_the_filter_form_narrows_the_page(desk: Desk, browser: Browser) -> None:
    """Typing a session into the filter form and pressing Filter shows that session's waiting run only, with the
    count of how many wait in all; Clear the filters shows every run again."""
    other = await paused(desk, "delete other.txt")
    mine = await paused(desk, "delete mine.txt", session="desk-7")
    await browser.open(desk.url + "/")
    await browser.click("#filter-session")
    await browser.type("desk-7")
    await browser.click("#filter")
    await until(browser, "location.search.includes('session=desk-7') && document.readyState === 'complete'")
    cards = await browser.evaluate("[...document.querySelectorAll('form.paused')].map(f => f.id)")
    assert cards == [f"run-{mine['run_id']}"]
    assert await browser.text("#waiting") == "1 run waiting for a decision (of 2 in all)"
    await shot(browser, "filtered")
    await browser.click("#clear-filters")
    await until(browser, f"!!document.querySelector('#run-{other['run_id']}')")
    for run in (other, mine):
        await browser.click(f"#reject-all-{run['run_id']}")
        await until(browser, COMPLETED)
        await browser.open(desk.url + "/")


async def test_150_waiting_runs_are_all_reached_by_clicking_through_the_pages(desk: Desk, browser: Browser) -> None:
    """150 paused runs: 20 cards a page, oldest first; clicking each page's link reaches every one of them once."""
    started: list[str] = []
    for chunk in range(10):
        answers = await asyncio.gather(*(paused(desk, f"delete bulk-{chunk * 15 + n}.txt") for n in range(15)))
        started += [answer["run_id"] for answer in answers]
    await browser.open(desk.url + "/")
    assert await browser.text("#waiting") == "150 runs waiting for a decision"
    assert await browser.evaluate("document.title") == "(150) Runs"
    found: list[str] = []
    for number in range(1, 9):
        if number > 1:
            await browser.click(f"#page-{number}")
            await until(browser, f"document.querySelector('[aria-current=page]')?.id === 'page-{number}'")
        found += await browser.evaluate("[...document.querySelectorAll('form.paused')].map(f => f.id.slice(4))")
    await shot(browser, "page-8")
    assert len(found) == 150 and set(found) == set(started)
    async with desk.client() as client:
        records = (await client.get("/runs", params={"status": "paused", "limit": 1000})).json()["runs"]
    assert found == [r["run_id"] for r in sorted(records, key=lambda r: r["created"])]


async def test_the_page_shows_a_new_waiting_run_by_itself_and_holds_still_once_a_person_chooses(
    desk: Desk, browser: Browser
) -> None:
    """Left alone, the page reloads itself (every 10 s) and shows a run that started waiting meanwhile; once the
    person has chosen something it stays as it is, their choice kept."""
    await browser.open(desk.url + "/?status=paused&session=desk-8")
    await browser.evaluate("window.loadedOnce = true")
    run = await paused(desk, "delete late.txt", session="desk-8")
    await until(browser, f"!window.loadedOnce && !!document.querySelector('#run-{run['run_id']}')", seconds=15)
    await browser.click(f"#reject-{run['run_id']}-{run['pending'][0]['id']}")
    await browser.evaluate("window.loadedOnce = true")
    await asyncio.sleep(11)
    assert await browser.evaluate("window.loadedOnce === true && document.querySelector('input:checked').value")
    await browser.click(f"#decide-{run['run_id']}")
    await until(browser, COMPLETED)


async def test_the_webhook_heard_of_each_pause_once(desk: Desk, hook: Hook) -> None:
    """Every run the module paused was posted to the webhook once, with the link to its card."""
    deadline = time.monotonic() + 20
    while len(hook.heard) < len(PAUSED) and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    assert Counter(message["run_id"] for message in hook.heard) == Counter(PAUSED)
    first = next(m for m in hook.heard if m["run_id"] == PAUSED[0])
    assert f"Decide at https://desk.example.com/#run-{PAUSED[0]}" in first["text"] and API_KEY not in str(first)


async def test_signing_out_asks_for_the_token_again(desk: Desk, browser: Browser) -> None:
    """Sign out: the page asks for the token again and shows nothing of the runs."""
    await browser.open(desk.url + "/")
    await browser.click("#sign-out")
    await until(browser, "document.querySelector('h1')?.textContent === 'Sign in'")
    await browser.open(desk.url + "/")
    assert await browser.text("h1") == "Sign in" and PAUSED[0] not in str(await browser.text("body"))


async def test_a_run_whose_server_was_killed_is_resumed_from_its_resume_button(
    tmp_path: Path, browser: Browser
) -> None:
    """A server SIGKILLed while a tool runs: after a restart, once the dead worker's hold lapsed, the run shows
    "resumable" with a Resume button; a click goes on with it to its answer. A webhook that answers 500 after two
    seconds costs a pausing run nothing."""
    failing = Hook(failing=True)
    first = desk_at(tmp_path, notify=failing.url, lease="1")
    try:
        started = time.perf_counter()
        async with first.client() as client:
            answer = (await client.post("/runs", json={"input": "delete quick.txt"})).json()
        assert answer["status"] == "paused" and time.perf_counter() - started < 1.0
        async with (
            first.client() as client,
            client.stream(
                "POST", "/runs", json={"input": "wait 60"}, headers={"accept": "text/event-stream"}
            ) as streamed,
        ):
            async for line in streamed.aiter_lines():
                if line == "event: tool_call_started":
                    break
        for _ in range(100):
            if any(effect["tool"] == "slow" for effect in first.done()):
                break
            await asyncio.sleep(0.05)
        async with first.client() as client:
            run_id = next(r["run_id"] for r in (await client.get("/runs")).json()["runs"] if r["status"] == "running")
        os.kill(first.process.pid, signal.SIGKILL)
        first.process.wait(10)
    finally:
        failing.server.shutdown()
    second = desk_at(tmp_path, lease="1")
    try:
        await browser.open(second.url + "/")
        if await browser.text("h1") == "Sign in":
            await browser.click("#token")
            await browser.type(TOKEN)
            await browser.click("#sign-in")
            await until(browser, "!!document.querySelector('#waiting')")
        for _ in range(50):
            await browser.open(second.url + "/")
            if await browser.evaluate(f"!!document.querySelector('#resume-{run_id}')"):
                break
            await asyncio.sleep(0.2)
        assert await browser.text(f"#row-{run_id} .status") == "resumable (its worker stopped)"
        await shot(browser, "resumable")
        await shot(browser, "docs-resumable", ".wide")
        await browser.click(f"#resume-{run_id}")
        said = await until(browser, COMPLETED)
        assert "It completed: After the wait: " in said
        await shot(browser, "resumed")
        assert [effect["tool"] for effect in second.done()].count("slow") == 1  # not run again: it may have run
    finally:
        stop(second.process)
