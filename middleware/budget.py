"""`budget`: stop a run, or what a session, principal, tenant or agent spends, at a limit; ask a person first."""

from __future__ import annotations

import asyncio
import datetime
import inspect
import json
import time
from collections.abc import Callable, Mapping
from typing import Any

from onion import Model, ModelCall, ModelNext, ModelResponse, Run, Usage
from onion.errors import BudgetExceeded as BudgetExceeded
from onion.prices import CACHE_RATES as CACHE_RATES
from onion.prices import PRICES
from onion.prices import cost_at as _cost_at
from onion.prices import rates as _rates
from onion.stores import MemorySpendStore, SpendStore

from ._allowance import Allowances, Where

SEEN_AT_MOST = 4096
"""The most allowances a layer remembers the last known spending of (beyond that it forgets them all)."""

NOTHING = (0.0, 0)
"""The spending a per-run budget's `Charges` start from (it counts in the run, not in them)."""

SpendNow = Callable[[str, float, int, float, float | None, float | None], tuple[float, int]]
"""A store's `spend_now(key, cost, tokens, now, window, ttl)`: `SpendStore.spend` answered without awaiting."""


class budget:
    """Raise `BudgetExceeded` once tokens pass `max_tokens` or cost passes `max_cost` (USD); pause at `soft`.

    `per` is what shares one allowance: `"run"` (each run its own), `"session"`, `"principal"`, `"tenant"`
    or `"agent"`, counted in `store` (a `SpendStore`: `MemorySpendStore()` by default; `SQLiteStore` and
    `RedisStore` share it across processes) over `window` (`None`: for ever; `"day"`, `"month"`: the UTC
    calendar one, by the store's `clock`; a `timedelta`: rolling). `soft` (a fraction of the limit under 1,
    or an amount) pauses each run once for a person when the spending reaches it (a pending call of kind
    `"budget"`: approved, the run goes on to the hard line; rejected, it ends with `BudgetExceeded`).

    Every response a model produced counts, wherever `budget` sits (`ModelCall.on_response`): each attempt
    of a `retry` inside, and a response a layer inside rejects, count too; the first response that goes over
    stops the run there, not added to the history (its usage is in `run.usage`). A call is not sent once the
    allowance is over. A model whose price `prices` (model name prefix -> USD per million tokens, merged
    over `onion.prices.PRICES`) does not give is an `OnionError` when the layer is added to its agent
    (`check_model`), else before its first call is sent. A run's own cost
    is counted in `run.private` (under `key`) and reported in `run.state["cost"]`. The overspend bound of a
    shared allowance: docs/middleware-library.md ("budget"). Not usable bare.
    """

    __slots__ = (
        "_allowances",
        "_clock",
        "_hard_cost",
        "_hard_tokens",
        "_here",
        "_line_cost",
        "_line_tokens",
        "_model",
        "_rates",
        "_seen",
        "_soft_cost",
        "_soft_key",
        "_soft_tokens",
        "key",
        "max_cost",
        "max_tokens",
        "per",
        "prices",
        "soft",
        "store",
        "window",
    )

    nondeterministic: str | None = None
    """A per-run budget decides the same in a replay; a shared one (`shared_budget`) says why it does not."""

    def __new__(cls, *args: Any, per: str = "run", **options: Any) -> budget:
        """A `shared_budget` for an allowance other runs share (`per` other than `"run"`)."""
        return super().__new__(shared_budget if cls is budget and per != "run" else cls)

    def __init__(
        self,
        max_tokens: int | None = None,
        max_cost: float | None = None,
        *,
        prices: Mapping[str, tuple[float, ...]] | None = None,
        per: str = "run",
        window: str | datetime.timedelta | None = None,
        soft: float | None = None,
        store: SpendStore | None = None,
    ) -> None:
        if max_tokens is None and max_cost is None:
            raise TypeError("budget needs a limit, e.g. budget(max_tokens=100_000) or budget(max_cost=0.50)")
        self.max_tokens, self.max_cost, self.per, self.window, self.soft = max_tokens, max_cost, per, window, soft
        self._allowances = Allowances(per, window)
        self.prices: dict[str, tuple[float, ...]] = {**PRICES, **(prices or {})}
        bounds: list[Any] = [max_tokens, max_cost, *([sorted(prices.items())] if prices else [])]
        if per != "run":
            bounds.append(self._allowances.tag())
        self.key = "budget:" + json.dumps(bounds, separators=(",", ":"))
        """Where a run's own cost so far lives in `run.private`: one entry per configuration, the same in every
        process (a run resumed or recovered elsewhere goes on counting)."""
        self._soft_key = self.key + ":soft"
        self._soft_cost, self._soft_tokens = _soft_lines(soft, max_cost, max_tokens)
        inf = float("inf")
        self._hard_cost = inf if max_cost is None else max_cost
        self._hard_tokens = inf if max_tokens is None else max_tokens
        self._line_cost = min(self._soft_cost, self._hard_cost)  # the first line spending can reach
        self._line_tokens = min(self._soft_tokens, self._hard_tokens)
        if store is not None and per == "run":
            raise ValueError("budget: per='run' counts in the run itself; store= is for a shared allowance (per=)")
        if store is not None and not isinstance(store, SpendStore):
            raise TypeError(f"budget: store must count spending (an onion.stores.SpendStore), not {store!r}")
        self.store: SpendStore = store if store is not None else MemorySpendStore()
        clock = getattr(store, "clock", None)
        self._clock: Callable[[], float] = clock if callable(clock) else time.time
        self._seen: dict[str, tuple[float, int]] = {}
        self._rates: dict[str, tuple[float, float, float, float]] = {}  # by model name, as `rates` answers
        self._model: object = None  # the model `check_model` last passed
        self._here: SpendNow | None = getattr(self.store, "spend_now", None)

    def check_model(self, model: Model) -> None:
        """Raise `OnionError` naming how to give a price when `max_cost` needs one `model` lacks: called when the
        layer is added to an agent (with the agent's model), and before a call to a model it has not seen."""
        if self.max_cost is not None:
            self.rates(str(getattr(model, "name", model)))
        self._model = model

    async def wrap_model(self, call: ModelCall, call_next: ModelNext) -> ModelResponse:
        run = call.run
        if call.model is not self._model:
            self.check_model(call.model)  # no price: an error before the call is sent
        spent = run.private.get(self.key, 0.0), run.usage.total_tokens
        if spent[0] >= self._line_cost or spent[1] >= self._line_tokens:
            paused = self._at_line(call, spent, None)
            if paused is not None:
                return paused
        charges = Charges(self, call, NOTHING, None)
        call.on_response(charges)
        try:
            response = await call_next(call)
        finally:
            charges.closed = True
        if charges.usages is None or charges.missed(response):  # made by a layer inside, not by a model
            self._charge(charges, response, False)
        return response

    def _at_line(self, call: ModelCall, spent: tuple[float, int], where: Where | None) -> ModelResponse | None:
        """At or past the first line: raise past the hard one; the pause at the soft one, unless a person let this
        run past it."""
        if spent[0] > self._hard_cost or spent[1] > self._hard_tokens:
            self._check(call.run, spent, where, call.run.usage)
        if spent[0] >= self._soft_cost or spent[1] >= self._soft_tokens:
            return self._soft_pause(call, spent, where)
        return None

    __signature__ = inspect.Signature(list(inspect.signature(__init__).parameters.values())[1:])
    """What `help(budget)` and the docs show: `__init__`'s parameters, not `__new__`'s (`*args, per, **options`)."""

    def _charge(self, charges: Charges, response: ModelResponse, counted: bool) -> None:
        """Add `response`'s cost to the run's (and to a shared allowance: `_add`), then raise if the allowance is
        over: the run's own (its usage with this response's, `counted` there already or not), or the allowance's."""
        run, usage = charges.run, response.usage
        private = run.private
        cost: float = private.get(self.key, 0.0)
        priced = 0.0
        if self.max_cost is not None and (usage.input_tokens or usage.output_tokens):
            name = response.model or str(getattr(charges.model, "name", charges.model))
            found = self._rates.get(name)
            priced = _cost_at(self.rates(name) if found is None else found, usage)
            cost += priced
            private[self.key] = run.state["cost"] = cost
        tokens = usage.input_tokens + usage.output_tokens
        where = charges.where
        if where is None:
            spent = cost, run.usage.total_tokens + (0 if counted else tokens)
        else:
            spent = self._add(charges, where, priced, tokens)
        if spent[0] > self._hard_cost or spent[1] > self._hard_tokens:
            self._over(run, spent, where, usage, counted)

    def _add(self, charges: Charges, where: Where, cost: float, tokens: int) -> tuple[float, int]:
        """Add one response's `cost` and `tokens` to the allowance; its spending: the total a store in this process
        answers, else what the worker knew plus this call's charges.

        To a store elsewhere the addition is sent at once and its answer waited for in `shared_budget.wrap_model`:
        on Redis it travels in the same round trip as what the layers between the model and `budget` send on the
        way out (`rate_limit`'s correction)."""
        charges.cost += cost
        charges.tokens += tokens
        here = self._here
        if here is not None and (cost or tokens):  # answered at once: nothing comes late
            now = self._clock()
            ttl = None if where.expires is None else where.expires - now
            spent = charges.heard = self._seen[where.key] = here(where.key, cost, tokens, now, where.rolling, ttl)
            return spent
        if cost or tokens:
            sent = asyncio.get_running_loop().create_task(self._spend(where, cost, tokens))
            if charges.sending is None:
                charges.sending = [sent]
            else:
                charges.sending.append(sent)
        return charges.spent[0] + charges.cost, charges.spent[1] + charges.tokens

    async def _spend(self, where: Where, cost: float, tokens: int) -> tuple[float, int]:
        """Add to the allowance in the store (nothing: read it); its totals, remembered as the last known."""
        now = self._clock()
        ttl = None if where.expires is None else where.expires - now
        spent = await self.store.spend(where.key, cost, tokens, now=now, window=where.rolling, ttl=ttl)
        return self._heard(where, spent)

    def _heard(self, where: Where, spent: tuple[float, int]) -> tuple[float, int]:
        """Remember `spent`, the store's answer, as the allowance's last known spending; `spent`."""
        seen = self._seen
        known = seen.get(where.key)
        if known is None:
            if len(seen) >= SEEN_AT_MOST:
                seen.clear()
            seen[where.key] = spent
        elif where.rolling is not None or (spent[0] >= known[0] and spent[1] >= known[1]):
            seen[where.key] = spent
        else:  # a reply that came late: within a calendar window the spending only grows
            seen[where.key] = max(known[0], spent[0]), max(known[1], spent[1])
        return spent

    def _stops(self, run: Run, spent: tuple[float, int], where: Where) -> bool:
        """Whether `spent` would stop a call of `run`, or pause it at a soft line it was not let past."""
        cost, tokens = spent
        if cost > self._hard_cost or tokens > self._hard_tokens:
            return True
        soft = cost >= self._soft_cost or tokens >= self._soft_tokens
        return soft and run.private.get(self._soft_key) != f"approved {where.key}"

    def _over(self, run: Run, spent: tuple[float, int], where: Where | None, usage: Usage, counted: bool) -> None:
        """Raise `BudgetExceeded` for `spent`, the run's usage first made to hold `usage` (unless `counted`)."""
        if not counted:
            run.usage.add(usage)
        self._check(run, spent, where, run.usage)

    def _check(self, run: Run, spent: tuple[float, int], where: Where | None, total: Usage) -> None:
        """Raise `BudgetExceeded` if `spent` (cost, tokens) is over a limit; `total` is the run's usage."""
        cost, tokens = spent
        over = []
        if self.max_tokens is not None and tokens > self.max_tokens:
            over.append(f"{tokens} tokens > max_tokens={self.max_tokens}")
        if self.max_cost is not None and cost > self.max_cost:
            over.append(f"${cost:.6f} > max_cost=${self.max_cost}")
        if not over:
            return
        usage = Usage() + total
        mine = run.private.get(self.key, 0.0)
        if where is None:
            raise BudgetExceeded(
                f"run {run.id} went over its budget: {'; '.join(over)}", usage=usage, cost=cost, scope="run"
            )
        shown = f"{where.scope}, {where.window}" if where.window else where.scope
        raise BudgetExceeded(
            f"run {run.id} stopped: the budget of {shown} is spent: {'; '.join(over)}",
            usage=usage,
            cost=mine,
            scope=where.scope,
            window=where.window,
            spent=cost if self.max_cost is not None else tokens,
        )

    def _soft_pause(self, call: ModelCall, spent: tuple[float, int], where: Where | None) -> ModelResponse | None:
        """Pause `call` for a person the first time this run's allowance reached the soft line (kind `"budget"`);
        a call a person approved goes on, and the run is not asked again for that allowance."""
        cost, tokens = spent
        reached = []
        if self.max_cost is not None and cost >= self._soft_cost:
            reached.append(f"${cost:.6f} of max_cost=${self.max_cost} (soft line ${self._soft_cost:g})")
        if self.max_tokens is not None and tokens >= self._soft_tokens:
            reached.append(f"{tokens} of max_tokens={self.max_tokens} tokens (soft line {self._soft_tokens:g})")
        if not reached:
            return None
        run = call.run
        allowance = "run" if where is None else where.key
        asked = run.private.get(self._soft_key)
        if asked == f"approved {allowance}":
            return None
        if call.approved and asked == f"asked {allowance}":
            run.private[self._soft_key] = f"approved {allowance}"
            return None
        run.private[self._soft_key] = f"asked {allowance}"
        whose = "this run" if where is None else where.scope + (f", {where.window}" if where.window else "")
        return call.pause(f"the budget of {whose} reached its soft line: spent {'; '.join(reached)}", kind="budget")

    def price(self, model: str) -> tuple[float, float]:
        """USD per million (input, output) tokens for `model` ("provider:" prefixes ignored)."""
        rates = self.rates(model)
        return rates[0], rates[1]

    def rates(self, model: str) -> tuple[float, float, float, float]:
        """USD per million (input, output, cache read, cache write) tokens for `model` (`onion.prices.rates`);
        `OnionError` naming the model and how to price it when `prices` has none."""
        found = self._rates.get(model)
        if found is None:
            found = _rates(model, self.prices)
            if len(self._rates) < SEEN_AT_MOST:
                self._rates[model] = found
        return found

    def cost(self, model: str, usage: Usage) -> float:
        """The cost in USD of `usage` on `model`: uncached input, cache reads and writes, output."""
        return _cost_at(self.rates(model), usage)


