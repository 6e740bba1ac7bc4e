"""The runs API on a real uvicorn server: JSON and SSE runs, the store's runs, decisions exactly once, auth."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Callable

from live_server import ROOT, TOKEN, Served, sse_events

from onion import Message, ModelResponse, ToolRequest


def asks(*calls: tuple[str, str, dict[str, object]]) -> ModelResponse:
    return ModelResponse(Message.assistant("", [ToolRequest(*call) for call in calls]))


async def paused_run(served: Served, *calls: tuple[str, str, dict[str, object]]) -> dict[str, object]:
    served.fake.script([asks(*calls)])
    async with served.client() as client:
        answer = await client.post("/runs", json={"input": "tidy up"})
    assert answer.status_code == 200 and answer.json()["status"] == "paused", answer.text
    return dict(answer.json())


async def test_a_json_run_answers_its_id_output_pending_and_usage(serving: Callable[..., Served]) -> None:
    """POST /runs runs the agent through the real SDK and answers the DESIGN's JSON shape."""
    served = serving()
    served.fake.script([asks(("toolu_w", "lookup", {"city": "Paris"})), "It is sunny in Paris."])
    async with served.client() as client:
        answer = await client.post("/runs", json={"input": "weather?", "state": {"user": "ann"}})
    body = answer.json()
    assert answer.status_code == 200
    assert body["status"] == "completed" and body["output"] == "It is sunny in Paris." and body["pending"] == []
    assert body["run_id"].startswith("run-") and body["usage"]["requests"] == 2
    assert set(body["usage"]) == {"input_tokens", "output_tokens", "requests"}
    assert "lookup Paris" in served.effects_lines() and served.fake.remaining == 0


async def test_an_sse_run_streams_each_event_and_ends_with_the_json_answer(serving: Callable[..., Served]) -> None:
    """With Accept: text/event-stream: numbered events, text deltas joining to the output, the last the JSON answer."""
    served = serving()
    text = "Hello there, this streams in pieces."
    served.fake.script([text, text])
    async with served.client() as client:
        streamed = await client.post("/runs", json={"input": "hi"}, headers={"accept": "text/event-stream"})
        plain = (await client.post("/runs", json={"input": "hi"})).json()
    events = sse_events(streamed.text)
    assert streamed.headers["content-type"].startswith("text/event-stream")
    assert [int(e["id"]) for e in events] == list(range(1, len(events) + 1))
    assert events[0]["event"] == "run_started" and events[-1]["event"] == "run_finished"
    deltas = [e["data"]["text"] for e in events if e["event"] == "text_delta"]
    assert len(deltas) > 1 and "".join(deltas) == text
    assert "model_call_finished" in [e["event"] for e in events]
    last = events[-1]["data"]
    assert last["run_id"] == events[0]["data"]["run_id"]
    assert {**last, "run_id": plain["run_id"]} == plain


async def test_a_paused_run_is_listed_shown_and_decided_once_by_two_concurrent_requests(
    serving: Callable[..., Served],
) -> None:
    """Two decisions for one paused batch at once: one 200, one 409; the approved call ran once."""
    served = serving()
    paused = await paused_run(served, ("toolu_d1", "delete", {"path": "once.txt"}))
    run_id = paused["run_id"]
    assert paused["pending"] == [
        {
            "id": "toolu_d1",
            "kind": "tool",
            "name": "delete",
            "args": {"path": "once.txt"},
            "reason": "deleting needs a person",
        }
    ]
    served.fake.script(["deleted it"])
    async with served.client() as client:
        listed = (await client.get("/runs", params={"status": "paused"})).json()["runs"]
        assert run_id in [run["run_id"] for run in listed]
        shown = (await client.get(f"/runs/{run_id}")).json()
        assert shown["status"] == "paused" and shown["pending"][0]["id"] == "toolu_d1"
        assert shown["messages"][0]["role"] == "user"
        body = {"approve": ["toolu_d1"]}
        answers = await asyncio.gather(*(client.post(f"/runs/{run_id}/decisions", json=body) for _ in range(2)))
        again = await client.post(f"/runs/{run_id}/decisions", json=body)
        done = (await client.get(f"/runs/{run_id}")).json()
    assert sorted(a.status_code for a in answers) == [200, 409]
    won = next(a for a in answers if a.status_code == 200).json()
    assert won["status"] == "completed" and won["output"] == "deleted it"
    assert again.status_code == 409 and "nothing waits for a decision" in again.json()["error"]
    assert served.effects_lines().count("delete once.txt") == 1
    assert done["status"] == "completed" and done["output"] == "deleted it" and served.fake.remaining == 0


async def test_a_rejection_reaches_the_model_and_an_edit_reaches_the_tool(serving: Callable[..., Served]) -> None:
    """Reject one call with a reason, edit another's arguments: the tool runs with the edit, the model reads both."""
    served = serving()
    paused = await paused_run(served, ("toolu_r", "delete", {"path": "keep.txt"}), ("toolu_e", "delete", {"path": "x"}))
    served.fake.script(["ok"])
    body = {"reject": {"toolu_r": "keep.txt is the only copy"}, "edit": {"toolu_e": {"path": "edited.tmp"}}}
    async with served.client() as client:
        answer = await client.post(f"/runs/{paused['run_id']}/decisions", json=body)
    assert answer.status_code == 200 and answer.json()["output"] == "ok"
    lines = served.effects_lines()
    assert "delete edited.tmp" in lines and "delete keep.txt" not in lines and "delete x" not in lines
    results = {b["tool_use_id"]: b for b in served.fake.requests[-1].body["messages"][-1]["content"]}
    assert results["toolu_r"]["is_error"] and "keep.txt is the only copy" in str(results["toolu_r"]["content"])
    assert "deleted edited.tmp" in str(results["toolu_e"]["content"])


