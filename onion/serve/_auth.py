"""Who may use the server: a bearer token (or the page's cookie), same-origin POSTs, capped bodies.

An ASGI middleware in front of every route. With a token, a request
without `Authorization: Bearer <token>` or the sign-in cookie gets 401 and
nothing of the app's data (`GET /` gets the sign-in form). A POST that
comes from another site (its `Origin` is not this server) gets 403, token
or not; one authenticated by the cookie alone also needs the page's CSRF
token (a form field or `X-CSRF-Token`), so a cookie alone never decides a
call. A body over `max_body` bytes gets 413.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from http.cookies import SimpleCookie
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ._page import sign_in_page

COOKIE = "onion_serve"
OPEN_PATHS = ("/sign-in",)


def derived(token: str, purpose: str) -> str:
    """A value derived from the token for one purpose (the cookie, the CSRF field): neither reveals the token."""
    return hmac.new(token.encode(), purpose.encode(), hashlib.sha256).hexdigest()


class Guard:
    """Checks every request before the app sees it."""

    def __init__(self, app: ASGIApp, token: str | None, max_body: int) -> None:
        self.app = app
        self.token = token
        self.max_body = max_body
        self.cookie = derived(token, "cookie") if token else None
        self.csrf = derived(token, "csrf") if token else ""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        post = scope["method"] not in ("GET", "HEAD", "OPTIONS")
        if post and not same_origin(headers):
            await answer(send, 403, {"error": "cross-site request refused: send it from this server's own page"})
            return
        via_cookie = False
        if self.token and scope["path"] not in OPEN_PATHS:
            bearer = headers.get("authorization", "")
            if hmac.compare_digest(bearer.encode(), f"Bearer {self.token}".encode()):
                pass
            elif self.cookie and hmac.compare_digest(cookie_of(headers).encode(), self.cookie.encode()):
                via_cookie = True
            elif scope["path"] == "/" and scope["method"] == "GET":
                await answer_html(send, 401, sign_in_page())
                return
            else:
                message = "missing or wrong token: send the header 'Authorization: Bearer <token>'"
                await answer(send, 401, {"error": message})
                return
        scope.setdefault("state", {})["onion_csrf"] = self.csrf
        scope["state"]["onion_needs_csrf"] = via_cookie and post
        if int(headers.get("content-length") or 0) > self.max_body:
            await answer(send, 413, {"error": f"the body is over {self.max_body} bytes: send a smaller one"})
            return
        await self.app(scope, self.capped(receive, send), send)

    def capped(self, receive: Receive, send: Send) -> Receive:
        """`receive` that stops a chunked body once it passes `max_body`."""
        seen = 0

        async def read() -> Message:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.max_body:
                raise BodyTooLarge(self.max_body)
            return message

        return read


class BodyTooLarge(Exception):
    def __init__(self, limit: int) -> None:
        super().__init__(f"the body is over {limit} bytes: send a smaller one")


def same_origin(headers: dict[str, str]) -> bool:
    """True unless the browser says the request comes from another site."""
    if headers.get("sec-fetch-site", "same-origin") not in ("same-origin", "none"):
        return False
    origin = headers.get("origin")
    if origin is None:
        return True
    host = headers.get("host", "")
    return origin.split("://", 1)[-1] == host


def cookie_of(headers: dict[str, str]) -> str:
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(headers.get("cookie", ""))
    except Exception:
        return ""
    morsel = jar.get(COOKIE)
    return morsel.value if morsel else ""


async def answer(send: Send, status: int, body: dict[str, Any]) -> None:
    data = json.dumps(body).encode()
    await respond(send, status, b"application/json", data)


async def answer_html(send: Send, status: int, page: str) -> None:
    await respond(send, status, b"text/html; charset=utf-8", page.encode())


async def respond(send: Send, status: int, kind: bytes, data: bytes) -> None:
    headers = [(b"content-type", kind), (b"content-length", str(len(data)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": data})