def _soft_lines(soft: float | None, max_cost: float | None, max_tokens: int | None) -> tuple[float, float]:
    """The soft lines (cost, tokens) `soft` draws: infinite without it."""
    inf = float("inf")
    if soft is None:
        return inf, inf
    if isinstance(soft, bool) or not isinstance(soft, int | float) or soft <= 0:
        raise ValueError(f"budget: soft is a fraction of the limit (0.8) or an amount under it, not {soft!r}")
    if soft < 1:
        return (inf if max_cost is None else soft * max_cost), (inf if max_tokens is None else soft * max_tokens)
    if max_cost is not None and max_tokens is not None:
        raise ValueError("budget: with both max_cost and max_tokens, give soft as a fraction of them (0.8)")
    limit = max_cost if max_cost is not None else max_tokens
    if limit is not None and soft >= limit:
        raise ValueError(f"budget: the soft line {soft} must be under the limit {limit}")
    return (inf, float(soft)) if max_cost is None else (float(soft), inf)


class shared_budget(budget):
    """A `budget` whose allowance other runs share (`budget(per=...)` makes one): it counts in a store."""

    __slots__ = ()

    nondeterministic = "it counts spending in a store that other runs share"
    """Why a replay of a run may decide differently with this layer: engines that replay workflow code refuse it."""

    async def wrap_model(self, call: ModelCall, call_next: ModelNext) -> ModelResponse:
        run = call.run
        if call.model is not self._model:
            self.check_model(call.model)  # no price: an error before the call is sent
        where = self._allowances.of(run, self._clock())
        spent = self._seen.get(where.key)  # what this worker last heard, unless it heard nothing or a line
        if spent is None or (
            (spent[0] >= self._line_cost or spent[1] >= self._line_tokens) and self._stops(run, spent, where)
        ):
            spent = await self._spend(where, 0.0, 0)
        if spent[0] >= self._line_cost or spent[1] >= self._line_tokens:
            paused = self._at_line(call, spent, where)
            if paused is not None:
                return paused
        charges = Charges(self, call, spent, where)
        call.on_response(charges)
        try:
            response = await call_next(call)
            if charges.usages is None or charges.missed(response):  # made by a layer inside, not by a model
                self._charge(charges, response, False)
        finally:
            charges.closed = True
            sending = charges.sending
            if sending is not None:  # the additions on their way to the store: their answers, the last one's kept
                if len(sending) == 1:
                    charges.heard = await asyncio.shield(sending[0])
                else:
                    charges.heard = (await asyncio.shield(asyncio.gather(*sending)))[-1]
        spent = charges.heard
        if spent[0] > self._hard_cost or spent[1] > self._hard_tokens:
            self._check(run, spent, where, run.usage)
        return response


