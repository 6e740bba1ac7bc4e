"""`pseudonymize`: the model sees placeholders; tools, the history and the user see the real values."""

from __future__ import annotations

import itertools
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from middleware import approve, pseudonymize
from middleware.pseudonymize import Pseudonyms, RestoredStream
from onion import Agent, Image, Message, ModelResponse, RunFinished, RunState, StreamReset, TextDelta, ToolRequest, tool
from onion.providers import AnthropicModel, OpenAIChatModel, OpenAIResponsesModel
from onion.testing import FakeProviderServer, ScriptedModel

EMAIL = "jane.doe@example.com"
received: list[str] = []


@tool
def send_mail(to: str, body: str) -> str:
    """Send an e-mail."""
    received.append(to)
    return f"sent to {to}"


def provider(api: str, server: FakeProviderServer) -> AnthropicModel | OpenAIChatModel | OpenAIResponsesModel:
    if api == "anthropic":
        return AnthropicModel("claude-test", base_url=server.url, api_key="test-key")
    if api == "openai":
        return OpenAIChatModel("gpt-test", base_url=server.openai_url, api_key="test-key")
    return OpenAIResponsesModel("gpt-test", base_url=server.openai_url, api_key="test-key")


@pytest.mark.parametrize("streamed", [False, True], ids=["run", "stream"])
@pytest.mark.parametrize("api", ["anthropic", "openai", "openai-responses"])
async def test_the_model_sees_a_placeholder_the_tool_and_the_user_the_real_address(
    api: str, streamed: bool, server: FakeProviderServer, one_ssl_context: None
) -> None:
    """Through a real SDK: no request holds the address; the tool gets it; the answer (and each delta) shows it."""
    received.clear()
    server.script(
        [
            [ToolRequest("call_1", "send_mail", {"to": "<EMAIL_1>", "body": "Hello <EMAIL_1>"})],
            "Done: I wrote to <EMAIL_1> for you.",
        ]
    )
    model = provider(api, server)
    agent = Agent(model, tools=[send_mail]).use(pseudonymize)
    deltas: list[str] = []
    try:
        if streamed:
            async for event in agent.stream(f"Please mail {EMAIL} a hello"):
                if isinstance(event, TextDelta):
                    deltas.append(event.text)
                elif isinstance(event, StreamReset):
                    deltas.clear()
                elif isinstance(event, RunFinished):
                    result = event.result
        else:
            result = await agent.run(f"Please mail {EMAIL} a hello")
    finally:
        await model.aclose()

    sent = [json.dumps(request.body, ensure_ascii=False) for request in server.requests]
    assert len(sent) == 2 and all("jane" not in body for body in sent)
    assert all("<EMAIL_1>" in body for body in sent)
    assert received == [EMAIL]
    assert result.output == f"Done: I wrote to {EMAIL} for you."
    assert result.messages[-3].tool_calls[0].args == {"to": EMAIL, "body": f"Hello {EMAIL}"}
    assert result.state == {}
    if streamed:
        assert "".join(deltas) == result.output and len(deltas) > 3
        assert not any("<" in delta or "EMAIL" in delta for delta in deltas)


async def test_placeholders_survive_a_pause_and_resume_through_the_runs_state() -> None:
    """After a pause saved as JSON, the resumed run restores `<EMAIL_1>` and numbers a new address `<EMAIL_2>`."""
    received.clear()
    model = ScriptedModel(
        [
            [ToolRequest("call_1", "send_mail", {"to": "<EMAIL_1>", "body": "hi"})],
            "Sent to <EMAIL_1>; should I copy <EMAIL_2>?",
        ]
    )
    agent = Agent(model, tools=[send_mail]).use(pseudonymize, approve("send_mail"))
    paused = await agent.run(f"mail {EMAIL}")
    assert paused.paused and paused.pending[0].args == {"to": EMAIL, "body": "hi"}
    assert paused.state == {}
    state = RunState.from_json(paused.to_state().to_json())
    assert state.private == {"pseudonymize": {"<EMAIL_1>": EMAIL}} and state.state == {}
    state.approve_all()
    state.injected.append(Message.user("and cc bob@corp.io"))
    result = await agent.resume(state)
    assert received == [EMAIL]
    assert result.output == f"Sent to {EMAIL}; should I copy bob@corp.io?"
    last = [message.text for message in model.requests[-1].messages]
    assert "mail <EMAIL_1>" in last and "and cc <EMAIL_2>" in last
    assert not any("jane" in text or "bob@" in text for text in last)


