"""`patterns`: the shared secret patterns, and `scrub`'s shortcut past text that cannot hold a secret."""

from __future__ import annotations

import json
import re
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from middleware.patterns import (
    API_KEY,
    BEARER,
    BUILTIN,
    CARD_NUMBER,
    EMAIL,
    IBAN,
    PERSONAL,
    PHONE,
    PRIVATE_KEY,
    SECRET_ASSIGNMENT,
    SECRETS,
    scrub,
    scrub_value,
)

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


KEYS = [
    "sk-ant-api03-" + "Ab1_" * 6,
    "sk-proj-" + "Cd2-" * 6,
    "sk_live_" + "Ef3g" * 6,
    "AKIA" + "IOSFODNN7EXAMPLE",
    "AIza" + ("SyA1" * 9)[:35],
    "ghp_" + "Gh4i" * 9,
    "github_pat_" + "Jk5l" * 9,
    "xoxb-" + "1234567890-abc",
]
"""One key of every vendor format `API_KEY` knows."""


def wrappings(key: str) -> list[str]:
    """`key` after a newline, a tab, in quotes, and inside JSON, once and twice encoded."""
    nested = json.dumps({"outer": {"inner": f"line one\n{key}\tend"}})
    return [f"x\n{key}", f"x\t{key}", f'"{key}"', f"'{key}'", f"x_{key}", nested, json.dumps(nested), repr(f"\n{key}")]


@pytest.mark.parametrize("key", KEYS, ids=lambda key: key[:6])
def test_every_key_format_is_scrubbed_after_newlines_tabs_quotes_and_inside_nested_json(key: str) -> None:
    """Escaped text (`\\nsk-...` in JSON or repr) hides a key from a word boundary, not from `scrub`."""
    for text in wrappings(key):
        assert key[6:] not in scrub(text), text


def test_card_numbers_non_ascii_emails_pem_keys_and_passwords_are_all_in_the_one_set() -> None:
    """Cards split by no-break spaces or dots, non-ASCII e-mails, PEM private keys and `password:` are scrubbed."""
    pem = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA3x9Zs/+k=\nabcDEF123==\n-----END RSA PRIVATE KEY-----"
    texts = {
        "4111\u00a01111\u00a01111\u00a01111": "1111",
        "4111.1111.1111.1111": "1111",
        "4111\u202f1111\u202f1111\u202f1111": "1111",
        "write to josé.núñez@correo.españa.es": "núñez",
        "用户@例子.广告 wrote": "用户",
        f"key:\n{pem}\nthat was it": "MIIEow",
        "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC": "MIIEvQ",
        "password: hunter2": "hunter2",
        "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG": "wJalrX",
    }
    for text, secret in texts.items():
        assert secret not in scrub(text), text
    assert scrub(f"key:\n{pem}\nthat was it") == "key:\n[REDACTED]\nthat was it"
    assert scrub("order 1234.5678.9012.3456 and v1.2.3") == "order 1234.5678.9012.3456 and v1.2.3"
    assert set(BUILTIN) == {*SECRETS, *PERSONAL} and PRIVATE_KEY in SECRETS


ADVERSARIAL = ["a", "@", ".", "=", "1", "1 ", "1.", "a.", "a@", "a=", "a@a.", "a.a@", "sk-", 'x="', "bearer ", "\\n"]
CLUES = " api_key= password: Bearer sk-ant- ghp_ -----BEGIN PRIVATE KEY----- a@b.co "
"""Appended to each run so that no pattern is skipped for want of its clue."""


