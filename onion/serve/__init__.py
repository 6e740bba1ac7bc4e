"""An agent served over HTTP: `serve(agent)` is an ASGI app (Starlette) with runs, streaming, AG-UI and a page.

Needs the `serve` extra (`pip install 'onion[serve]'`). See docs/serve.md.
"""

from __future__ import annotations

from .._exports import export
from ._app import serve

__all__ = ["serve"]

export(globals())
