"""`serve(agent)`: the agent as an ASGI application (Starlette), with the routes of docs/serve.md."""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
from collections.abc import AsyncIterator, Iterable, Mapping
from typing import Any
from urllib.parse import parse_qsl

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Route

from onion import Agent, OnionError, Principal, RunStateError
from onion.errors import CallRejected
from onion.scrub import scrub
from onion.stores import EventStore

from . import _agui
from ._auth import SIGN_IN_HOURS, Auth, BodyTooLarge, Doors, Guard
from ._bodies import MAX_BODY, Problem, decisions, parse_json, result_json, run_request
from ._channel import Channel, Channels, follow_stored, name_the_channel, nothing_more, read_stored
from ._filters import Filters
from ._notify import Notify
from ._page import CSP, FormProblem, error_page, form_decisions, inbox_page, notice_page, sign_in_page
from ._runs import (
    already_decided,
    decide,
    decided,
    error_json,
    follow,
    inbox_of,
    listed,
    resume_streamed,
    shown,
    start,
    store_of,
)
from ._trace import CSP as TRACE_CSP
from ._trace import Traced, Traces

FORM = "application/x-www-form-urlencoded"
logger = logging.getLogger("onion.serve")


def serve(
    agent: Agent[Any],
    *,
    token: str | None = None,
    tokens: Mapping[str, Principal] | None = None,
    auth: Auth | None = None,
    allowed_hosts: Iterable[str] | None = None,
    approvers: Iterable[str] | None = None,
    notify: str | None = None,
    notify_page: str | None = None,
    heartbeat: float = 15.0,
    max_body: int = MAX_BODY,
    keep_events: float = 600.0,
    keep_events_bytes: int = 64 * 2**20,
    traces: int = 100,
) -> Starlette:
    """A Starlette app serving `agent`: runs (JSON or SSE), the store's runs and decisions, AG-UI, the page.

    Who is asking (docs/serve.md, "Who is asking"): `tokens` maps per-person bearer tokens to principals (the
    page signs in once into a cookie); `auth(request)` (sync or async) answers a `Principal` or None (401) for
    your own check; `token` alone is one principal. A principal sees and decides only runs of its tenant;
    `approvers`: roles one of which a principal needs to decide. `notify`: a webhook URL posted a message when
    a run pauses (Slack/Teams incoming webhooks show it; `notify_page`: the page's public URL, for the link).
    `allowed_hosts`: the `Host` names answered (default: loopback names without credentials, else any).
    `heartbeat`: seconds between SSE comments while a run sends nothing. `max_body`: the largest request body,
    in bytes. `keep_events`: seconds a streamed run's events stay for clients that reconnect
    (`GET /runs/{run_id}/events`). `traces`: how many runs' traces this process keeps for
    `GET /runs/{run_id}/trace` (tracing is on while the app is served; 0: off, no traces). `agent` is not
    changed: the server runs it with its own run layers beside it (one names each streamed run's channel;
    `notify`'s tells the webhook).

    `keep_events_bytes`: the most bytes of ended runs' events this process keeps for reconnects (the oldest
    ended go first). With an SQLite or Redis store, every streamed event is kept there too (`keep_events` seconds
    after its stream ended), so `GET /runs/{run_id}/events` works on any server process on that store.
    """
    if token is not None and (not isinstance(token, str) or not token):
        raise ValueError("serve(token=...): the token must be a non-empty string (or None for no auth)")
    doors = Doors(token, tokens, auth, agent.name)
    deciders = None if approvers is None else frozenset([approvers] if isinstance(approvers, str) else approvers)
    shared = agent.store if isinstance(agent.store, EventStore) else None
    channels = Channels(keep_events, keep_events_bytes, shared)
    kept = Traces(traces)
    beside = [name_the_channel] if notify is None else [name_the_channel, Notify(notify, notify_page)]
    agent = agent._restacked(*beside, agent.stack)

    def sse(channel: Channel, after: int = 0) -> StreamingResponse:
        body = follow(channel, after, heartbeat, cancel_on_leave=agent.store is None)
        return streamed(body)

    async def post_runs(request: Request) -> Response:
        run = run_request(parse_json(await request.body()))
        if run.session is not None and agent.store is None:
            raise Problem(422, "field 'session' needs a store: build the agent with Agent(store=...)")
        principal = principal_of(request)
        if wants_sse(request):
            return sse(start(agent, channels, run, principal))
        try:
            result = await agent.run(run.input, state=run.state, session=run.session, principal=principal)
        except Exception as error:
            return failed(error)
        return JSONResponse(result_json(result))

    async def get_runs(request: Request) -> Response:
        status = request.query_params.get("status")
        if status not in (None, "running", "paused", "completed", "failed"):
            raise Problem(422, f"?status={status}: give running, paused, completed or failed")
        limit = request.query_params.get("limit", "100")
        if not (limit.isascii() and limit.isdigit()) or not 0 < int(limit) <= 1000:
            raise Problem(422, f"?limit={limit}: give a number of runs from 1 to 1000")
        return JSONResponse(
            {"runs": await listed(store_of(agent), agent.name, status, int(limit), principal_of(request))}
        )

    async def get_run(request: Request) -> Response:
        shown_run = await shown(store_of(agent), agent.name, request.path_params["run_id"], principal_of(request))
        if agent.output_type is not str and isinstance(shown_run["output"], str):  # one shape with POST /runs
            with contextlib.suppress(ValueError):
                shown_run["output"] = json.loads(shown_run["output"])
        return JSONResponse(shown_run)

    async def post_decisions(request: Request) -> Response:
        run_id = request.path_params["run_id"]
        body = await request.body()
        from_form = request.headers.get("content-type", "").startswith(FORM)
        fields = dict(parse_qsl(body.decode("utf-8", "replace"))) if from_form else {}
        csrf = fields.get("csrf", "") if from_form else request.headers.get("x-csrf-token", "")
        if request.scope["state"]["onion_needs_csrf"] and not hmac.compare_digest(
            csrf.encode(), request.scope["state"]["onion_csrf"].encode()
        ):
            raise Problem(
                403, "a decision made with the page's cookie needs the page's CSRF token: decide from the page"
            )
        principal = principal_of(request)
        check_decider(principal, deciders)
        if from_form:
            return await decide_from_page(request, run_id, fields)
        given = decisions(parse_json(body))
        if wants_sse(request):
            state = await decided(agent, run_id, given, principal)
            return sse(await resume_streamed(agent, channels, state, principal))
        try:
            result = await decide(agent, run_id, given, principal)
        except Problem:
            raise
        except CallRejected as error:  # a rejected model call or run ends the run: the decision took effect
            return JSONResponse(error_json(error), 500)
        except Exception as error:  # the resumed run failed
            return failed(error)
        return JSONResponse(result_json(result))

    async def decide_from_page(request: Request, run_id: str, fields: dict[str, str]) -> Response:
        """A decision from the page's form: it answers once the run is claimed (the run goes on in the background)
        with the page saying what was decided; a second submit says who decided it already, and when."""
        store, principal = store_of(agent), principal_of(request)
        await shown(store, agent.name, run_id, principal)  # 404 for no run, or one that is not yours
        try:
            state = await store.load(run_id)
            given = decisions(form_decisions(fields, state)) if state.paused else None
        except FormProblem as problem:
            return HTMLResponse(error_page(422, str(problem), root_of(request)), 422)
        except RunStateError:  # running: someone decided it a moment ago
            given = None
        try:
            if given is None:
                raise Problem(409, "not paused")
            state = await decided(agent, run_id, given, principal)
            await resume_streamed(agent, channels, state, principal)
        except Problem as problem:
            if problem.status != 409:
                return HTMLResponse(error_page(problem.status, problem.message, root_of(request)), problem.status)
            said = await already_decided(store, agent.name, run_id)
            return HTMLResponse(notice_page("Already decided", said, root=root_of(request)))
        return RedirectResponse(f"{root_of(request)}/?decided={run_id}", 303)

    async def post_resume(request: Request) -> Response:
        """The page's Resume button: go on with a failed run, or one whose worker stopped, in the background."""
        run_id = request.path_params["run_id"]
        fields = dict(parse_qsl((await request.body()).decode("utf-8", "replace")))
        state = request.scope["state"]
        if state["onion_needs_csrf"] and not hmac.compare_digest(
            fields.get("csrf", "").encode(), state["onion_csrf"].encode()
        ):
            raise Problem(403, "resuming with the page's cookie needs the page's CSRF token: resume from the page")
        principal = principal_of(request)
        check_decider(principal, deciders)
        await shown(store_of(agent), agent.name, run_id, principal)  # 404 for no run, or one that is not yours
        going = agent.recover(run_id, principal=principal)
        channels.keep_running(asyncio.create_task(quietly(going, run_id)))
        return RedirectResponse(f"{root_of(request)}/?resumed={run_id}", 303)

    async def get_events(request: Request) -> Response:
        run_id = request.path_params["run_id"]
        given = request.headers.get("last-event-id", "0").strip() or "0"
        if not (given.isascii() and given.isdigit()):
            raise Problem(422, f"Last-Event-ID {given!r}: give the id: of the last event received (a number)")
        store = store_of(agent)  # without one, a client that left has nothing to come back to
        run = await shown(store, agent.name, run_id, principal_of(request))  # 404: never saw it, or not yours
        after, channel = int(given), channels.get(run_id)
        if channels.store is not None and (channel is None or channel.ended):  # another process may stream it
            events, ended = await read_stored(channels.store, run_id, after, running=run["status"] == "running")
            if ended is not None:
                if not events and (ended or await nothing_more(channels.store, run_id, after) == "ended"):
                    return Response(status_code=204)  # nothing left (an id past the end too): EventSource stops
                return streamed(follow_stored(channels.store, run_id, after, heartbeat))
        if channel is not None and channel.ended and after >= channel.last:
            return Response(status_code=204)
        if channel is None:
            if run["status"] != "running":
                return Response(status_code=204)  # it ended (or waits for a decision): nothing left to send
            where = "the store keeps" if channels.store is not None else "this server process holds"
            raise Problem(
                409,
                f"{where} no events of run {run_id} (it was not streamed, or its events went after "
                f"{keep_events:.0f} s): GET /runs/{run_id} for its state",
            )
        return sse(channel, after)

    async def inbox(request: Request) -> Response:
        principal = principal_of(request)
        given = request.query_params.get("page", "1")
        number = int(given) if given.isascii() and given.isdigit() and int(given) > 0 else 1
        shown_inbox = None
        if agent.store is not None:
            decided_run = request.query_params.get("decided")
            resumed_run = request.query_params.get("resumed")
            filters = Filters.of(request.query_params)
            shown_inbox = await inbox_of(
                agent, agent.store, principal, number, decided_run or resumed_run, filters, resumed=not decided_run
            )
            shown_inbox.signed_in = request.scope["state"]["onion_signed_in"]
            shown_inbox.root = root_of(request)
        shown_page = inbox_page(shown_inbox, agent.name, request.scope["state"]["onion_csrf"])
        return HTMLResponse(shown_page, headers={"content-security-policy": CSP})

    async def get_trace(request: Request) -> Response:
        """onion's HTML trace of a run this process ran (`traces`); 404 for a run not yours, or not kept here."""
        run_id = request.path_params["run_id"]
        await shown(store_of(agent), agent.name, run_id, principal_of(request))
        traced = kept.page(run_id)
        if traced is None:
            said = (
                f"This server process keeps no trace of run {run_id}: it ran in another process, before a restart, "
                f"or more than {kept.keep} runs ago (serve(traces=N) keeps N)."
            )
            return HTMLResponse(error_page(404, said, root_of(request)), 404)
        return HTMLResponse(traced, headers={"content-security-policy": TRACE_CSP})

    async def sign_in(request: Request) -> Response:
        fields = dict(parse_qsl((await request.body()).decode("utf-8", "replace")))
        if not doors.tokens:
            return RedirectResponse(f"{root_of(request)}/", 303)
        client = request.client.host if request.client else "?"
        if doors.refused_too_often(client):
            raise Problem(429, "too many wrong tokens from this address: wait a minute before signing in again")
        try:
            cookie, _ = doors.signed_in(fields.get("token", ""))
        except ValueError:
            doors.refused_too_often(client, failed=True)
            return HTMLResponse(sign_in_page(wrong=True, root=root_of(request)), 401)
        response = RedirectResponse(f"{root_of(request)}/", 303)
        secure = request.url.scheme == "https"
        response.set_cookie(
            doors.cookie, cookie, max_age=int(SIGN_IN_HOURS * 3600), httponly=True, samesite="strict", secure=secure
        )
        return response

    async def sign_out(request: Request) -> Response:
        response = RedirectResponse(f"{root_of(request)}/", 303)
        response.delete_cookie(doors.cookie, httponly=True, samesite="strict")
        return response

    async def ag_ui(request: Request) -> Response:
        given = _agui.parse(parse_json(await request.body()))
        principal = principal_of(request)
        if given.resume:
            check_decider(principal, deciders)
        return sse(_agui.start(agent, channels, given, principal))

    async def problem(request: Request, error: Exception) -> Response:
        status, message = (error.status, error.message) if isinstance(error, Problem) else (413, str(error))
        path = request.scope["path"]
        page_asked = path in (root_of(request), f"{root_of(request)}/") or path.endswith("/trace")
        if request.headers.get("content-type", "").startswith(FORM) or page_asked:
            return HTMLResponse(error_page(status, message, root_of(request)), status)
        return JSONResponse({"error": message}, status)

    routes = [
        Route("/", inbox, methods=["GET"]),
        Route("/sign-in", sign_in, methods=["POST"]),
        Route("/sign-out", sign_out, methods=["POST"]),
        Route("/runs", post_runs, methods=["POST"]),
        Route("/runs", get_runs, methods=["GET"]),
        Route("/runs/{run_id}", get_run, methods=["GET"]),
        Route("/runs/{run_id}/decisions", post_decisions, methods=["POST"]),
        Route("/runs/{run_id}/events", get_events, methods=["GET"]),
        Route("/runs/{run_id}/resume", post_resume, methods=["POST"]),
        Route("/runs/{run_id}/trace", get_trace, methods=["GET"]),
        Route("/ag-ui", ag_ui, methods=["POST"]),
    ]
    return Starlette(
        routes=routes,
        middleware=[
            Middleware(Guard, doors=doors, max_body=max_body, allowed_hosts=allowed_hosts),
            Middleware(Traced, traces=kept),
        ],
        exception_handlers={Problem: problem, BodyTooLarge: problem},
        lifespan=kept.lifespan,
    )