@given(st.lists(st.integers(1, 9), min_size=1, max_size=12))
def test_a_placeholder_split_anywhere_across_deltas_is_restored_whole(sizes: list[int]) -> None:
    """Whatever the delta boundaries, the deltas join to the restored text and none shows part of a placeholder."""
    pseudonyms = Pseudonyms({"<EMAIL_1>": EMAIL, "<PHONE_12>": "+44 20 7946 0958"})
    text = "Mail <EMAIL_1>, call <PHONE_12> <not a tag> or <EMAIL_9> x<"
    stream, sent, start = RestoredStream(pseudonyms), [], 0
    for size in itertools.cycle(sizes):
        if start >= len(text):
            break
        sent.extend(event.text for event in stream(TextDelta(text[start : start + size])))
        start += size
    sent.extend(event.text for event in stream.end())
    assert (
        "".join(sent)
        == pseudonyms.restore(text)
        == (f"Mail {EMAIL}, call +44 20 7946 0958 <not a tag> or <EMAIL_9> x<")
    )
    assert not any("<EMAIL_1" in piece or "<PHONE" in piece for piece in sent)


def test_each_kind_gets_stable_numbered_placeholders_and_your_patterns_come_first() -> None:
    """The same value always maps to one placeholder; IBANs, cards, phones and labelled patterns are found."""
    layer, pseudonyms = pseudonymize(r"ACC-\d{6}", EMPLOYEE=r"EMP-\d{4}"), Pseudonyms()
    text = (
        "jane@x.io, bob@y.org and jane@x.io; card 4111 1111 1111 1111; 1234 5678 9012 3456 stays; "
        "IBAN DE89 3704 0044 0532 0130 00; call +44 20 7946 0958 or (555) 123-4567 on 2024-01-15; "
        "ACC-123456 and EMP-0042"
    )
    assert layer.text(text, pseudonyms) == (
        "<EMAIL_1>, <EMAIL_2> and <EMAIL_1>; card <CARD_1>; 1234 5678 9012 3456 stays; "
        "IBAN <IBAN_1>; call <PHONE_1> or <PHONE_2> on 2024-01-15; <PII_1> and <EMPLOYEE_1>"
    )
    assert pseudonyms.restore(layer.text(text, pseudonyms)) == text
    assert Pseudonyms(dict(pseudonyms.values)).placeholder("EMAIL", "new@z.io") == "<EMAIL_3>"


def test_bad_patterns_and_labels_are_refused_saying_what_to_fix() -> None:
    with pytest.raises(TypeError, match="not a regex"):
        pseudonymize(42)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="upper case"):
        pseudonymize(employee=r"EMP-\d+")
    with pytest.raises(TypeError, match="at least one pattern"):
        pseudonymize(builtin=False)


async def test_a_model_answer_without_placeholders_is_returned_as_it_is() -> None:
    response = ModelResponse(Message.assistant("nothing personal"))
    agent = Agent(ScriptedModel([response])).use(pseudonymize)
    assert (await agent.run("hi")).output == "nothing personal"


async def test_the_text_parts_of_a_message_with_an_image_get_placeholders_and_the_image_is_kept() -> None:
    """A user message of text and an `Image`: its text parts reach the model with placeholders, the image as is."""
    image = Image(data=b"\x89PNG fake", media_type="image/png")
    model = ScriptedModel(["That is <EMAIL_1>'s badge."])
    result = await Agent(model).use(pseudonymize).run(Message.user(f"whose badge? {EMAIL}", image))
    assert model.requests[0].messages[-1].parts == ["whose badge? <EMAIL_1>", image]
    assert result.output == f"That is {EMAIL}'s badge."
