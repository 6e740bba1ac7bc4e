"""A captured trace as one self-contained HTML page: a waterfall per run, each call's layers inside it.

No network: the styles and the script are in the page. Rows are rendered
here; the script only shows and hides a call's layer rows.
"""

from __future__ import annotations

from html import escape

from ._facts import calls_of, did, duration, label, layers_of, numbered, outcome
from ._spans import Span
from ._tree import headline

STYLE = """
body { font: 13px/1.4 system-ui, sans-serif; margin: 16px; color: #1d2330; background: #fafbfc; }
h1 { font-size: 18px; margin: 0 0 4px; }
h2 { font-size: 14px; margin: 20px 0 6px; font-weight: 600; }
header p { margin: 0 0 8px; color: #566; }
button { font: inherit; margin-right: 6px; }
.run { background: #fff; border: 1px solid #dde2e8; border-radius: 6px; padding: 8px 12px 12px; margin-top: 12px; }
.row { display: grid; grid-template-columns: minmax(320px, 42%) 1fr; align-items: center; min-height: 22px; }
.row[hidden] { display: none; }
.row:hover { background: #f1f4f8; }
.label { white-space: nowrap; overflow: hidden; text-overflow: ellipsis; padding-right: 8px; }
.call > .label { cursor: default; }
.call[data-layers] > .label { cursor: pointer; }
.caret { display: inline-block; width: 14px; color: #667; }
.facts { color: #667; }
.layer .label { color: #4a3d73; }
.track { position: relative; height: 16px; border-left: 1px solid #e3e7ec; }
.bar { position: absolute; top: 2px; height: 12px; min-width: 2px; border-radius: 2px; }
.time { position: absolute; top: 0; font-size: 11px; color: #445; padding: 0 4px; white-space: nowrap; }
.run-kind { background: #8a94a6; } .model { background: #3b7dd8; } .request { background: #1f4e93; }
.tools { background: #e0902f; } .tool { background: #3aa55d; } .layer-bar { background: #b9a7e8; }
.error .bar { background: #d64545; }
.axis { display: grid; grid-template-columns: minmax(320px, 42%) 1fr; color: #778; font-size: 11px; }
.ticks { position: relative; height: 16px; border-bottom: 1px solid #e3e7ec; }
.tick { position: absolute; transform: translateX(-50%); white-space: nowrap; }
.tick:first-child { transform: none; } .tick:last-child { transform: translateX(-100%); }
"""

SCRIPT = """
function toggle(row, open) {
  const show = open === undefined ? row.getAttribute("aria-expanded") !== "true" : open;
  row.setAttribute("aria-expanded", String(show));
  row.querySelector(".caret").textContent = show ? "\\u25be" : "\\u25b8";
  document.querySelectorAll('.layer[data-of="' + row.id + '"]').forEach(function (layer) { layer.hidden = !show; });
}
document.querySelectorAll(".call[data-layers]").forEach(function (row) {
  row.querySelector(".label").addEventListener("click", function () { toggle(row); });
});
document.getElementById("expand-all").addEventListener("click", function () {
  document.querySelectorAll(".call[data-layers]").forEach(function (row) { toggle(row, true); });
});
document.getElementById("collapse-all").addEventListener("click", function () {
  document.querySelectorAll(".call[data-layers]").forEach(function (row) { toggle(row, false); });
});
"""


def page(runs: list[Span], real_values: bool = False) -> str:
    """The whole page for `runs`: tool arguments as the model wrote them, or as tools got them with `real_values`."""
    sections = (
        "\n".join(_run(run, index, real_values) for index, run in enumerate(runs, start=1))
        or "<p>No runs captured.</p>"
    )
    return f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>onion trace</title>
<style>{STYLE}</style>
</head>
<body>
<header>
<h1>onion trace</h1>
<p>Each bar is a call on its run's timeline. Click a call to show its layers: each layer's bar spans its pass,
and its label gives its own time (its time minus the time inside <code>call_next</code>) and what it did.</p>
<button id="expand-all" type="button">Show all layers</button>
<button id="collapse-all" type="button">Hide all layers</button>
</header>
{sections}
<script>{SCRIPT}</script>
</body>
</html>
"""


def _run(run: Span, index: int, real_values: bool) -> str:
    rows: list[str] = []
    _rows(run, None, 0, run, f"r{index}", rows, real_values)
    span = max(run.duration_ns, 1)
    ticks = "".join(
        f'<span class="tick" style="left:{share * 100:.0f}%">{duration(int(span * share))}</span>'
        for share in (0, 0.25, 0.5, 0.75, 1)
    )
    return (
        f'<section class="run">\n<h2>{escape(headline(run, None, real_values))}</h2>\n'
        f'<div class="axis"><span></span><div class="ticks">{ticks}</div></div>\n' + "\n".join(rows) + "\n</section>"
    )


def _rows(call: Span, number: int | None, depth: int, run: Span, id: str, rows: list[str], real_values: bool) -> None:
    layers = layers_of(call)
    facts = ", ".join(outcome(call))
    text = escape(label(call, number, real_values))
    if facts:
        text += f' <span class="facts">· {escape(facts)}</span>'
    caret = '<span class="caret">\u25b8</span>' if layers else '<span class="caret"></span>'
    expandable = f' data-layers="{len(layers)}" aria-expanded="false"' if layers else ""
    error = " error" if call.error is not None else ""
    rows.append(
        f'<div class="row call{error}" id="{id}" data-kind="{call.kind}"{expandable}>'
        f'<div class="label" style="padding-left:{depth * 16}px">{caret}{text}</div>'
        f"{_bar(call, run, 'run-kind' if call.kind == 'run' else call.kind)}</div>"
    )
    for layer_depth, layer in layers:
        layer_facts = ", ".join(did(layer))
        layer_text = f"{escape(layer.name)} · own {duration(layer.own_ns)}" + (
            f' <span class="facts">· {escape(layer_facts)}</span>' if layer_facts else ""
        )
        layer_error = " error" if layer.error is not None and layer.error is not layer.inner_error else ""
        rows.append(
            f'<div class="row layer{layer_error}" data-of="{id}" data-kind="layer" hidden>'
            f'<div class="label" style="padding-left:{(depth + 1 + layer_depth) * 16 + 14}px">{layer_text}</div>'
            f"{_bar(layer, run, 'layer-bar')}</div>"
        )
    for index, (inner, inner_number) in enumerate(numbered(calls_of(call))):
        _rows(inner, inner_number, depth + 1, run, f"{id}-{index}", rows, real_values)


def _bar(span: Span, run: Span, colour: str) -> str:
    total = max(run.duration_ns, 1)
    left = (span.start - run.start) / total * 100
    width = span.duration_ns / total * 100
    where = f"left:{left + width:.3f}%" if left + width < 80 else f"right:{100 - left:.3f}%"
    if left + width >= 80 and left < 12:
        where = f"left:{left:.3f}%;color:#fff"
    return (
        f'<div class="track"><div class="bar {colour}" style="left:{left:.3f}%;width:{width:.3f}%"></div>'
        f'<span class="time" style="{where}">{duration(span.duration_ns)}</span></div>'
    )
