"""Who may use the server and who is asking: the host, the origin, a bearer token, a sign-in cookie or `auth`.

An ASGI middleware in front of every route. A request whose `Host` is not
allowed gets 400 before anything else runs (DNS rebinding). A POST from
another site (its `Origin` is not this server) gets 403. With `token`,
`tokens` or `auth`, a request that names no principal gets 401 and nothing
of the app's data (`GET /` gets the sign-in form); the principal it names
is `scope["state"]["onion_principal"]`. A request authenticated by the
page's cookie alone also needs that sign-in's CSRF value to POST, so a
cookie alone never decides a call. A body over `max_body` bytes gets 413.
"""

from __future__ import annotations

import hashlib
import hmac
import inspect
import json
import os
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from http.cookies import SimpleCookie
from typing import Any

from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from onion import Principal

from ._page import sign_in_page

OPEN_PATHS = ("/sign-in",)
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1", "[::1]")
"""The hosts a server without a token answers by default: a page whose name was rebound to 127.0.0.1 is refused."""
SIGN_IN_HOURS = 12.0
FAILURES = 10
"""Failed sign-ins or tokens a client may send in a minute before it gets 429."""
"""How long a sign-in cookie holds."""

Auth = Callable[[Request], "Principal | Awaitable[Principal | None] | None"]


class Doors:
    """Who a request is: the principal its bearer token, sign-in cookie or `auth` names (None: nobody, or an open
    server's anonymous caller when no token, tokens or auth is set)."""

    def __init__(self, token: str | None, tokens: Mapping[str, Principal] | None, auth: Auth | None, name: str) -> None:
        given = dict(tokens or {})
        if token is not None:
            given.setdefault(token, Principal("token"))
        for secret, principal in given.items():
            if not isinstance(secret, str) or not secret:
                raise ValueError("serve(tokens=...): every token must be a non-empty string")
            if not isinstance(principal, Principal):
                raise ValueError(f"serve(tokens=...): a token's value must be an onion.Principal, not {principal!r}")
        self.tokens = {_token_id(secret): (secret.encode(), principal) for secret, principal in given.items()}
        self.auth = auth
        self.open = not given and auth is None
        """No token, tokens or auth: every request is let in, as no principal."""
        self.failures: dict[str, list[float]] = {}
        """Recent failed sign-ins and bearer tokens, by client address (`refused_too_often`)."""
        seed = "".join(sorted(self.tokens)) + name
        self.cookie = "onion_" + hashlib.sha256(seed.encode()).hexdigest()[:10]
        """The sign-in cookie's name, this server's own: two servers on one host do not sign each other out."""

    def refused_too_often(self, client: str, failed: bool = False) -> bool:
        """Whether `client` failed `FAILURES` times in the last minute (then it gets 429 until it cools down);
        `failed`: count one more failure first."""
        now = time.monotonic()
        recent = [t for t in self.failures.get(client, ()) if now - t < 60.0]
        if failed:
            recent.append(now)
        if recent:
            self.failures[client] = recent
        else:
            self.failures.pop(client, None)
        if len(self.failures) > 10_000:  # many addresses: forget the oldest rather than grow without bound
            self.failures.pop(next(iter(self.failures)))
        return len(recent) > FAILURES

    def bearer(self, header: str) -> Principal | None:
        """The principal of `Authorization: Bearer <token>` (the scheme in any case), else None."""
        scheme, _, secret = header.strip().partition(" ")
        if scheme.lower() != "bearer" or not secret.strip():
            return None
        given = secret.strip().encode("utf-8", "surrogateescape")
        known = self.tokens.get(_token_id(given.decode("utf-8", "surrogateescape")))
        if known is None or not hmac.compare_digest(known[0], given):
            return None
        return known[1]

    def signed_in(self, secret: str) -> tuple[str, str]:
        """A new sign-in of the token `secret`: the cookie's value and its CSRF value; ValueError for a wrong one."""
        token_id = _token_id(secret)
        known = self.tokens.get(token_id)
        if known is None or not hmac.compare_digest(known[0], secret.encode("utf-8", "surrogateescape")):
            raise ValueError("wrong token")
        expires = int(time.time() + SIGN_IN_HOURS * 3600)
        nonce = os.urandom(16).hex()
        body = f"{token_id}.{expires}.{nonce}"
        return f"{body}.{_mac(known[0], body)}", _csrf(known[0], nonce)

    def cookie_principal(self, value: str) -> tuple[Principal, str] | None:
        """The principal and CSRF value of a sign-in cookie this server made and that has not expired, else None."""
        parts = value.split(".")
        if len(parts) != 4 or not parts[1].isdigit():
            return None
        token_id, expires, nonce, mac = parts
        known = self.tokens.get(token_id)
        if known is None or int(expires) < time.time():
            return None
        if not hmac.compare_digest(mac.encode(), _mac(known[0], f"{token_id}.{expires}.{nonce}").encode()):
            return None
        return known[1], _csrf(known[0], nonce)

    async def from_auth(self, request: Request) -> Principal | None:
        """What `auth(request)` answers (awaited when it is async); an exception is nobody (fail closed)."""
        if self.auth is None:
            return None
        try:
            answer = self.auth(request)
            if inspect.isawaitable(answer):
                answer = await answer
        except Exception:
            return None
        if answer is not None and not isinstance(answer, Principal):
            raise TypeError(f"serve(auth=...): auth must answer an onion.Principal or None, not {answer!r}")
        return answer


