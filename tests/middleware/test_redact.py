"""`redact`: secrets and personal data never reach the model."""

from __future__ import annotations

import itertools
import re
from collections.abc import AsyncIterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from middleware import redact, retry
from middleware.patterns import scrub
from middleware.redact import RedactedStream, luhn_valid
from onion import (
    Agent,
    Handler,
    Image,
    Message,
    ModelCall,
    Run,
    RunFinished,
    RunResult,
    StreamReset,
    TextDelta,
    ToolRequest,
    check_history,
    tool,
)
from onion.errors import ConnectionLostError
from onion.providers import AnthropicModel, OpenAIChatModel
from onion.testing import FakeProviderServer, FunctionModel, ScriptedModel, call

KEY = "sk-ant-api03-abcdefghijklmnopqrstuvwxyz"
CARD = "4111 1111 1111 1111"


@tool
def lookup(name: str) -> str:
    """Look a customer up."""
    return f"{name}: jane@example.com, card {CARD}"


def sent(model: ScriptedModel | FunctionModel, index: int = -1) -> list[str]:
    return [m.text for m in model.requests[index].messages]


async def test_bare_redact_hides_emails_keys_bearer_tokens_and_card_numbers() -> None:
    model = ScriptedModel(["ok"])
    agent = Agent(model, instructions=f"use key {KEY}").use(redact)
    await agent.run(f"mail bob@corp.io, Authorization: Bearer abc.def.ghi, pay with {CARD}")
    system, user = sent(model)
    assert system == "use key [REDACTED]"
    assert user.startswith("mail [REDACTED], ") and user.endswith(" pay with [REDACTED]")
    assert "bob@" not in user and "abc.def.ghi" not in user and "1111" not in user


async def test_numbers_failing_the_luhn_check_are_left_alone() -> None:
    model = ScriptedModel(["ok"])
    await Agent(model).use(redact()).run("order 1234 5678 9012 3456 shipped; card 4012-8888-8888-1881")
    assert sent(model) == ["order 1234 5678 9012 3456 shipped; card [REDACTED]"]


def test_luhn_check() -> None:
    assert luhn_valid("4111111111111111")
    assert not luhn_valid("4111111111111112")
    assert not luhn_valid("42")


async def test_history_objects_are_never_mutated() -> None:
    """The model call gets new Message objects; run.messages keeps the originals."""
    model = ScriptedModel(["ok"])
    result = await Agent(model).use(redact).run("I am bob@corp.io")
    assert result.messages[0].text == "I am bob@corp.io"
    assert model.requests[0].messages[0] is not result.messages[0]


async def test_tool_call_arguments_in_history_are_redacted_in_what_is_sent() -> None:
    model = ScriptedModel([[call("lookup", name="bob@corp.io")], "done"])
    result = await Agent(model, tools=[lookup]).use(redact(tool_results=False)).run("q")
    assistant = model.requests[1].messages[1]
    assert assistant.tool_calls[0].args == {"name": "[REDACTED]"}
    assert assistant.tool_calls[0].id == result.messages[1].tool_calls[0].id
    assert result.messages[1].tool_calls[0].args == {"name": "bob@corp.io"}
    assert "[REDACTED]" in sent(model)[2]
    check_history(model.requests[1].messages)


async def test_tool_results_are_redacted_as_they_come_back() -> None:
    model = ScriptedModel([[call("lookup", name="jane")], "done"])
    result = await Agent(model, tools=[lookup]).use(redact).run("q")
    assert result.messages[2].text == "jane: [REDACTED], card [REDACTED]"
    check_history(result.messages)


async def test_responses_are_left_alone_unless_asked() -> None:
    answer = "write to help@corp.io"
    plain = await Agent(ScriptedModel([answer])).use(redact).run("q")
    assert plain.output == answer
    redacted = await Agent(ScriptedModel([answer])).use(redact(responses=True)).run("q")
    assert redacted.output == "write to [REDACTED]"