def adversarial(size: int) -> str:
    """About `size` characters of long runs of each `ADVERSARIAL` unit, each run followed by `CLUES`."""
    run = size // len(ADVERSARIAL)
    return "".join((unit * (run // len(unit) + 1))[:run] + CLUES for unit in ADVERSARIAL)


def cpu_seconds_to_scrub(text: str) -> float:
    """The least CPU time of two scrubs of `text` with every built-in pattern (other processes do not count)."""
    times = []
    for _ in range(2):
        started = time.process_time()
        scrub(text)
        times.append(time.process_time() - started)
    return min(times)


def test_every_builtin_pattern_scrubs_a_megabyte_of_adversarial_text_in_linear_time() -> None:
    """Long runs of `a`, `@`, `.`, `=` and digits: 4x the text costs about 4x the time (quadratic would be 16x).

    The bound on the megabyte is generous, for a busy machine; a quadratic pattern takes hours there.
    """
    small, large = cpu_seconds_to_scrub(adversarial(250_000)), cpu_seconds_to_scrub(adversarial(1_000_000))
    assert large < 3.0
    assert large < 8 * max(small, 0.005), (small, large)


def test_a_secret_used_as_a_dict_key_is_scrubbed_and_keys_scrubbed_alike_stay_apart() -> None:
    """Keys are scrubbed like values (a token as a key reached logs and traces); two become two, numbered."""
    key, other = "sk-ant-api03-" + "a" * 40, "sk-ant-api03-" + "b" * 40
    shown = scrub_value({"tokens": {key: 1, other: 2}, "rows": [{key: "x"}], "plain": "y"})
    assert key not in json.dumps(shown) and other not in json.dumps(shown)
    assert sorted(shown["tokens"].values()) == [1, 2] and shown["plain"] == "y"


SAMPLES: list[tuple[str, re.Pattern[str], str]] = [
    ("EMAIL", EMAIL, "ann.lee@example.co.uk"),
    ("API_KEY", API_KEY, "sk-ant-api03-" + "Ab1_" * 6),
    ("API_KEY github", API_KEY, "ghp_" + "Gh4i" * 9),
    ("BEARER", BEARER, "Bearer eyJhbGciOi.eyJzdWIiOi.SflKxwRJSM"),
    ("SECRET_ASSIGNMENT", SECRET_ASSIGNMENT, "password=hunter2"),
    ("SECRET_ASSIGNMENT quoted", SECRET_ASSIGNMENT, 'api_key: "s3cr3t value"'),
    ("PRIVATE_KEY", PRIVATE_KEY, "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADAN==\n-----END PRIVATE KEY-----"),
    ("CARD_NUMBER", CARD_NUMBER, "4111 1111 1111 1111"),
    ("PHONE international", PHONE, "+44 20 7946 0958"),
    ("PHONE trunk prefix", PHONE, "+44 (0)20 7946 0958"),
    ("PHONE north american", PHONE, "(555) 123-4567"),
    ("PHONE dashed", PHONE, "555-123-4567"),
    ("IBAN", IBAN, "DE89 3704 0044 0532 0130 00"),
]
"""One value of every built-in pattern, matched whole by it."""

SURROUNDINGS = [
    *("{} ok", "see {}", "({})", "[{}]", "{{{}}}", "<{}>", '"{}"', "'{}'", "\u201c{}\u201d", "\u00ab{}\u00bb"),
    *("{}.", "{},", "{};", "{}:", "{}!", "{}?", "{}).", "({}), ok", "(phone {}) ok", "[see {}]."),
    *("x: {}\n", "\t{}\t", "*{}*", "- {}"),
]
"""Leading and trailing punctuation, brackets and quotes a value is found between in text."""


@pytest.mark.parametrize("surrounding", SURROUNDINGS)
@pytest.mark.parametrize(("pattern", "value"), [sample[1:] for sample in SAMPLES], ids=[s[0] for s in SAMPLES])
def test_every_builtin_pattern_matches_its_value_exactly_between_punctuation_brackets_and_quotes(
    pattern: re.Pattern[str], value: str, surrounding: str
) -> None:
    """A match takes neither the bracket, quote or full stop around a value nor misses it for them.

    `(phone +44 20 7946 0958) ok` once became `(phone <PHONE_1> ok`: the closing parenthesis went with the number.
    """
    text = surrounding.format(value)
    found = [match.group() for match in pattern.finditer(text)]
    assert found == [value], text
