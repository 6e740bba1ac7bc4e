"""`prompt_cache`: mark where a provider's prompt cache may break a request, on APIs that ask for it."""

from __future__ import annotations

from onion import ModelCall, ModelNext, ModelResponse


class prompt_cache:
    """Ask for prompt caching on every model call: `app.use(prompt_cache)` or `prompt_cache(ttl="1h")`.

    Anthropic gets `cache_control` breakpoints on the tool definitions (the
    last tool), the system prompt, and the last block of each of the latest
    two user turns: four, the most the API allows. OpenAI caches on its own:
    nothing is sent. Sets `call.settings["prompt_cache"] = ttl` ("5m" or
    "1h"), which the providers translate. What it saves shows in
    `Usage.cached_input_tokens` and `Usage.cache_write_tokens`, which
    `budget` prices at the cache rates.
    """

    __slots__ = ("ttl",)

    def __init__(self, ttl: str = "5m") -> None:
        if ttl not in ("5m", "1h"):
            raise ValueError(f"prompt_cache(ttl={ttl!r}): Anthropic caches for '5m' or '1h'")
        self.ttl = ttl

    async def wrap_model(self, call: ModelCall, call_next: ModelNext) -> ModelResponse:
        call.settings["prompt_cache"] = self.ttl
        response = await call_next(call)
        return response