async def test_responses_true_redacts_tool_call_arguments_before_the_tool_runs() -> None:
    seen: list[str] = []

    @tool
    def note(text: str) -> str:
        """Take a note."""
        seen.append(text)
        return "noted"

    model = ScriptedModel([[call("note", text="key " + KEY)], "done"])
    result = await Agent(model, tools=[note]).use(redact(responses=True)).run("q")
    assert seen == ["key [REDACTED]"]
    check_history(result.messages)


async def test_custom_patterns_and_callables_with_a_custom_replacement() -> None:
    model = ScriptedModel(["ok"])
    layer = redact("ACME-\\d+", re.compile("(?i)project x"), str.upper, builtin=False, replacement="***")
    await Agent(model).use(layer).run("ticket ACME-42 about Project X for bob@corp.io")
    assert sent(model) == ["TICKET *** ABOUT *** FOR BOB@CORP.IO"]


async def test_a_message_edited_in_place_is_redacted_again_within_the_run() -> None:
    def answer(request: ModelCall) -> str | list[ToolRequest]:
        if len(model.requests) == 1:
            request.run.messages[0].text = "now secret@corp.io"
            return [call("lookup", name="x")]
        return "done"

    model = FunctionModel(answer)
    await Agent(model, tools=[lookup]).use(redact).run("hello")
    assert sent(model, 1)[0] == "now [REDACTED]"


def test_invalid_pattern_is_rejected() -> None:
    with pytest.raises(TypeError, match="is not a regex"):
        redact(42)  # type: ignore[arg-type]


def test_no_rules_at_all_is_rejected() -> None:
    with pytest.raises(TypeError, match="needs at least one pattern"):
        redact(builtin=False)


async def test_layers_inside_see_the_run_input_redacted_and_it_is_restored_after() -> None:
    seen: list[object] = []

    async def spy(run: Run, call_next: Handler) -> RunResult:
        seen.append(run.input)
        result: RunResult = await call_next(run)
        return result

    question = f"mail jane@example.com, card {CARD}"

    async def outer(run: Run, call_next: Handler) -> RunResult:
        result: RunResult = await call_next(run)
        seen.append(run.input)
        return result

    agent = Agent(ScriptedModel(["ok", "ok"]), middleware=[outer, redact, spy])
    await agent.run(question)
    await agent.run([Message.user(question)])
    assert seen[0] == "mail [REDACTED], card [REDACTED]"
    assert seen[1] == question
    assert seen[2] == [Message.user("mail [REDACTED], card [REDACTED]")]
    assert seen[3] == [Message.user(question)]


async def test_redact_hides_what_log_hides_passwords_pem_keys_and_cards_with_no_break_spaces() -> None:
    """One pattern set for both layers: `password: ...`, secret-named arguments, PEM keys, `4111\\u00a01111...`."""
    pem = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----"
    model = ScriptedModel([[call("lookup", name="x", api_key="k-123456")], "ok"])
    agent = Agent(model, tools=[lookup]).use(redact)
    await agent.run(f"password: hunter2, card 4111\u00a01111\u00a01111\u00a01111, mail josé@correo.es\n{pem}")
    (user,) = sent(model, 0)
    assert user == "password: [REDACTED], card [REDACTED], mail [REDACTED]\n[REDACTED]"
    assert model.requests[1].messages[1].tool_calls[0].args == {"name": "x", "api_key": "[REDACTED]"}


async def test_the_memo_of_redacted_messages_stays_out_of_run_state() -> None:
    """`RunResult.state` holds only what the caller and their layers put there (a paused run serialises it)."""
    model = ScriptedModel([[call("lookup", name="x")], "ok"])
    result = await Agent(model, tools=[lookup]).use(redact).run("mail bob@corp.io", state={"user": "ann"})
    assert result.state == {"user": "ann"}
    assert sent(model)[0] == "mail [REDACTED]"


