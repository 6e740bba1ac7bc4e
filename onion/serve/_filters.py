"""Which runs the page shows: `?status=&agent=&session=&principal=`, and the small GET form that sets them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from html import escape
from typing import Any
from urllib.parse import urlencode

STATUSES = {
    "paused": "waiting for a decision",
    "running": "running",
    "resumable": "resumable (its worker stopped)",
    "failed": "failed",
    "completed": "completed",
}
"""The statuses a person may filter on, as the filter form names them."""


@dataclass(slots=True)
class Filters:
    """Which runs the page shows (`?status=&agent=&session=&principal=`): empty fields filter nothing."""

    status: str = ""
    agent: str = ""
    session: str = ""
    principal: str = ""

    @classmethod
    def of(cls, query: Mapping[str, str]) -> Filters:
        status = query.get("status", "")
        return cls(
            status if status in STATUSES else "",
            query.get("agent", "").strip(),
            query.get("session", "").strip(),
            query.get("principal", "").strip(),
        )

    def __bool__(self) -> bool:
        return bool(self.status or self.agent or self.session or self.principal)

    def query(self, **more: Any) -> str:
        """These filters (and `more`) as a query string, `?` included."""
        given = {"status": self.status, "agent": self.agent, "session": self.session, "principal": self.principal}
        given.update(more)
        return "?" + urlencode({k: v for k, v in given.items() if v not in ("", None)})

    def keeps(self, run: Mapping[str, Any], principal: str | None) -> bool:
        """Whether a run (a `summary` with its `shown_status`, and its principal's id) passes."""
        status = "resumable" if run.get("shown_status") else run["status"]
        return (
            (not self.status or status == self.status)
            and (not self.agent or run["agent"] == self.agent)
            and (not self.session or (run["session"] or "") == self.session)
            and (not self.principal or principal == self.principal)
        )


def filter_form(given: Filters, agents: list[str], root: str = "") -> str:
    """The filters (a GET form: the filtered page has its own address), each field labelled; `agents`: the
    agent filter's choices."""

    def choices(options: Mapping[str, str], chosen: str, anything: str) -> str:
        listed = [f"<option value=''>{anything}</option>"]
        listed += [
            f"<option value='{escape(value)}'{' selected' if value == chosen else ''}>{escape(text)}</option>"
            for value, text in options.items()
        ]
        return "".join(listed)

    clear = f" <a href='{escape(root)}/' id=clear-filters>Clear the filters</a>" if given else ""
    return (
        f"<form method=get action='{escape(root)}/' id=filters class=filters role=search>"
        f"<label for=filter-status>Status</label> <select name=status id=filter-status>"
        f"{choices(STATUSES, given.status, 'any status')}</select> "
        f"<label for=filter-agent>Agent</label> <select name=agent id=filter-agent>"
        f"{choices({name: name for name in agents}, given.agent, 'any agent')}</select> "
        f"<label for=filter-session>Session</label> <input type=text name=session id=filter-session "
        f"value='{escape(given.session)}'> "
        f"<label for=filter-principal>Principal</label> <input type=text name=principal id=filter-principal "
        f"value='{escape(given.principal)}'> "
        f"<button type=submit id=filter>Filter</button>{clear}</form>"
    )