class Charges:
    """What one model call's responses cost, as `budget` charges each (`ModelCall.on_response`), while the layer
    waits for them (`closed` after: a layer outside that sends the call again reaches a new `Charges`).

    It keeps the call's run and model, not the call, which keeps it: a cycle per model call would be freed only
    by the garbage collector, which then runs often (it cost `budget` about 0.3 µs a call)."""

    __slots__ = ("budget", "closed", "cost", "heard", "model", "run", "sending", "spent", "tokens", "usages", "where")

    def __init__(self, layer: budget, call: ModelCall, spent: tuple[float, int], where: Where | None) -> None:
        self.budget, self.run, self.model, self.spent, self.where = layer, call.run, call.model, spent, where
        self.cost, self.tokens, self.closed = 0.0, 0, False
        self.heard = spent
        """The allowance's spending as the store last answered for this call (`spent`, what was known before it)."""
        self.sending: list[asyncio.Task[tuple[float, int]]] | None = None
        """Additions sent to a store elsewhere, their answers not yet read."""
        self.usages: list[Usage] | None = None
        """The usage of each response charged, for `missed`."""

    def __call__(self, response: ModelResponse) -> None:
        if not self.closed:
            usages = self.usages
            if usages is None:
                self.usages = [response.usage]
            else:
                usages.append(response.usage)
            self.budget._charge(self, response, True)

    def missed(self, response: ModelResponse) -> bool:
        """Whether `response` was never charged: a layer inside made it, no model produced it."""
        usage, usages = response.usage, self.usages
        return usages is None or (usages[-1] is not usage and all(seen is not usage for seen in usages))