class PiecewiseModel(ScriptedModel):
    """Streams each answer in pieces of `size` characters."""

    def __init__(self, script: list[Any], size: int) -> None:
        super().__init__(script)
        self.size = size

    async def stream(self, call: ModelCall) -> AsyncIterator[Any]:
        self.requests.append(call)
        response = await self.respond(call)
        for start in range(0, len(response.text), self.size):
            yield TextDelta(response.text[start : start + self.size])
        yield response


LEAKY_ANSWER = (
    "Mail jane.doe@example.com or josé@correo.es, card 4111\u00a01111\u00a01111\u00a01111 "
    f"(or 4012-8888-8888-1881), key {KEY}\nand sk-proj-ABCDEFGHIJKLMNOPQRSTUV, "
    'password: "open sesame now", Authorization: Bearer abcdef.ghijkl.mnop\n'
    "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----\nbye 4111 1111 1111 1111"
)
SECRETS_IN_ANSWER = ["jane.doe", "josé", "4111", "4012", KEY[6:], "ABCDEFGHIJ", "sesame", "abcdef.ghijkl", "MIIEvQ"]


@pytest.mark.parametrize("size", [1, 2, 3, 5, 8, 13, 1000])
async def test_streamed_text_deltas_are_redacted_like_the_final_answer(size: int) -> None:
    """`agent.stream` shows what `result.output` shows: secrets split across deltas are held until whole."""
    agent = Agent(PiecewiseModel([LEAKY_ANSWER], size)).use(redact(responses=True))
    streamed, result = "", None
    async for event in agent.stream("hi"):
        if isinstance(event, TextDelta):
            streamed += event.text
        elif isinstance(event, RunFinished):
            result = event.result
    assert result is not None and streamed == result.output
    for secret in SECRETS_IN_ANSWER:
        assert secret not in streamed, secret
    assert streamed.startswith("Mail [REDACTED] or [REDACTED], card [REDACTED] ") and streamed.endswith(
        "bye [REDACTED]"
    )


async def test_stream_deltas_are_sent_as_soon_as_no_pattern_can_still_match() -> None:
    """Only what a pattern split across deltas needs is held: plain words go out with the delta after them."""
    agent = Agent(PiecewiseModel(["hello there, my card is 4111 1111 1111 1111 ok"], 6)).use(redact(responses=True))
    deltas = [event.text async for event in agent.stream("hi") if isinstance(event, TextDelta)]
    assert deltas[:3] == ["hello ", "there, my ", "card is "]
    assert "".join(deltas) == "hello there, my card is [REDACTED] ok"
    assert "[REDACTED] " in deltas


FRAGMENTS = [
    *("sk-ant-", "proj-", "abcdefgh", "ABCDEFGHIJKLMNOP", "AKIA", "ghp_", "0123", "4111", "1111", " ", "\n", "\u00a0"),
    *("-", ".", ",", "_", "@", "x.com", "é", "password", ": ", "=", '"', "'", "Bearer ", "basic ", "token "),
    *("Authorization",),
    *("\\n", "\\", "\t", "\r", "api_key", ".co", "4012-8888", "-8888-1881"),
    *("-----BEGIN PRIVATE KEY-----", "-----END PRIVATE KEY-----", "MIIE"),
]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from(FRAGMENTS), max_size=16).map("".join),
    st.lists(st.integers(1, 12), min_size=1, max_size=30),
)
def test_a_stream_split_anywhere_is_redacted_exactly_like_the_whole_text(text: str, sizes: list[int]) -> None:
    """Whatever the delta boundaries, the deltas sent on join to `scrub(whole text)`."""
    sent: list[str] = []
    stream = RedactedStream(scrub)
    start = 0
    for size in itertools.islice(itertools.cycle(sizes), len(text)):
        if start >= len(text):
            break
        sent.extend(event.text for event in stream(TextDelta(text[start : start + size])))
        start += size
    sent.extend(event.text for event in stream.end())
    assert "".join(sent) == scrub(text)


