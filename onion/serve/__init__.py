"""An agent served over HTTP: `serve(agent)` is an ASGI app (Starlette) with runs, streaming, AG-UI and a page.

Needs the `serve` extra (`pip install 'onion[serve]'`). See docs/serve.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._exports import shown_in

if TYPE_CHECKING:
    from ._app import serve

__all__ = ["serve"]


def __getattr__(name: str) -> Any:
    """`serve` loads Starlette when first named: `python -m onion` (its `serve` command's arguments included)
    starts without the `serve` extra."""
    if name != "serve":
        raise AttributeError(f"module 'onion.serve' has no attribute {name!r}")
    from ._app import serve

    globals()["serve"] = shown_in(__name__, serve)
    return serve
