"""`budget`: stop a run whose tokens or cost go over a limit."""

from __future__ import annotations

import json
from collections.abc import Mapping

from onion import ModelCall, ModelNext, ModelResponse, OnionError, Run, Usage
from onion.prices import CACHE_RATES as CACHE_RATES
from onion.prices import PRICES
from onion.prices import cost as _cost
from onion.prices import rates as _rates


class BudgetExceeded(OnionError):
    """The run went over its `budget`.

    `usage` is the run's usage at the stop (the response that went over
    included), `cost` its cost in USD so far (0 if no `max_cost`). Never
    retried (`retryable` is false).
    """

    retryable = False

    def __init__(self, message: str, *, usage: Usage, cost: float) -> None:
        super().__init__(message)
        self.usage, self.cost = usage, cost


class budget:
    """Raise `BudgetExceeded` once a run's tokens pass `max_tokens` or its cost passes `max_cost` (USD).

    Every response a model produced counts, wherever `budget` sits: it is
    checked where the model produced it (`ModelCall.on_response`), so each
    attempt of a `retry` inside, and a response a layer inside rejects,
    count too; the first response that goes over stops the run there. That
    response is not added to the history (so no tool call is left
    unanswered), but its usage is in `run.usage`. A call is not sent at all
    while the run is already over. Cost uses `prices` (model name prefix ->
    USD per million input and output tokens, merged over `PRICES`; the
    longest matching prefix wins). Input read from the prompt cache
    (`Usage.cached_input_tokens`) and written to it (`cache_write_tokens`)
    is priced at the model's cache rates (`CACHE_RATES`), or at the third and
    fourth values of a 4-tuple price (input, output, cache read, cache write).
    A model with tokens but no price raises `OnionError` naming it. The
    cost so far is counted in `run.private` (under `key`: nothing a caller
    passes in `state=` reaches it; it survives a pause and a crash) and
    reported in `run.state["cost"]`, which the layer writes and never reads.
    Not usable bare.
    """

    __slots__ = ("key", "max_cost", "max_tokens", "prices")

    def __init__(
        self,
        max_tokens: int | None = None,
        max_cost: float | None = None,
        *,
        prices: Mapping[str, tuple[float, ...]] | None = None,
    ) -> None:
        if max_tokens is None and max_cost is None:
            raise TypeError("budget needs a limit, e.g. budget(max_tokens=100_000) or budget(max_cost=0.50)")
        self.max_tokens, self.max_cost = max_tokens, max_cost
        self.prices: dict[str, tuple[float, ...]] = {**PRICES, **(prices or {})}
        bounds = [max_tokens, max_cost, *([sorted(prices.items())] if prices else [])]
        self.key = "budget:" + json.dumps(bounds, separators=(",", ":"))
        """Where a run's cost so far lives in `run.private`: one entry per configuration, the same in every
        process (a run resumed or recovered elsewhere goes on counting)."""

    async def wrap_model(self, call: ModelCall, call_next: ModelNext) -> ModelResponse:
        run = call.run
        self._check(run, run.usage, run.private.get(self.key, 0.0))
        charged: list[Usage] = []

        def charge(response: ModelResponse) -> None:
            charged.append(response.usage)
            self._charge(call, response, run.usage)

        call.on_response(charge)
        response = await call_next(call)
        if all(usage is not response.usage for usage in charged):
            self._charge(call, response, run.usage + response.usage)  # made by a layer inside, not by a model
        return response

    def _charge(self, call: ModelCall, response: ModelResponse, total: Usage) -> None:
        """Add `response`'s cost to the run's, then raise if `total` (the run's usage with it) or the cost is over."""
        run, usage = call.run, response.usage
        cost: float = run.private.get(self.key, 0.0)
        if self.max_cost is not None and (usage.input_tokens or usage.output_tokens):
            name = response.model or str(getattr(call.model, "name", call.model))
            cost += self.cost(name, usage)
            run.private[self.key] = run.state["cost"] = cost
        try:
            self._check(run, total, cost)
        except BudgetExceeded:
            if total is not run.usage:
                run.usage.add(usage)
            raise

    def _check(self, run: Run, total: Usage, cost: float) -> None:
        over = []
        if self.max_tokens is not None and total.total_tokens > self.max_tokens:
            over.append(f"{total.total_tokens} tokens > max_tokens={self.max_tokens}")
        if self.max_cost is not None and cost > self.max_cost:
            over.append(f"${cost:.6f} > max_cost=${self.max_cost}")
        if over:
            raise BudgetExceeded(
                f"run {run.id} went over its budget: {'; '.join(over)}", usage=Usage() + total, cost=cost
            )

    def price(self, model: str) -> tuple[float, float]:
        """USD per million (input, output) tokens for `model` ("provider:" prefixes ignored)."""
        rates = self.rates(model)
        return rates[0], rates[1]

    def rates(self, model: str) -> tuple[float, float, float, float]:
        """USD per million (input, output, cache read, cache write) tokens for `model` (`onion.prices.rates`)."""
        return _rates(model, self.prices)

    def cost(self, model: str, usage: Usage) -> float:
        """The cost in USD of `usage` on `model`: uncached input, cache reads and writes, output."""
        return _cost(model, usage, self.prices)