async def test_the_same_redact_layer_twice_in_a_stack_shares_its_memo_and_cleans_up() -> None:
    """A layer used twice runs its run step nested on one run: the inner end must not drop the outer's memo."""
    layer, model = redact(), ScriptedModel(["ok"])
    result = await Agent(model).use(layer, layer).run("mail bob@corp.io")
    assert result.output == "ok" and sent(model) == ["mail [REDACTED]"]
    assert layer._memos == {}


@pytest.mark.parametrize("api", ["anthropic", "openai"])
async def test_no_delta_streamed_through_a_real_sdk_shows_a_redacted_value(
    api: str, server: FakeProviderServer, one_ssl_context: None
) -> None:
    """The fake server streams 4-character pieces through the SDK: no delta, nor two joined, holds a secret."""
    server.script(["Write to jane.doe@example.com, card 4111 1111 1111 1111, thanks"])
    model: AnthropicModel | OpenAIChatModel = (
        AnthropicModel("claude-test", base_url=server.url, api_key="test-key")
        if api == "anthropic"
        else OpenAIChatModel("gpt-test", base_url=server.openai_url, api_key="test-key")
    )
    try:
        events = [event async for event in Agent(model).use(redact(responses=True)).stream("hi")]
    finally:
        await model.aclose()
    deltas = [event.text for event in events if isinstance(event, TextDelta)]
    assert "".join(deltas) == "Write to [REDACTED], card [REDACTED], thanks"
    assert not any(isinstance(event, StreamReset) for event in events)
    for pair in zip(deltas, [*deltas[1:], ""], strict=True):
        assert "jane" not in "".join(pair) and "1111" not in "".join(pair)


class DropsOnceModel(ScriptedModel):
    """Streams half of its first answer, then the connection drops; the retry streams it whole."""

    def __init__(self, answer: str) -> None:
        super().__init__([answer, answer])
        self.dropped = False

    async def stream(self, call: ModelCall) -> AsyncIterator[Any]:
        self.requests.append(call)
        response = await self.respond(call)
        for start in range(0, len(response.text), 4):
            if not self.dropped and start >= len(response.text) // 2:
                self.dropped = True
                raise ConnectionLostError("dropped mid-stream")
            yield TextDelta(response.text[start : start + 4])
        yield response


async def test_a_stream_reset_drops_the_text_held_back_so_a_half_card_number_never_shows() -> None:
    """Digits held while a card number may be arriving are dropped with the attempt that sent them."""

    async def no_wait(seconds: float) -> None:
        return None

    answer = "your card 4111 1111 1111 1111 is on file"
    agent = Agent(DropsOnceModel(answer)).use(redact(responses=True), retry(sleep=no_wait, jitter=0))
    events = [event async for event in agent.stream("hi")]
    texts = [event.text for event in events if isinstance(event, TextDelta)]
    assert not any(digit in text for text in texts for digit in "14")
    reset = max(i for i, event in enumerate(events) if isinstance(event, StreamReset))
    after = "".join(event.text for event in events[reset:] if isinstance(event, TextDelta))
    assert after == "your card [REDACTED] is on file"


async def test_text_parts_of_a_message_with_an_image_are_redacted_and_the_bytes_left_untouched() -> None:
    """What is sent has each text part redacted and the very same image; the history keeps the original."""
    model = ScriptedModel(["ok"])
    image = Image(data=b"\x89PNG bob@corp.io", media_type="image/png")
    result = await Agent(model).use(redact).run(Message.user("from bob@corp.io", image, "card " + CARD))
    assert model.requests[0].messages[0].parts == ["from [REDACTED]", image, "card [REDACTED]"]
    assert model.requests[0].messages[0].text == "from [REDACTED]\ncard [REDACTED]"
    assert model.requests[0].messages[0].parts[1].data == b"\x89PNG bob@corp.io"  # type: ignore[union-attr]
    assert result.messages[0].parts[0] == "from bob@corp.io"
