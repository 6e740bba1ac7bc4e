"""`patterns`: the shared secret patterns, and `scrub`'s shortcut past text that cannot hold a secret."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from middleware.patterns import SECRET_ASSIGNMENT, SECRETS, scrub

FRAGMENTS = [
    *("sk-", "ant-", "proj-", "sk_live_", "pk_test_", "AKIA", "AIza", "ghp_", "github_pat_", "xoxb-"),
    *("Bearer ", "basic ", "Authorization", "api_key", "API-KEY", "x-api-key", "password", "passwd"),
    *("Secret", "access_token", "auth-token", "private_key", ": ", "=", '"', "'", " ", "\n", ",", "}"),
    *("abcdefgh", "ABCDEFGHIJKLMNOP", "0123456789", "_", "-", "[REDACTED]", "\u017f", "\u212a", "\u0131", "é"),
]


def scrub_everything(text: str, replacement: str) -> str:
    for pattern in SECRETS:
        if pattern is SECRET_ASSIGNMENT:
            text = pattern.sub(lambda match: match.group(1) + replacement, text)
        else:
            text = pattern.sub(replacement, text)
    return text


@given(st.lists(st.sampled_from(FRAGMENTS), max_size=14).map("".join), st.sampled_from(["[REDACTED]", "api_key="]))
def test_scrub_removes_exactly_what_running_every_secret_pattern_removes(text: str, replacement: str) -> None:
    """Skipping a pattern on text without its clues never lets a secret through, whatever the replacement."""
    assert scrub(text, SECRETS, replacement) == scrub_everything(text, replacement)


def test_non_ascii_look_alikes_are_still_scrubbed() -> None:
    """With `(?i)` the long s matches `s`: such text is always scrubbed in full."""
    assert "hunter2" not in scrub("pa\u017f\u017fword=hunter2")
    assert scrub("employee 12345", [re.compile(r"employee \d+")]) == "[REDACTED]"
