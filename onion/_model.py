"""The protocol a model implements, and model strings such as "anthropic:claude-sonnet-5-5"."""

from __future__ import annotations

from ._calls import Model as Model

PROVIDERS = {
    "anthropic": ("onion.providers.anthropic", "AnthropicModel"),
    "openai": ("onion.providers.openai", "OpenAIChatModel"),
    "openai-chat": ("onion.providers.openai", "OpenAIChatModel"),
    "openai-responses": ("onion.providers.openai_responses", "OpenAIResponsesModel"),
}


def resolve_model(model: Model | str) -> Model:
    """A `Model` as is, or one built from a string `"<provider>:<model name>"`."""
    if not isinstance(model, str):
        if not callable(getattr(model, "request", None)):
            raise TypeError(f"{model!r} is not a model: it needs an async `request(call)` method")
        return model
    provider, _, name = model.partition(":")
    if provider not in PROVIDERS or not name:
        known = ", ".join(f'"{p}:<model>"' for p in PROVIDERS)
        raise ValueError(f"unknown model string {model!r}; use one of {known}")
    import importlib

    module_name, class_name = PROVIDERS[provider]
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        extra = "openai" if provider.startswith("openai") else provider
        raise ImportError(f"{model!r} needs the {extra} SDK: pip install 'onion[{extra}]' ({error})") from error
    built: Model = getattr(module, class_name)(name)
    return built
