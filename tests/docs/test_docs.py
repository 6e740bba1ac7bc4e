"""What the README, docs, examples and demo tell users stays true."""

from __future__ import annotations

import re
from pathlib import Path

import anthropic._data

ROOT = Path(__file__).parents[2]
DOCS = [ROOT / "README.md", *(ROOT / "docs").glob("*.md")]
PRICES = ROOT / "onion" / "prices.py"
"""A price table, not a teaching: it keeps prices for deprecated models users may still run."""
TAUGHT = [*DOCS, *(ROOT / "examples").glob("*.py"), *(p for p in (ROOT / "onion").rglob("*.py") if p != PRICES)]


def test_no_deprecated_model_string_is_taught() -> None:
    """A model string the installed anthropic SDK lists as deprecated appears nowhere users copy from."""
    deprecated = set(anthropic._data.DEPRECATED_MODELS)
    assert deprecated, "the SDK's deprecated list moved; update this test"
    found = [
        f"{path.relative_to(ROOT)}: {name}"
        for path in TAUGHT
        for name in re.findall(r"claude-[a-z0-9.-]*[a-z0-9]", path.read_text())
        if name in deprecated
    ]
    assert not found, f"deprecated models taught: {found}"


def test_every_public_name_of_onion_is_documented() -> None:
    """Each name `onion` exports is explained somewhere in the docs (dead aliases are removed, not kept)."""
    import onion

    text = "\n".join(path.read_text() for path in DOCS)
    missing = [name for name in onion.__all__ if not re.search(rf"\b{name}\b", text)]
    assert not missing, f"exported but never documented: {missing}"
