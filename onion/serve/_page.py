"""The page for people (`GET /`): waiting runs first, each call with its context, and decisions made safely.

Nothing fetched from outside: plain HTML forms, and one inline script, allowed
by its hash (`CSP`), that reloads the page every few seconds until the person
starts deciding (types, chooses, or has a field focused); without scripts, a
page that waits on a run refreshes itself with a `<meta>` refresh. Everything shown
comes from the store and is escaped. A card shows what a person needs to
decide: the run's input, the conversation so far (collapsed), the tool's
description, the reason, the run's age, agent, session and principal, and its
decisions so far. Arguments are shown per field as they are (the approver
sees the recipient), but secrets, which are shown as "a secret, N characters"
and never sent back: an edit is merged over the real arguments, field by
field. Nothing is pre-selected: a call left without a choice is named.
"""

from __future__ import annotations

import base64
import hashlib
import json
import time
from dataclasses import dataclass, field
from html import escape
from typing import Any

import pydantic_core

from onion import Message, RunState, untrusted_sources
from onion.scrub import SECRET_NAME, SECRETS, scrub

from ._filters import Filters, filter_form

STYLE = """body{font:15px system-ui,sans-serif;margin:1em auto;max-width:70em;padding:0 1em;color:#222}
table{border-collapse:collapse;width:100%}td,th{padding:.3em .6em;border-bottom:1px solid #ddd;text-align:left}
.paused{background:#fff8e0;padding:1em;margin:1em 0;border:1px solid #e0c060;border-radius:6px}
.notice{background:#e8f4e8;padding:1em;border:1px solid #8c8;border-radius:6px}
fieldset{border:1px solid #ccc;border-radius:4px;margin:.6em 0;min-width:0}h1,h2,legend,li,p{overflow-wrap:anywhere}
textarea,input[type=text]{width:100%;font:13px monospace;box-sizing:border-box}
pre{background:#f4f4f4;padding:.5em;white-space:pre-wrap;word-break:break-word}.meta{color:#555;font-size:13px}
.error{color:#a00}.secret{font-style:italic;color:#555}.untrusted{border-left:4px solid #c60;padding-left:.6em}
:focus{outline:3px solid #36c}button{font-size:15px;margin-right:.5em}.wide{overflow-x:auto}
.filters{margin:.6em 0}.filters input{width:10em}.filters a{white-space:nowrap}
.choice{white-space:nowrap;margin-right:.8em}
@media (max-width:600px){body{font-size:16px}button{margin:.3em .3em .3em 0;padding:.4em .8em}
.choice{display:block;padding:.3em 0}}"""
SCRIPT = """let touched = false;
addEventListener("input", () => { touched = true; });
addEventListener("change", () => { touched = true; });
setInterval(() => {
  const busy = document.activeElement && document.activeElement !== document.body;
  if (!touched && !busy) location.reload();
}, 1000 * Number(document.body.dataset.refresh));"""
"""The page's one script: reload every `data-refresh` seconds, never once the person started deciding."""
CSP = (
    "default-src 'none'; style-src 'unsafe-inline'; script-src "
    f"'sha256-{base64.b64encode(hashlib.sha256(SCRIPT.encode()).digest()).decode()}'; form-action 'self'; "
    "frame-ancestors 'none'; base-uri 'none'"
)
"""The runs page's policy: its own script (by its hash) may run; nothing is fetched, no other site frames it."""
REFRESH = 10
"""Seconds between reloads of the runs page (2 while a decided run runs)."""
PER_PAGE = 20
KINDS = {"tool": "tool call", "model": "model call", "budget": "budget", "run": "run", "in_doubt": "may have run"}
"""How the page names a pending call's kind."""


def page(title: str, body: str, *, refresh: int | None = None, reload: int | None = None) -> str:
    """A whole page; `refresh`: a `<meta>` refresh (inside `<noscript>` with `reload`), `reload`: seconds between
    the script's reloads (a page sent with `CSP`)."""
    meta = "" if refresh is None else f"<meta http-equiv=refresh content={refresh}>"
    if reload is not None and meta:
        meta = f"<noscript>{meta}</noscript>"
    script = "" if reload is None else f"<script>{SCRIPT}</script>"
    where = "" if reload is None else f" data-refresh={reload}"
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        "<meta name=viewport content='width=device-width, initial-scale=1'>"
        f"{meta}<title>{escape(title)}</title><style>{STYLE}</style></head>"
        f"<body{where}>{body}{script}</body></html>"
    )


def sign_in_page(wrong: bool = False, root: str = "") -> str:
    """The 401 answer of `GET /` with tokens: one field, nothing of the app's data (`wrong`: say so)."""
    said = "<p class=error id=wrong role=alert>That token is not one of this server's: try again.</p>" if wrong else ""
    form = (
        f"<h1>Sign in</h1>{said}<form method=post action='{escape(root)}/sign-in'>"
        "<label for=token>Token</label> <input type=password name=token id=token autofocus> "
        "<button type=submit id=sign-in>Sign in</button></form>"
    )
    return page("Sign in", form)