def _token_id(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8", "surrogateescape")).hexdigest()[:16]


def _mac(key: bytes, body: str) -> str:
    return hmac.new(key, f"cookie:{body}".encode(), hashlib.sha256).hexdigest()


def _csrf(key: bytes, nonce: str) -> str:
    return hmac.new(key, f"csrf:{nonce}".encode(), hashlib.sha256).hexdigest()[:32]


class Guard:
    """Checks every request before the app sees it, and names who is asking."""

    def __init__(self, app: ASGIApp, doors: Doors, max_body: int, allowed_hosts: Iterable[str] | None = None) -> None:
        self.app = app
        self.doors = doors
        self.max_body = max_body
        hosts = LOOPBACK_HOSTS if allowed_hosts is None and doors.open else allowed_hosts
        self.hosts = None if hosts is None else frozenset(h.lower() for h in hosts)
        """The allowed `Host` names (without port); None: any."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        if self.hosts is not None and host_name(headers.get("host", "")) not in self.hosts:
            allowed = ", ".join(sorted(self.hosts))
            message = f"Host {headers.get('host', '')!r} is not served here (allowed: {allowed}; serve(allowed_hosts=))"
            await answer(send, 400, {"error": message})
            return
        post = scope["method"] not in ("GET", "HEAD", "OPTIONS")
        if post and not same_origin(headers):
            await answer(send, 403, {"error": "cross-site request refused: send it from this server's own page"})
            return
        state = scope.setdefault("state", {})
        state.update(onion_principal=None, onion_csrf="", onion_needs_csrf=False, onion_signed_in=False)
        doors = self.doors
        root = scope.get("root_path", "").rstrip("/")
        path = scope["path"][len(root) :] if scope["path"].startswith(root) else scope["path"]
        if not doors.open and path not in OPEN_PATHS:
            principal = doors.bearer(headers.get("authorization", ""))
            if principal is None:
                signed = doors.cookie_principal(cookie_of(headers, doors.cookie))
                if signed is not None:
                    principal, state["onion_csrf"] = signed
                    state["onion_needs_csrf"], state["onion_signed_in"] = post, True
            if principal is None and doors.auth is not None:
                principal = await doors.from_auth(Request(scope))
            client = (scope.get("client") or ("?", 0))[0]
            if doors.refused_too_often(client, failed=principal is None and "authorization" in headers):
                await answer(send, 429, {"error": "too many wrong credentials from this address: wait a minute"})
                return
            if principal is None:
                if path in ("", "/") and scope["method"] == "GET" and doors.tokens:
                    await answer_html(send, 401, sign_in_page(root=root))
                    return
                how = (
                    "send the header 'Authorization: Bearer <token>'" if doors.tokens else "sign in through your proxy"
                )
                await answer(send, 401, {"error": f"who is asking? missing or wrong credentials: {how}"})
                return
            state["onion_principal"] = principal
        if int(headers.get("content-length") or 0) > self.max_body:
            await answer(send, 413, {"error": f"the body is over {self.max_body} bytes: send a smaller one"})
            return
        await self.app(scope, self.capped(receive, send), guarded(send))

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


HEADERS = [
    (b"x-frame-options", b"DENY"),
    (
        b"content-security-policy",
        b"default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    ),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),  # no-referrer would make a form POST's Origin "null"
]
"""Sent with every answer: no other site frames the page (one click would approve), nothing is sniffed."""


def guarded(send: Send) -> Send:
    """`send` that adds `HEADERS` to the answer (those the route did not set: a page's own
    `Content-Security-Policy` allowing its script by hash), and `Cache-Control: no-store` unless the route set one
    (SSE)."""

    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            headers = list(message.get("headers", []))
            names = {name.lower() for name, _ in headers}
            if b"cache-control" not in names:
                headers.append((b"cache-control", b"no-store"))
            added = [h for h in HEADERS if h[0] not in names]  # a page with a script sets its own policy
            message = {**message, "headers": headers + added}
        await send(message)

    return sending


class BodyTooLarge(Exception):
    def __init__(self, limit: int) -> None:
        super().__init__(f"the body is over {limit} bytes: send a smaller one")


def host_name(host: str) -> str:
    """`Host` without its port, lower-cased (`[::1]:8000` -> `[::1]`)."""
    host = host.strip().lower()
    if host.startswith("["):
        return host.partition("]")[0] + "]"
    return host.rpartition(":")[0] if host.count(":") == 1 else host


def same_origin(headers: dict[str, str]) -> bool:
    """True unless the browser says the request comes from another site."""
    if headers.get("sec-fetch-site", "same-origin") not in ("same-origin", "none"):
        return False
    origin = headers.get("origin")
    if origin is None:
        return True
    host = headers.get("host", "")
    return origin.split("://", 1)[-1] == host


def cookie_of(headers: dict[str, str], name: str) -> str:
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(headers.get("cookie", ""))
    except Exception:
        return ""
    morsel = jar.get(name)
    return morsel.value if morsel else ""


async def answer(send: Send, status: int, body: dict[str, Any]) -> None:
    data = json.dumps(body).encode()
    await respond(send, status, b"application/json", data)


async def answer_html(send: Send, status: int, page: str) -> None:
    await respond(send, status, b"text/html; charset=utf-8", page.encode())


async def respond(send: Send, status: int, kind: bytes, data: bytes) -> None:
    headers = [(b"content-type", kind), (b"content-length", str(len(data)).encode()), (b"cache-control", b"no-store")]
    headers += HEADERS
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": data})
