"""See the onion: OpenTelemetry spans for every agent, or an in-process trace drawn as a tree or a page.

```python
from onion import tracing
tracing.instrument()                 # OpenTelemetry spans for every agent
with tracing.capture() as trace:     # an in-process record, no OTel needed
    await agent.run("question")
print(trace)                         # the onion as a tree, each layer's own time
trace.to_html("trace.html")          # one self-contained page
```

Tracing off costs nothing: chains are built without it, and rebuilt with it
when `instrument()` is called or a capture starts.
"""

from __future__ import annotations

from .._exports import export
from ._capture import Trace, capture
from ._otel import instrument, uninstrument
from ._spans import Span, note, waited

__all__ = ["Span", "Trace", "capture", "instrument", "note", "uninstrument", "waited"]

export(globals())