def error_page(status: int, message: str, root: str = "") -> str:
    title = "Nothing was decided" if status < 500 else "Something failed"
    said = f"<p class=error id=error role=alert>{escape(message)}</p>"
    body = f"<h1>{title}</h1>{said}<p><a href='{escape(root)}/'>Back to the runs</a></p>"
    return page(title, body)


def notice_page(title: str, message: str, *, refresh: int | None = None, root: str = "") -> str:
    body = f"<h1>{escape(title)}</h1><p class=notice id=notice role=status>{escape(message)}</p>"
    return page(title, body + f"<p><a href='{escape(root)}/'>Back to the runs</a></p>", refresh=refresh)


@dataclass(slots=True)
class Card:
    """A paused run as the page shows it: its record's summary, its state, and its agent's tools' descriptions."""

    run: dict[str, Any]
    state: RunState
    tools: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class Inbox:
    """What `GET /` shows: the cards of one page of waiting runs, every run's row, and where the pages are."""

    agent: str
    cards: list[Card]
    runs: list[dict[str, Any]]
    waiting: int
    page: int = 1
    pages: int = 1
    notice: str | None = None
    running: bool = False
    signed_in: bool = False
    root: str = ""
    """Where the app is mounted (`root_path`): every link and form starts with it."""
    filters: Filters = field(default_factory=Filters)
    agents: list[str] = field(default_factory=list)
    """The agents whose runs the page may show (the filter's choices)."""
    every_waiting: int = 0
    """How many runs wait, filters or not."""


def inbox_page(inbox: Inbox | None, agent: str, csrf: str) -> str:
    """The runs (`None`: the agent has no store): waiting ones first, each with its decision form, then all."""
    parts = [f"<h1>Runs of {escape(agent)}</h1>"]
    if inbox is None:
        parts.append(
            "<p id=no-store>This agent has no store: runs and decisions need <code>Agent(store=...)</code>.</p>"
        )
        return page("Runs", "".join(parts))
    if inbox.signed_in:
        parts.append(
            f"<form method=post action='{escape(inbox.root)}/sign-out'>"
            "<button type=submit id=sign-out>Sign out</button></form>"
        )
    if inbox.notice:
        parts.append(f"<p class=notice id=notice role=status>{escape(inbox.notice)}</p>")
    waiting = f"{inbox.waiting} run{'s' if inbox.waiting != 1 else ''} waiting for a decision"
    if inbox.filters:
        waiting += f" (of {inbox.every_waiting} in all)"
    parts.append(f"<p id=waiting role=status>{waiting}</p>{filter_form(inbox.filters, inbox.agents, inbox.root)}")
    parts += [paused_form(card, csrf, inbox.root) for card in inbox.cards]
    if inbox.pages > 1:
        current = " aria-current=page"
        links = " ".join(
            f"<a href='{escape(inbox.root)}/{escape(inbox.filters.query(page=n))}' id='page-{n}'"
            f"{current if n == inbox.page else ''}>{n}</a>"
            for n in range(1, inbox.pages + 1)
        )
        parts.append(f"<nav aria-label='pages of waiting runs'>Pages: {links}</nav>")
    rows = "".join(row(r, csrf, inbox.root) for r in inbox.runs)
    header = (
        "<tr><th>run</th><th>status</th><th>pending</th><th>session</th><th>tenant</th><th>updated</th>"
        "<th>trace</th><th></th></tr>"
    )
    parts.append(f"<h2>All runs</h2><div class=wide><table>{header}{rows}</table></div>")
    if not inbox.runs:
        parts.append("<p>No runs yet.</p>" if not inbox.filters else "<p>No run passes these filters.</p>")
    title = f"({inbox.every_waiting}) Runs" if inbox.every_waiting else "Runs"
    return page(title, "".join(parts), refresh=2 if inbox.running else None, reload=2 if inbox.running else REFRESH)


def row(run: dict[str, Any], csrf: str = "", root: str = "") -> str:
    """One run in the table; a failed run, or one whose worker stopped, with a Resume button (as
    `python -m onion runs resume` goes on with it)."""
    run_id = escape(run["run_id"])
    status = escape(run.get("shown_status") or run["status"])
    if run.get("error"):
        status += f"<br><small class=error id='error-{run_id}'>{escape(run['error'])}</small>"
    resume = ""
    if run["status"] == "failed" or run.get("shown_status"):
        resume = (
            f"<form method=post action='{escape(root)}/runs/{run_id}/resume'>"
            f"<input type=hidden name=csrf value='{escape(csrf)}'>"
            f"<button type=submit id='resume-{run_id}' aria-label='Resume {run_id}'>Resume</button></form>"
        )
    trace = (
        f"<a href='{escape(root)}/runs/{run_id}/trace' id='row-trace-{run_id}' aria-label='trace of {run_id}'>trace</a>"
    )
    return (
        f"<tr id='row-{run_id}'><td>{run_id}</td><td class=status>{status}</td><td>{len(run['pending'])}</td>"
        f"<td>{escape(run['session'] or '')}</td><td>{escape(run.get('tenant') or '')}</td>"
        f"<td>{escape(ago(run['updated']))}</td><td>{trace}</td><td>{resume}</td></tr>"
    )


