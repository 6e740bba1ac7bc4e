"""Who is asking over HTTP: per-person tokens and `auth`, runs and decisions on record as the request's principal,
tenants kept apart (404, never listed), roles that decide, the allowed hosts, sign-in cookies. In process."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2
import pytest
from starlette.requests import Request

from middleware import approve
from onion import Agent, Principal, tool
from onion.serve import serve
from onion.stores import MemoryStore
from onion.testing import ScriptedModel, call

ANNA = Principal("anna", tenant="acme", roles={"approver"})
BOB = Principal("bob", tenant="acme")
EVE = Principal("eve", tenant="globex", roles={"approver"})
TOKENS = {"anna-secret": ANNA, "bob-secret": BOB, "eve-secret": EVE}


@tool
def refund(order: int) -> str:
    """Refund an order."""
    return f"refunded {order}"


def refunder(*script: Any, store: Any = None) -> Agent[str]:
    model = ScriptedModel([[call("refund", order=7)], "Refunded.", *script])
    return Agent(model, tools=[refund], name="refunds", store=store or MemoryStore()).use(approve("refund"))


@asynccontextmanager
async def client(app: Any, host: str = "127.0.0.1") -> AsyncIterator[httpx2.AsyncClient]:
    transport = httpx2.ASGITransport(app=app)
    async with httpx2.AsyncClient(transport=transport, base_url=f"http://{host}") as http:
        yield http


def as_(secret: str) -> dict[str, str]:
    return {"authorization": f"Bearer {secret}"}


async def test_a_run_over_http_is_the_tokens_principal_and_other_tenants_never_see_it() -> None:
    """Bob's run carries Bob; Eve (globex) neither lists, shows nor decides it (404 as for no run); Anna (acme,
    approver) decides it, and the run shows her decision with who and when."""
    agent = refunder()
    app = serve(agent, tokens=TOKENS, approvers={"approver"})
    async with client(app) as http:
        started = (await http.post("/runs", json={"input": "refund 7"}, headers=as_("bob-secret"))).json()
        run_id, [pending] = started["run_id"], started["pending"]
        assert (await http.get("/runs", headers=as_("eve-secret"))).json()["runs"] == []
        hidden = await http.get(f"/runs/{run_id}", headers=as_("eve-secret"))
        missing = await http.get("/runs/run-nope", headers=as_("eve-secret"))
        assert hidden.status_code == missing.status_code == 404
        assert "acme" not in hidden.text and "bob" not in hidden.text and "refund" not in hidden.text
        decision = {"approve": [pending["id"]]}
        refused = await http.post(f"/runs/{run_id}/decisions", json=decision, headers=as_("eve-secret"))
        assert refused.status_code == 404 and "acme" not in refused.text
        assert [r["run_id"] for r in (await http.get("/runs", headers=as_("bob-secret"))).json()["runs"]] == [run_id]
        not_an_approver = await http.post(f"/runs/{run_id}/decisions", json=decision, headers=as_("bob-secret"))
        assert not_an_approver.status_code == 403 and "approver" in not_an_approver.json()["error"]
        done = await http.post(f"/runs/{run_id}/decisions", json=decision, headers=as_("anna-secret"))
        assert done.json()["output"] == "Refunded."
        shown = (await http.get(f"/runs/{run_id}", headers=as_("anna-secret"))).json()
    assert shown["principal"] == {"id": "bob", "tenant": "acme"}
    [record] = shown["decisions"]
    assert record["call_id"] == pending["id"] and record["decision"] == "approved"
    assert record["by"] == {"id": "anna", "tenant": "acme"} and record["at"].endswith("Z")


async def test_auth_names_the_principal_from_your_own_check_sync_or_async_and_none_is_401() -> None:
    """`auth(request)` (a header a proxy sets, here) answers the principal; None, or an exception, answers 401."""

    def by_header(request: Request) -> Principal | None:
        user = request.headers.get("x-user")
        if user == "boom":
            raise RuntimeError("the check itself failed")
        return None if user is None else Principal(user, tenant="acme")

    async def by_header_async(request: Request) -> Principal | None:
        return by_header(request)

    for auth in (by_header, by_header_async):
        app = serve(refunder("again"), auth=auth)
        async with client(app) as http:
            assert (await http.get("/runs")).status_code == 401
            assert (await http.get("/runs", headers={"x-user": "boom"})).status_code == 401
            run = (await http.post("/runs", json={"input": "refund 7"}, headers={"x-user": "carol"})).json()
            assert run["status"] == "paused"
            shown = (await http.get(f"/runs/{run['run_id']}", headers={"x-user": "dave"})).json()
        assert shown["principal"] == {"id": "carol", "tenant": "acme"}


async def test_a_server_without_credentials_answers_only_loopback_host_names() -> None:
    """DNS rebinding: with no token, a `Host` that is not a loopback name gets 400 before anything runs; with
    tokens any host is answered unless `allowed_hosts` says otherwise."""
    async with client(serve(refunder()), host="attacker.example") as http:
        refused = await http.get("/runs")
    assert refused.status_code == 400 and "attacker.example" in refused.json()["error"]
    for host in ("127.0.0.1:8000", "localhost", "[::1]:9"):
        async with client(serve(refunder()), host=host) as http:
            assert (await http.get("/runs")).status_code == 200
    async with client(serve(refunder(), tokens=TOKENS), host="agents.example.com") as http:
        assert (await http.get("/runs", headers=as_("bob-secret"))).status_code == 200
    app = serve(refunder(), tokens=TOKENS, allowed_hosts=["agents.example.com"])
    async with client(app, host="other.example.com") as http:
        assert (await http.get("/runs", headers=as_("bob-secret"))).status_code == 400


async def test_bearer_is_case_insensitive_and_a_wrong_or_non_ascii_token_is_401() -> None:
    """`bearer x` works as `Bearer x`; a token that is not one of them, ASCII or not, is refused alike."""
    async with client(serve(refunder(), tokens=TOKENS)) as http:
        assert (await http.get("/runs", headers={"authorization": "bearer bob-secret"})).status_code == 200
        assert (await http.get("/runs", headers={"authorization": "Bearer bob-secreT"})).status_code == 401
        wrong = await http.get("/runs", headers=[(b"authorization", "Bearer bøb".encode())])
        assert wrong.status_code == 401


async def test_each_sign_in_has_its_own_cookie_and_csrf_and_servers_do_not_share_cookie_names() -> None:
    """Two sign-ins of one token get different cookies; the cookie works until signed out (the page's own
    cookie name, so two servers on one host do not sign each other out); a forged cookie is 401."""
    app = serve(refunder(), tokens=TOKENS)
    async with client(app) as http:
        first = await http.post("/sign-in", data={"token": "bob-secret"})
        second = await http.post("/sign-in", data={"token": "bob-secret"})
        wrong = await http.post("/sign-in", data={"token": "nope"})
        name = first.headers["set-cookie"].split("=", 1)[0]
        cookies = [r.headers["set-cookie"].split(";", 1)[0].split("=", 1)[1] for r in (first, second)]
        assert first.status_code == 303 and wrong.status_code == 401 and cookies[0] != cookies[1]
        http.cookies.clear()
        page = await http.get("/", headers={"cookie": f"{name}={cookies[0]}"})
        assert page.status_code == 200 and "Runs of refunds" in page.text
        forged = cookies[0][:-4] + "0000"
        assert (await http.get("/runs", headers={"cookie": f"{name}={forged}"})).status_code == 401
        out = await http.post("/sign-out", headers={"cookie": f"{name}={cookies[0]}"})
        assert out.status_code == 303 and 'Max-Age=0' in out.headers["set-cookie"]
    other = serve(refunder(), tokens={"x-secret": BOB})
    async with client(other) as http:
        signed = await http.post("/sign-in", data={"token": "x-secret"})
    assert signed.headers["set-cookie"].split("=", 1)[0] != name


async def test_serve_does_not_change_the_agent_it_is_given() -> None:
    """The server runs the agent with its own layer beside it: the user's agent keeps its stack."""
    agent = refunder()
    before = list(agent.stack.layers())
    serve(agent, tokens=TOKENS)
    assert list(agent.stack.layers()) == before


@pytest.mark.parametrize("bad", [{"": BOB}, {"x": "bob"}])
def test_tokens_must_be_strings_naming_principals(bad: dict[str, Any]) -> None:
    """A token map with an empty token or a value that is not a Principal is refused when the app is made."""
    with pytest.raises(ValueError, match=r"serve\(tokens=\.\.\.\)"):
        serve(refunder(), tokens=bad)
