"""`serve(agent)`: the agent as an ASGI application (Starlette), with the routes of docs/serve.md."""

from __future__ import annotations

import hmac
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import parse_qsl

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Route

from onion import Agent, OnionError

from . import _agui
from ._auth import COOKIE, BodyTooLarge, Guard, derived
from ._bodies import MAX_BODY, Problem, decisions, parse_json, result_json, run_request
from ._channel import Channel, Channels, name_the_channel
from ._page import error_page, form_decisions, inbox_page, sign_in_page
from ._runs import decide, decided, error_json, follow, listed, resume_streamed, shown, start, store_of

FORM = "application/x-www-form-urlencoded"


def serve(
    agent: Agent[Any],
    *,
    token: str | None = None,
    heartbeat: float = 15.0,
    max_body: int = MAX_BODY,
    keep_events: float = 600.0,
) -> Starlette:
    """A Starlette app serving `agent`: runs (JSON or SSE), the store's runs and decisions, AG-UI, the page.

    `token`: every route requires `Authorization: Bearer <token>` (the page
    signs in once into a cookie). `heartbeat`: seconds between SSE comments
    while a run sends nothing. `max_body`: the largest request body, in
    bytes. `keep_events`: seconds a streamed run's events stay for clients
    that reconnect (`GET /runs/{run_id}/events`). Adds one run layer to
    `agent` that names each streamed run's channel (it does nothing outside
    a stream of this server).
    """
    if token is not None and (not isinstance(token, str) or not token):
        raise ValueError("serve(token=...): the token must be a non-empty string (or None for no auth)")
    channels = Channels(keep_events)
    agent.use(name_the_channel)

    def sse(channel: Channel, after: int = 0) -> StreamingResponse:
        body = follow(channel, after, heartbeat, cancel_on_leave=agent.store is None)
        return streamed(body)

    async def post_runs(request: Request) -> Response:
        run = run_request(parse_json(await request.body()))
        if run.session is not None and agent.store is None:
            raise Problem(422, "field 'session' needs a store: build the agent with Agent(store=...)")
        if wants_sse(request):
            return sse(start(agent, channels, run))
        try:
            result = await agent.run(run.input, state=run.state, session=run.session)
        except OnionError as error:
            return JSONResponse(error_json(error), 500)
        return JSONResponse(result_json(result))

    async def get_runs(request: Request) -> Response:
        status = request.query_params.get("status")
        if status not in (None, "running", "paused", "completed", "failed"):
            raise Problem(422, f"?status={status}: give running, paused, completed or failed")
        limit = request.query_params.get("limit", "100")
        if not limit.isdigit() or not 0 < int(limit) <= 1000:
            raise Problem(422, f"?limit={limit}: give a number of runs from 1 to 1000")
        return JSONResponse({"runs": await listed(store_of(agent), status, int(limit))})

    async def get_run(request: Request) -> Response:
        return JSONResponse(await shown(store_of(agent), request.path_params["run_id"]))

    async def post_decisions(request: Request) -> Response:
        run_id = request.path_params["run_id"]
        body = await request.body()
        from_form = request.headers.get("content-type", "").startswith(FORM)
        if from_form:
            fields = dict(parse_qsl(body.decode("utf-8", "replace")))
            given, csrf = form_decisions(fields), fields.get("csrf", "")
        else:
            given, csrf = parse_json(body), request.headers.get("x-csrf-token", "")
        if request.scope["state"]["onion_needs_csrf"] and not hmac.compare_digest(
            csrf.encode(), request.scope["state"]["onion_csrf"].encode()
        ):
            raise Problem(
                403, "a decision made with the page's cookie needs the page's CSRF token: decide from the page"
            )
        if wants_sse(request) and not from_form:
            state = await decided(agent, run_id, decisions(given))
            return sse(await resume_streamed(agent, channels, state))
        try:
            result = await decide(agent, run_id, decisions(given))
        except OnionError as error:  # the resumed run failed (a rejected model call or run: CallRejected)
            if from_form:
                raise Problem(500, error_json(error)["message"]) from None
            return JSONResponse(error_json(error), 500)
        if from_form:
            return RedirectResponse(f"/#run-{run_id}", 303)
        return JSONResponse(result_json(result))

    async def get_events(request: Request) -> Response:
        run_id = request.path_params["run_id"]
        given = request.headers.get("last-event-id", "0").strip() or "0"
        if not given.isdigit():
            raise Problem(422, f"Last-Event-ID {given!r}: give the id: of the last event received (a number)")
        store = store_of(agent)  # without one, a client that left has nothing to come back to
        channel = channels.get(run_id)
        if channel is None:
            await shown(store, run_id)  # 404 when the store never saw it
            raise Problem(
                409,
                f"this server process holds no events of run {run_id} (it ran elsewhere, or ended over "
                f"{keep_events:.0f} s ago): GET /runs/{run_id} for its state",
            )
        return sse(channel, int(given))

    async def inbox(request: Request) -> Response:
        runs = None if agent.store is None else await listed(agent.store, None, 100)
        return HTMLResponse(inbox_page(agent.name, runs, request.scope["state"]["onion_csrf"]))

    async def sign_in(request: Request) -> Response:
        fields = dict(parse_qsl((await request.body()).decode("utf-8", "replace")))
        if token is None:
            return RedirectResponse("/", 303)
        if not hmac.compare_digest(fields.get("token", "").encode(), token.encode()):
            return HTMLResponse(sign_in_page(), 401)
        response = RedirectResponse("/", 303)
        secure = request.url.scheme == "https"
        response.set_cookie(COOKIE, derived(token, "cookie"), httponly=True, samesite="strict", secure=secure)
        return response

    async def ag_ui(request: Request) -> Response:
        return streamed(_agui.events(agent, _agui.parse(parse_json(await request.body()))))

    async def problem(request: Request, error: Exception) -> Response:
        status, message = (error.status, error.message) if isinstance(error, Problem) else (413, str(error))
        if request.headers.get("content-type", "").startswith(FORM) or request.url.path == "/":
            return HTMLResponse(error_page(status, message), status)
        return JSONResponse({"error": message}, status)

    routes = [
        Route("/", inbox, methods=["GET"]),
        Route("/sign-in", sign_in, methods=["POST"]),
        Route("/runs", post_runs, methods=["POST"]),
        Route("/runs", get_runs, methods=["GET"]),
        Route("/runs/{run_id}", get_run, methods=["GET"]),
        Route("/runs/{run_id}/decisions", post_decisions, methods=["POST"]),
        Route("/runs/{run_id}/events", get_events, methods=["GET"]),
        Route("/ag-ui", ag_ui, methods=["POST"]),
    ]
    return Starlette(
        routes=routes,
        middleware=[Middleware(Guard, token=token, max_body=max_body)],
        exception_handlers={Problem: problem, BodyTooLarge: problem},
    )


def wants_sse(request: Request) -> bool:
    return "text/event-stream" in request.headers.get("accept", "")


def streamed(body: AsyncIterator[bytes], media_type: str = "text/event-stream") -> StreamingResponse:
    headers = {"cache-control": "no-cache", "x-accel-buffering": "no"}
    return StreamingResponse(body, media_type=media_type, headers=headers)
