"""`Principal`: who a run is for, and who decided its paused calls (`DecisionRecord`)."""

from __future__ import annotations

import datetime
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from . import clock

Decision = Literal["approved", "edited", "rejected", "resolved"]


@dataclass(frozen=True, slots=True)
class Principal:
    """Who a run acts for (`agent.run(..., principal=)`), or who decides (`agent.resume(state, principal=)`).

    `tenant`: a run started for a principal with a tenant belongs to that tenant (docs/security.md);
    `roles` and `attrs` are for your layers and `middleware.authorize`. Frozen; `to_dict` / `from_dict`
    round-trip it as JSON.
    """

    id: str
    tenant: str | None = field(default=None, kw_only=True)
    roles: frozenset[str] = field(default=frozenset(), kw_only=True)
    attrs: Mapping[str, Any] = field(default_factory=dict, kw_only=True, hash=False)

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id:
            raise ValueError(f"Principal id must be a non-empty string, got {self.id!r}")
        if self.tenant is not None and (not isinstance(self.tenant, str) or not self.tenant):
            raise ValueError(f"Principal {self.id!r}: tenant must be a non-empty string or None, got {self.tenant!r}")
        roles = self.roles
        if isinstance(roles, str) or not isinstance(roles, Iterable) or not all(isinstance(r, str) for r in roles):
            raise ValueError(f"Principal {self.id!r}: roles must be a set of strings, got {roles!r}")
        object.__setattr__(self, "roles", frozenset(roles))
        if not isinstance(self.attrs, Mapping):
            raise ValueError(f"Principal {self.id!r}: attrs must be a mapping, got {type(self.attrs).__name__}")
        object.__setattr__(self, "attrs", dict(self.attrs))
        try:
            json.dumps(self.attrs)
        except (TypeError, ValueError) as error:
            raise ValueError(
                f"Principal {self.id!r}: attrs must be JSON data (it is journaled and kept in a RunState): {error}"
            ) from None

    def to_dict(self) -> dict[str, Any]:
        """The principal as JSON data: `{"id", "tenant", "roles" (sorted), "attrs"}`."""
        return {"id": self.id, "tenant": self.tenant, "roles": sorted(self.roles), "attrs": dict(self.attrs)}

    @classmethod
    def from_dict(cls, data: Any) -> Principal:
        """The principal `to_dict` made; `ValueError` naming what is wrong."""
        if not isinstance(data, dict) or not isinstance(data.get("id"), str):
            raise ValueError(f"a principal is an object with a string 'id', not {data!r:.80}")
        return cls(
            data["id"],
            tenant=data.get("tenant"),
            roles=frozenset(data.get("roles") or ()),
            attrs=data.get("attrs") or {},
        )

    def __repr__(self) -> str:
        tenant = "" if self.tenant is None else f" tenant={self.tenant!r}"
        roles = "" if not self.roles else f" roles={sorted(self.roles)}"
        return f"Principal({self.id!r}{tenant}{roles})"


@dataclass(frozen=True, slots=True)
class DecisionRecord:
    """One decision on a paused call, on record: who (`by`, or None), when (`at`, UTC ISO 8601), what.

    `args` are an edit's arguments, `reason` a rejection's, `result` what a person recorded for a call that may
    have run (`RunState.resolve`); `asked` the reason the call waited with (`PendingCall.reason`): what the
    person deciding was told.
    """

    call_id: str
    decision: Decision
    by: Principal | None
    at: str
    args: dict[str, Any] | None = None
    reason: str | None = None
    result: str | None = None
    asked: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """As JSON data; `by` is the principal's `{"id", "tenant"}` (its roles and attrs are not a decision's)."""
        data: dict[str, Any] = {
            "call_id": self.call_id,
            "decision": self.decision,
            "by": by_json(self.by),
            "at": self.at,
        }
        if self.args is not None:
            data["args"] = self.args
        if self.reason is not None:
            data["reason"] = self.reason
        if self.result is not None:
            data["result"] = self.result
        if self.asked is not None:
            data["asked"] = self.asked
        return data

    @classmethod
    def from_dict(cls, data: Any) -> DecisionRecord:
        """The record `to_dict` made; `ValueError` naming what is wrong."""
        if not isinstance(data, dict) or data.get("decision") not in ("approved", "edited", "rejected", "resolved"):
            raise ValueError(f"a decision record is an object with a decision, not {data!r:.80}")
        by = data.get("by")
        return cls(
            str(data["call_id"]),
            data["decision"],
            None if by is None else Principal.from_dict(by),
            str(data["at"]),
            data.get("args"),
            data.get("reason"),
            data.get("result"),
            data.get("asked"),
        )


def checked(principal: object) -> Principal | None:
    """`principal` when it is a `Principal` or None, else a `TypeError` saying what `principal=` takes."""
    if principal is None or isinstance(principal, Principal):
        return principal
    raise TypeError(
        f"principal= takes an onion.Principal (Principal('u-42', tenant='acme')) or None, not "
        f"{type(principal).__name__} {principal!r:.60}"
    )


def by_json(principal: Principal | None) -> dict[str, Any] | None:
    """Who decided, as a decision's JSON names them."""
    return None if principal is None else {"id": principal.id, "tenant": principal.tenant}


def now_utc() -> str:
    """The time now (`onion.clock`'s), UTC, ISO 8601 (a decision's `at`)."""
    moment = datetime.datetime.fromtimestamp(clock.time(), datetime.UTC)  # a workflow's time inside Temporal
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")