async def test_bad_bodies_answer_422_naming_the_field_and_unknown_runs_404(serving: Callable[..., Served]) -> None:
    """Each malformed request says what to fix; nothing runs."""
    served = serving()
    paused = await paused_run(served, ("toolu_b1", "delete", {"path": "b"}))
    decisions = f"/runs/{paused['run_id']}/decisions"
    async with served.client() as client:
        cases = [
            (await client.post("/runs", json={"input": 3}), 422, "'input'"),
            (await client.post("/runs", json={"input": "x", "state": []}), 422, "'state'"),
            (await client.post("/runs", content=b"{not json"), 422, "not valid JSON"),
            (await client.post("/runs", json={"input": "x", "colour": 1}), 422, "'colour'"),
            (await client.post(decisions, json={}), 422, "decides nothing"),
            (await client.post(decisions, json={"approve": ["toolu_nope"]}), 409, "no pending call 'toolu_nope'"),
            (await client.get("/runs/run-missing"), 404, "no run 'run-missing'"),
            (await client.post("/runs/run-missing/decisions", json={"approve": ["a"]}), 404, "no run"),
            (await client.get("/runs", params={"status": "sleeping"}), 422, "?status=sleeping"),
            (await client.post("/runs", content=b"x" * (2 << 20)), 413, "over"),
        ]
        served.fake.script(["left alone"])
        rejected = await client.post(decisions, json={"reject": {"toolu_b1": "cleanup"}})
    for answer, status, says in cases:
        assert (answer.status_code, says in answer.json()["error"]) == (status, True), answer.text
    assert rejected.json()["output"] == "left alone" and "delete b" not in served.effects_lines()


async def test_without_the_token_every_route_answers_401_with_none_of_the_apps_data(
    serving: Callable[..., Served],
) -> None:
    """Missing or wrong token: 401 everywhere, the page included (a sign-in form), no run id in any body."""
    served = serving()
    paused = await paused_run(served, ("toolu_s", "delete", {"path": "secret.txt"}))
    run_id = str(paused["run_id"])
    routes = [
        ("GET", "/"),
        ("GET", "/runs"),
        ("GET", f"/runs/{run_id}"),
        ("GET", f"/runs/{run_id}/events"),
        ("POST", "/runs"),
        ("POST", f"/runs/{run_id}/decisions"),
        ("POST", "/ag-ui"),
    ]
    for token in (None, "wrong"):
        async with served.client(token) as client:
            for method, path in routes:
                answer = await client.request(method, path, json={"approve": ["toolu_s"], "input": "x"})
                assert answer.status_code == 401, (method, path, token)
                assert run_id not in answer.text and "secret.txt" not in answer.text
    async with served.client(None) as client:
        page = await client.get("/")
    assert 'name="token"' in page.text or "name=token" in page.text
    assert served.effects_lines().count("delete secret.txt") == 0


async def test_a_cross_site_post_cannot_decide(serving: Callable[..., Served]) -> None:
    """Another site's Origin is refused even with the token; the page's cookie alone (no CSRF token) never decides."""
    served = serving()
    paused = await paused_run(served, ("toolu_x", "delete", {"path": "victim.txt"}))
    decisions = f"/runs/{paused['run_id']}/decisions"
    async with served.client(None) as browser:
        signed = await browser.post("/sign-in", data={"token": TOKEN})
        assert signed.status_code == 303 and "httponly" in signed.headers["set-cookie"].lower()
        assert "samesite=strict" in signed.headers["set-cookie"].lower()
        evil = {"origin": "http://evil.example", "content-type": "application/x-www-form-urlencoded"}
        refused = [
            await browser.post(decisions, content=b"decision%3Atoolu_x=approve", headers=evil),
            await browser.post(decisions, json={"approve": ["toolu_x"]}),
            await browser.post(decisions, json={"approve": ["toolu_x"]}, headers={"sec-fetch-site": "cross-site"}),
        ]
    async with served.client() as client:
        with_token = await client.post(
            decisions, json={"approve": ["toolu_x"]}, headers={"origin": "http://evil.example"}
        )
        still = (await client.get(f"/runs/{paused['run_id']}")).json()
        served.fake.script(["not deleted"])
        await client.post(decisions, json={"reject": {"toolu_x": "no"}})
    assert [a.status_code for a in refused] == [403, 403, 403] and with_token.status_code == 403
    assert still["status"] == "paused" and "delete victim.txt" not in served.effects_lines()


def test_the_cli_refuses_to_listen_beyond_loopback_without_a_token() -> None:
    """`python -m onion serve` on 0.0.0.0 without the token variable set exits saying how to fix it."""
    done = subprocess.run(
        [sys.executable, "-m", "onion", "serve", "served_agent:agent", "--host", "0.0.0.0", "--token-env", "NO_SUCH_V"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert done.returncode != 0 and "refusing to listen on 0.0.0.0 without a token: set NO_SUCH_V" in done.stderr
