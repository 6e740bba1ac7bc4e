"""onion's provider-neutral settings, `thinking` and `prompt_cache`, in each API's own fields.

`thinking`: `True` or `"adaptive"` (the model decides how much to think),
an effort `"low"` / `"medium"` / `"high"`, or an `int` budget of thinking
tokens. Anthropic gets `thinking={"type": "adaptive"}` (with
`output_config.effort` for an effort) or `{"type": "enabled",
"budget_tokens": n}`; a dict is Anthropic's own form and passes through.
OpenAI Chat gets `reasoning_effort`, Responses `reasoning={"effort": ...}`;
a budget maps to an effort (up to 2,048 tokens low, up to 16,384 medium,
else high), `True` to `"medium"`.

`prompt_cache`: `"5m"` or `"1h"`, set by `middleware.prompt_cache`. Anthropic
gets `cache_control` breakpoints; OpenAI caches on its own and gets nothing.
"""

from __future__ import annotations

from typing import Any

EFFORTS = ("low", "medium", "high")


def _effort(value: Any) -> str:
    """The OpenAI reasoning effort for a `thinking` setting."""
    if value is True or value == "adaptive":
        return "medium"
    if isinstance(value, str) and value in EFFORTS:
        return value
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return "low" if value <= 2048 else "medium" if value <= 16384 else "high"
    if isinstance(value, dict):
        budget = value.get("budget_tokens")
        return _effort(budget) if isinstance(budget, int) else "medium"
    raise ValueError(
        f"settings['thinking']={value!r}: use True, 'adaptive', 'low', 'medium', 'high' or a token budget (int > 0)"
    )


def anthropic_settings(settings: dict[str, Any], params: dict[str, Any]) -> str | None:
    """Put `settings` into `params`, `thinking` translated; returns the `prompt_cache` TTL, if any."""
    settings = dict(settings)
    ttl: str | None = settings.pop("prompt_cache", None)
    thinking = settings.pop("thinking", None)
    params.update(settings)
    if thinking is None or thinking is False:
        return ttl
    if isinstance(thinking, dict):
        params["thinking"] = thinking
    elif isinstance(thinking, int) and not isinstance(thinking, bool):
        _effort(thinking)
        params["thinking"] = {"type": "enabled", "budget_tokens": thinking}
    else:
        effort = _effort(thinking)
        params["thinking"] = {"type": "adaptive"}
        if thinking in EFFORTS:
            params["output_config"] = {**(params.get("output_config") or {}), "effort": effort}
    return ttl


def openai_settings(settings: dict[str, Any], responses: bool) -> dict[str, Any]:
    """`settings` for an OpenAI API: `thinking` as a reasoning effort, `prompt_cache` dropped."""
    if "thinking" not in settings and "prompt_cache" not in settings:
        return settings
    settings = dict(settings)
    settings.pop("prompt_cache", None)
    thinking = settings.pop("thinking", None)
    if thinking is not None and thinking is not False:
        effort = _effort(thinking)
        if responses:
            settings["reasoning"] = {**(settings.get("reasoning") or {}), "effort": effort}
        else:
            settings["reasoning_effort"] = effort
    return settings
