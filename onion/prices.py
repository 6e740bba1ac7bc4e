"""What model calls cost: list prices by model name prefix, and the cost of a `Usage` on a model.

`middleware.budget` and `onion.evals.usage_under(cost=...)` price with these.
"""

from __future__ import annotations

from collections.abc import Mapping

from ._messages import Usage
from .errors import OnionError

PRICES: dict[str, tuple[float, float]] = {
    "claude-opus-4-5": (5.0, 25.0),
    "claude-opus-4-6": (5.0, 25.0),
    "claude-opus-4-7": (5.0, 25.0),
    "claude-opus-4-1": (15.0, 75.0),
    "claude-opus-4": (15.0, 75.0),
    "claude-sonnet-4": (3.0, 15.0),
    "claude-3-7-sonnet": (3.0, 15.0),
    "claude-3-5-sonnet": (3.0, 15.0),
    "claude-haiku-4-5": (1.0, 5.0),
    "claude-3-5-haiku": (0.8, 4.0),
    "claude-3-haiku": (0.25, 1.25),
    "gpt-5": (1.25, 10.0),
    "gpt-5-mini": (0.25, 2.0),
    "gpt-5-nano": (0.05, 0.4),
    "gpt-4.1": (2.0, 8.0),
    "gpt-4.1-mini": (0.4, 1.6),
    "gpt-4.1-nano": (0.1, 0.4),
    "gpt-4o": (2.5, 10.0),
    "gpt-4o-mini": (0.15, 0.6),
    "o3": (2.0, 8.0),
    "o3-mini": (1.1, 4.4),
    "o4-mini": (1.1, 4.4),
}
"""USD per million (input, output) tokens, by model name prefix (list prices; check yours, override with `prices=`)."""

CACHE_RATES: dict[str, tuple[float, float]] = {
    "claude": (0.1, 1.25),
    "gpt-5": (0.1, 1.0),
    "gpt-4.1": (0.25, 1.0),
    "gpt-4o": (0.5, 1.0),
    "o3": (0.25, 1.0),
    "o3-mini": (0.5, 1.0),
    "o4-mini": (0.25, 1.0),
}
"""Prompt-cache (read, write) prices as multiples of the input price, by model name prefix.

Anthropic bills a cache read at a tenth of the input price and a write (5-minute
TTL) at 1.25 times it; OpenAI caches for free and bills reads at a discount that
depends on the model. A model matching none pays the input price for both.
"""


def rates(model: str, prices: Mapping[str, tuple[float, ...]] = PRICES) -> tuple[float, float, float, float]:
    """USD per million (input, output, cache read, cache write) tokens for `model` ("provider:" prefixes ignored).

    `prices` maps model name prefixes to (input, output) or all four; the longest matching prefix wins.
    """
    name = model.rpartition(":")[2]
    matches = [prefix for prefix in prices if name.startswith(prefix)]
    if not matches:
        raise OnionError(
            f"budget: no price for model {model!r}; pass budget(prices={{{name!r}: (input, output)}}), in USD per "
            "million tokens (onion.prices.PRICES has the models onion knows)"
        )
    price = prices[max(matches, key=len)]
    if len(price) == 4:
        return price[0], price[1], price[2], price[3]
    if len(price) != 2:
        raise OnionError(f"budget: the price of {model!r} must be (input, output) or 4 values, not {price!r}")
    cached = [prefix for prefix in CACHE_RATES if name.startswith(prefix)]
    read, write = CACHE_RATES[max(cached, key=len)] if cached else (1.0, 1.0)
    return price[0], price[1], price[0] * read, price[0] * write


def cost(model: str, usage: Usage, prices: Mapping[str, tuple[float, ...]] = PRICES) -> float:
    """The cost in USD of `usage` on `model`: uncached input, cache reads and writes, output."""
    return cost_at(rates(model, prices), usage)


def cost_at(prices: tuple[float, float, float, float], usage: Usage) -> float:
    """The cost in USD of `usage` at `prices`, a model's `rates` (USD per million input, output, cache read and
    cache write tokens)."""
    input_price, output_price, read_price, write_price = prices
    read, written = usage.cached_input_tokens, usage.cache_write_tokens
    uncached = usage.input_tokens - read - written
    if uncached < 0:
        uncached = 0
    total = uncached * input_price + read * read_price + written * write_price + usage.output_tokens * output_price
    return total / 1_000_000