def ago(when: float, now: float | None = None) -> str:
    seconds = max(0, int((time.time() if now is None else now) - when))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit} ago"
    return f"{seconds}s ago"


def paused_form(card: Card, csrf: str, root: str = "") -> str:
    """One waiting run: its context, then a fieldset per pending call with approve / edit / reject (none
    chosen), and buttons to decide, or to approve or reject every call left without a choice."""
    run, state = card.run, card.state
    run_id = escape(run["run_id"])
    calls = "".join(call_fieldset(call, card.tools.get(call.name, ""), run["run_id"]) for call in state.pending)
    return (
        f"<form class=paused id='run-{run_id}' method=post action='{escape(root)}/runs/{run_id}/decisions'>"
        f"<h2>{run_id} waits</h2>{context(card)}"
        f"<p><a href='{escape(root)}/runs/{run_id}/trace' id='trace-{run_id}'>The trace of {run_id}</a></p>"
        f"{untrusted_before(state)}"
        f"<input type=hidden name=csrf value='{escape(csrf)}'>{calls}"
        f"<p><button type=submit id='decide-{run_id}' aria-label='Decide {run_id}'>Decide</button>"
        f"<button type=submit name=all value=approve id='approve-all-{run_id}' "
        f"aria-label='Approve the rest of {run_id}'>Approve the rest</button>"
        f"<button type=submit name=all value=reject id='reject-all-{run_id}' "
        f"aria-label='Reject the rest of {run_id}'>Reject the rest</button></p></form>"
    )


def context(card: Card) -> str:
    """What the run asked and did so far, who it is for, and what was decided before."""
    run, state = card.run, card.state
    who = "nobody" if state.principal is None else state.principal.id
    if state.principal is not None and state.principal.tenant:
        who += f" ({state.principal.tenant})"
    facts = f"agent {run['agent']} · for {who} · started {ago(run['created'])}"
    if run["session"]:
        facts += f" · session {run['session']}"
    parts = [f"<p class=meta>{escape(facts)}</p>", f"<p><b>Asked:</b> {escape(input_text(state))}</p>"]
    history = [m for m in [*state.messages, *state.answered] if m.role in ("assistant", "tool")]
    if history:
        lines = "".join(f"<li>{escape(message_line(m))}</li>" for m in history)
        steps = f"{len(history)} step{'s' if len(history) != 1 else ''}"
        parts.append(f"<details><summary>The conversation so far ({steps})</summary><ul>{lines}</ul></details>")
    if state.decisions:
        done = "".join(
            f"<li>{escape(d.call_id)}: {escape(d.decision)} by {escape(d.by.id if d.by else 'nobody')} "
            f"at {escape(d.at)}</li>"
            for d in state.decisions
        )
        parts.append(f"<details><summary>Decided before ({len(state.decisions)})</summary><ul>{done}</ul></details>")
    return "".join(parts)


def untrusted_before(state: RunState) -> str:
    """Which untrusted content (`Message.untrusted`) the waiting calls follow, for the person deciding: a call
    that `contain` paused says in its reason what it carries from there."""
    sources = untrusted_sources([*state.messages, *state.answered])
    if not sources:
        return ""
    lines = "".join(f"<li>{escape(scrub(str(source), SECRETS))}</li>" for source in sources)
    heading = "<b>After untrusted content</b> (not written by the user):"
    return f"<div class=untrusted id='untrusted-{escape(state.run_id)}'>{heading}<ul>{lines}</ul></div>"


def input_text(state: RunState) -> str:
    given = state.input
    if isinstance(given, str):
        return given
    if isinstance(given, Message):
        return given.text
    if isinstance(given, list) and given:
        return given[-1].text
    first = next((m for m in state.messages if m.role == "user"), None)
    return "" if first is None else first.text


def message_line(message: Message) -> str:
    text = scrub(message.text, SECRETS)
    text = text if len(text) <= 300 else text[:300] + "…"
    if message.role == "tool":
        marks = (" (error)" if message.is_error else "") + (" (untrusted)" if message.untrusted else "")
        return f"result of {message.tool_call_id}{marks}: {text}"
    asked = ", ".join(f"{c.name} ({c.id})" for c in message.tool_calls)
    return f"model: {text}" + (f" → asked for {asked}" if asked else "")


