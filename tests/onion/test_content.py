"""Message parts beyond text: images and documents in messages, tool results and saved runs."""

from __future__ import annotations

import json

import pytest

from middleware import approve
from onion import Agent, Document, Image, Message, RunState, ToolResult, tool
from onion.stores import MemoryStore
from onion.testing import ScriptedModel, call

PNG = b"\x89PNG\r\n\x1a\n\x00\xff-pixels-"
PDF = b"%PDF-1.7\n\x00\xfe binary"


@tool
def screenshot() -> Image:
    """Take a screenshot."""
    return Image(data=PNG, media_type="image/png")


@tool
def annotated() -> list[object]:
    """A caption, an image and a number."""
    return ["caption", Image(data=PNG, media_type="image/png"), 3]


def test_user_parts_keep_their_order_and_text_joins_the_text_parts() -> None:
    """`message.parts` lists the parts as given; `message.text` is the text parts joined by a line break."""
    image = Image(data=PNG, media_type="image/png")
    message = Message.user("look:", image, "what is it?")
    assert message.parts == ["look:", image, "what is it?"]
    assert message.text == "look:\nwhat is it?"
    assert Message.user("plain").parts == ["plain"]
    assert Message.user("plain").content is None


def test_text_only_parts_make_a_plain_text_message() -> None:
    """Only str parts: no `content` list (text messages cost what they cost before)."""
    message = Message.user("a", "b")
    assert (message.text, message.content) == ("a\nb", None)


def test_bytes_round_trip_through_to_dict_and_json_as_base64() -> None:
    """An image's and a document's bytes survive `to_dict` -> JSON -> `from_dict` exactly."""
    message = Message.user("both", Image(data=PNG, media_type="image/png"), Document(data=PDF))
    data = json.loads(json.dumps(message.to_dict()))
    assert data["content"][1] == {"type": "image", "media_type": "image/png", "data": "iVBORw0KGgoA/y1waXhlbHMt"}
    assert Message.from_dict(data) == message
    by_url = Message.user(Image.from_url("https://example.com/a.png"))
    assert Message.from_dict(by_url.to_dict()) == by_url


def test_parts_that_cannot_be_sent_raise_a_clear_error() -> None:
    """A wrong part type, an image without data or URL, an unknown media type, a bad stored part: each says what."""
    with pytest.raises(TypeError, match=r"Message.user: part 1 is a int; parts are str, Image or Document"):
        Message.user("x", 3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"Image needs exactly one of data= \(bytes\) or url="):
        Image()
    with pytest.raises(ValueError, match=r"Image\(media_type='image/tiff'\) must be one of image/png"):
        Image(data=PNG, media_type="image/tiff")
    with pytest.raises(ValueError, match=r"Document\(media_type='text/plain'\) must be one of application/pdf"):
        Document(data=b"x", media_type="text/plain")
    with pytest.raises(ValueError, match=r"content part image"):
        Message.from_dict({"role": "user", "text": "", "content": [{"type": "image", "data": "!!"}]})


async def test_a_tool_returning_an_image_answers_with_parts() -> None:
    """The `ToolResult.content` holds the image; the tool message carries it as its parts."""
    model = ScriptedModel([[call("screenshot"), call("annotated")], "seen"])
    result = await Agent(model, tools=[screenshot, annotated]).run("look")
    image = Image(data=PNG, media_type="image/png")
    assert result.messages[2].parts == [image]
    assert result.messages[3].parts == ["caption", image, "3"]
    assert result.messages[3].text == "caption\n3"
    assert ToolResult(content=[image]).text == "<Image image/png 18 bytes>"


async def test_a_run_with_an_image_pauses_and_resumes_from_json_with_its_bytes() -> None:
    """The paused run's JSON holds the image (base64); the resumed run sends the same bytes to the model."""
    model = ScriptedModel([[call("screenshot")], "a desktop"])
    agent = Agent(model, tools=[screenshot]).use(approve)
    question = Message.user("what is on screen?", Image(data=PNG, media_type="image/png"))
    paused = await agent.run(question)
    assert paused.paused
    state = RunState.from_json(paused.to_state().to_json())
    state.approve_all()
    result = await agent.resume(state)
    assert result.output == "a desktop"
    sent = model.requests[1].messages
    assert sent[0].parts == question.parts
    assert sent[2].parts == [Image(data=PNG, media_type="image/png")]


async def test_a_journaled_run_keeps_a_tool_image_and_a_saved_run_loads_it_back() -> None:
    """With a store, the journal records the tool's image (base64) and `store.load` gives back its bytes."""
    model = ScriptedModel([[call("screenshot")], "a desktop"])
    agent = Agent(model, tools=[screenshot], store=MemoryStore())
    result = await agent.run(Message.user("look", Image(data=PNG, media_type="image/png")))
    assert result.output == "a desktop"
    state = await agent.store.load(result.run_id)
    assert state.messages[0].parts[1] == Image(data=PNG, media_type="image/png")
    assert state.messages[2].parts == [Image(data=PNG, media_type="image/png")]
