"""The page for people (`GET /`): the runs, each paused run's calls with approve / edit / reject, no JavaScript.

Each pending call shows its kind (a tool call, a model call, a run); only a tool call can be edited.

Everything shown comes from the store and is escaped; arguments and
reasons are scrubbed of secrets as `python -m onion runs show` does (the
editor starts from the scrubbed arguments: an edit replaces them whole).
"""

from __future__ import annotations

import json
from html import escape
from typing import Any

STYLE = """body{font:15px system-ui,sans-serif;margin:2em;max-width:70em;color:#222}
table{border-collapse:collapse;width:100%}td,th{padding:.3em .6em;border-bottom:1px solid #ddd;text-align:left}
.paused{background:#fff8e0;padding:1em;margin:1em 0;border:1px solid #e0c060;border-radius:6px}
textarea{width:100%;font:13px monospace}pre{background:#f4f4f4;padding:.5em;white-space:pre-wrap}
.error{color:#a00}"""


def page(title: str, body: str) -> str:
    return (
        f"<!doctype html><html lang=en><head><meta charset=utf-8><title>{escape(title)}</title>"
        f"<style>{STYLE}</style></head><body>{body}</body></html>"
    )


def sign_in_page() -> str:
    """The 401 answer of `GET /` with a token: one field, nothing of the app's data."""
    form = (
        "<h1>Sign in</h1><form method=post action=/sign-in>"
        "<label>Token <input type=password name=token id=token autofocus></label> "
        "<button type=submit id=sign-in>Sign in</button></form>"
    )
    return page("Sign in", form)


def error_page(status: int, message: str) -> str:
    return page("Error", f"<h1>{status}</h1><p class=error id=error>{escape(message)}</p><p><a href=/>Back</a></p>")


def inbox_page(agent: str, runs: list[dict[str, Any]] | None, csrf: str) -> str:
    """The runs (`None`: the agent has no store) and a decision form for each paused run."""
    parts = [f"<h1>Runs of {escape(agent)}</h1>"]
    if runs is None:
        parts.append(
            "<p id=no-store>This agent has no store: runs and decisions need <code>Agent(store=...)</code>.</p>"
        )
        return page("Runs", "".join(parts))
    parts += [paused_form(run, csrf) for run in runs if run["status"] == "paused"]
    rows = "".join(
        f"<tr id='row-{escape(r['run_id'])}'><td>{escape(r['run_id'])}</td><td class=status>{escape(r['status'])}</td>"
        f"<td>{len(r['pending'])}</td><td>{escape(r['session'] or '')}</td></tr>"
        for r in runs
    )
    parts.append(f"<table><tr><th>run</th><th>status</th><th>pending</th><th>session</th></tr>{rows}</table>")
    if not runs:
        parts.append("<p>No runs yet.</p>")
    return page("Runs", "".join(parts))


KINDS = {"tool": "tool call", "model": "model call", "run": "run"}
"""How the page names a pending call's kind."""


def paused_form(run: dict[str, Any], csrf: str) -> str:
    from onion.scrub import scrub, scrub_value

    run_id = escape(run["run_id"])
    calls = []
    for call in run["pending"]:
        key, kind = escape(call["id"]), call.get("kind", "tool")
        editable = kind == "tool"  # a paused model call or run has no arguments: the state refuses an edit
        args = escape(json.dumps(scrub_value(call["args"]), indent=2, ensure_ascii=False))
        edit = (
            f"<label><input type=radio name='decision:{key}' value=edit id='edit-{key}'> approve with these arguments"
            f"</label> "
            if editable
            else ""
        )
        shown = f"<textarea name='args:{key}' id='args-{key}' rows=4>{args}</textarea>" if editable else ""
        calls.append(
            f"<fieldset><legend><span class=kind id='kind-{key}'>{escape(KINDS.get(kind, kind))}</span> "
            f"<b>{escape(call['name'])}</b> ({key}): {escape(scrub(call['reason']))}</legend>"
            f"<label><input type=radio name='decision:{key}' value=approve checked> approve</label> {edit}"
            f"<label><input type=radio name='decision:{key}' value=reject id='reject-{key}'> reject</label>{shown}"
            f"<label>Reason to reject <input name='reason:{key}' id='reason-{key}'></label></fieldset>"
        )
    return (
        f"<form class=paused id='run-{run_id}' method=post action='/runs/{run_id}/decisions'>"
        f"<h2>{run_id} waits</h2><input type=hidden name=csrf value='{escape(csrf)}'>{''.join(calls)}"
        f"<p><button type=submit id='decide-{run_id}'>Decide</button></p></form>"
    )


def form_decisions(fields: dict[str, str]) -> dict[str, Any]:
    """The page's form as a decisions body: `decision:<id>` approve / edit / reject, `args:<id>`, `reason:<id>`."""
    body: dict[str, Any] = {"approve": [], "reject": {}, "edit": {}}
    for name, value in fields.items():
        if not name.startswith("decision:"):
            continue
        call_id = name.removeprefix("decision:")
        if value == "approve":
            body["approve"].append(call_id)
        elif value == "reject":
            body["reject"][call_id] = fields.get(f"reason:{call_id}") or "rejected by a person"
        elif value == "edit":
            try:
                body["edit"][call_id] = json.loads(fields.get(f"args:{call_id}", ""))
            except ValueError as error:
                from ._bodies import Problem

                raise Problem(422, f"the arguments of {call_id} are not valid JSON ({error}): fix them") from None
    return body