async def quietly(going: Any, run_id: str) -> None:
    """Await a run resumed from the page; its failure is the run's outcome (the page shows it), logged here."""
    try:
        await going
    except Exception as error:
        logger.warning("run %s, resumed from the page, failed: %s: %s", run_id, type(error).__name__, scrub(str(error)))


def failed(error: Exception) -> JSONResponse:
    """A run that failed: 500 with its scrubbed error as JSON, logged once (scrubbed too)."""
    body = error_json(error)
    if not isinstance(error, OnionError):  # onion's own errors are the run's outcome; anything else is a fault
        logger.error("a run failed: %s: %s", body["error"], body["message"])
    return JSONResponse(body, 500)


def root_of(request: Request) -> str:
    """Where the app is mounted (`Mount("/agent", app)`: "/agent"), without a trailing slash."""
    root: str = request.scope.get("root_path", "")
    return root.rstrip("/")


def principal_of(request: Request) -> Principal | None:
    """Who is asking (`Guard` named them): None on a server without credentials."""
    principal: Principal | None = request.scope["state"]["onion_principal"]
    return principal


def check_decider(principal: Principal | None, deciders: frozenset[str] | None) -> None:
    """403 unless `principal` has one of the roles that decide (`serve(approvers=...)`), when there are such."""
    if deciders is not None and (principal is None or not principal.roles & deciders):
        who = "nobody signed in" if principal is None else f"principal {principal.id!r}"
        roles = ", ".join(sorted(deciders))
        raise Problem(403, f"deciding needs one of the roles {roles}; {who} has none of them")


def wants_sse(request: Request) -> bool:
    return "text/event-stream" in request.headers.get("accept", "")


def streamed(body: AsyncIterator[bytes], media_type: str = "text/event-stream") -> StreamingResponse:
    headers = {"cache-control": "no-cache", "x-accel-buffering": "no"}
    return StreamingResponse(body, media_type=media_type, headers=headers)