def call_fieldset(call: Any, description: str, run_id: str = "") -> str:
    """One pending call; its elements' ids are `<what>-<run id>-<call id>` (two runs may share a call id)."""
    key, kind, ident = escape(call.id), call.kind, escape(f"{run_id}-{call.id}")
    editable = kind == "tool"  # a paused model call or run has no arguments: the state refuses an edit
    name = f"decision:{key}"
    offered = [("approve", "approve"), ("edit", "approve with my changes")] if editable else [("approve", "approve")]
    choices = [
        f"<label class=choice><input type=radio name='{name}' value={value} id='{value}-{ident}'> {said}</label>"
        for value, said in [*offered, ("reject", "reject")]
    ]
    about = f"<p class=meta id='about-{ident}'>{escape(description)}</p>" if description else ""
    fields = "".join(arg_field(key, arg, value, ident) for arg, value in call.args.items()) if editable else ""
    return (
        f"<fieldset><legend><span class=kind id='kind-{ident}'>{escape(KINDS.get(kind, kind))}</span> "
        f"<b>{escape(call.name)}</b> ({key}): {escape(scrub(call.reason, SECRETS))}</legend>{about}{fields}"
        f"<p>{' '.join(choices)}</p>"
        f"<label for='reason-{ident}'>Reason to reject</label> "
        f"<input type=text name='reason:{key}' id='reason-{ident}'>"
        "</fieldset>"
    )


def is_secret(name: str, value: Any) -> bool:
    """A field a person is shown only the size of: a secret's name, or a secret in the text."""
    if SECRET_NAME.search(name):
        return True
    return isinstance(value, str) and scrub(value, SECRETS) != value


def arg_field(key: str, arg: str, value: Any, where: str = "") -> str:
    """One argument, readable and editable: text as text (wrapped), other values as JSON, a secret by its size."""
    ident = escape(f"arg-{where or key}-{arg}")
    label = f"<label for='{ident}'><b>{escape(arg)}</b></label>"
    field_name = escape(f"field:{key}:{arg}")
    if is_secret(arg, value):
        size = len(value) if isinstance(value, str) else len(json.dumps(value))
        return (
            f"<p>{label} <span class=secret id='{ident}-secret'>a secret, {size} characters</span> "
            f"<input type=text name='{field_name}' id='{ident}' placeholder='unchanged' autocomplete=off></p>"
        )
    if isinstance(value, str):
        rows = min(8, value.count("\n") + 1 + len(value) // 90)
        return f"<p>{label}<textarea name='{field_name}' id='{ident}' rows={rows}>{escape(value)}</textarea></p>"
    shown = escape(json.dumps(value, ensure_ascii=False))
    return f"<p>{label} <input type=text name='{field_name}' id='{ident}' value='{shown}'></p>"


def form_decisions(fields: dict[str, str], state: RunState) -> dict[str, Any]:
    """The page's form as a decisions body, against the paused `state` it decides: `decision:<id>` approve /
    edit / reject (`all`: approve or reject every call left without a choice); an edit is merged over the
    call's real arguments field by field (a secret left empty stays as it was). `FormProblem` in plain words
    for a field that does not read, or a call left without a choice."""
    body: dict[str, Any] = {"approve": [], "reject": {}, "edit": {}}
    rest = fields.get("all")
    undecided = []
    for call in state.pending:
        choice = fields.get(f"decision:{call.id}") or rest
        if choice == "approve":
            body["approve"].append(call.id)
        elif choice == "reject":
            body["reject"][call.id] = fields.get(f"reason:{call.id}") or "rejected by a person"
        elif choice == "edit":
            body["edit"][call.id] = merged(call.id, call.args, fields)
        else:
            undecided.append(f"{call.name} ({call.id})")
    if undecided:
        raise FormProblem(f"Choose approve, approve with my changes or reject for {', '.join(undecided)}.")
    return body


def merged(call_id: str, args: dict[str, Any], fields: dict[str, str]) -> dict[str, Any]:
    edited = dict(args)
    for arg, value in args.items():
        given = fields.get(f"field:{call_id}:{arg}")
        if given is None or (given == "" and is_secret(arg, value)):
            continue
        if isinstance(value, str):
            edited[arg] = given
            continue
        try:
            edited[arg] = pydantic_core.from_json(given)  # too deep is a ValueError too, never a RecursionError
        except ValueError:
            raise FormProblem(
                f"The field {arg} of {call_id} is not a value this page can read: write a number, true or false, "
                f"or JSON such as [1, 2] — it was {given!r}."
            ) from None
    return edited


class FormProblem(Exception):
    """A form that cannot be read as decisions; the message says, in plain words, what to change."""
