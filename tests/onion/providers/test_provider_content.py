"""Images and documents on the wire: the exact request bodies of each API, through the real SDKs."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from onion import Agent, Document, Image, Message, tool
from onion.errors import UnsupportedContent
from onion.testing import FakeProviderServer, call

from .conftest import ModelFactory

PNG = b"\x89PNG\r\n\x1a\n-fake-png-"
PDF = b"%PDF-1.7 fake"
PNG_B64 = base64.b64encode(PNG).decode()
PDF_B64 = base64.b64encode(PDF).decode()
PNG_URL = f"data:image/png;base64,{PNG_B64}"
PDF_URL = f"data:application/pdf;base64,{PDF_B64}"


@tool
def screenshot() -> Image:
    """Take a screenshot."""
    return Image(data=PNG, media_type="image/png")


def first_user_content(api: str, body: dict[str, Any]) -> Any:
    if api == "openai-responses":
        return body["input"][0]["content"]
    return body["messages"][0]["content"]


IMAGE_IN_USER = {
    "anthropic": [
        {"type": "text", "text": "what is this?"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG_B64}},
        {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.png"}},
    ],
    "openai": [
        {"type": "text", "text": "what is this?"},
        {"type": "image_url", "image_url": {"url": PNG_URL}},
        {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}},
    ],
    "openai-responses": [
        {"type": "input_text", "text": "what is this?"},
        {"type": "input_image", "image_url": PNG_URL, "detail": "auto"},
        {"type": "input_image", "image_url": "https://example.com/cat.png", "detail": "auto"},
    ],
}


async def test_an_image_in_a_user_message_is_sent_as_each_apis_image_part(
    api: str, server: FakeProviderServer, make_model: ModelFactory
) -> None:
    """Bytes travel base64 (Anthropic) or as a data URL (OpenAI), a URL as it is, after the text."""
    server.script(["a cat"])
    message = Message.user(
        "what is this?", Image(data=PNG, media_type="image/png"), Image.from_url("https://example.com/cat.png")
    )
    result = await Agent(make_model(api)).run(message)
    assert result.output == "a cat"
    assert first_user_content(api, server.requests[0].body) == IMAGE_IN_USER[api]


PDF_IN_USER = {
    "anthropic": [
        {"type": "text", "text": "summarise"},
        {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": PDF_B64}},
    ],
    "openai": [
        {"type": "text", "text": "summarise"},
        {"type": "file", "file": {"filename": "document.pdf", "file_data": PDF_URL}},
    ],
    "openai-responses": [
        {"type": "input_text", "text": "summarise"},
        {"type": "input_file", "filename": "document.pdf", "file_data": PDF_URL},
    ],
}


async def test_a_pdf_document_is_sent_as_each_apis_document_part(
    api: str, server: FakeProviderServer, make_model: ModelFactory
) -> None:
    """A PDF goes as an Anthropic `document` block, a Chat `file` part, a Responses `input_file`."""
    server.script(["short"])
    await Agent(make_model(api)).run(Message.user("summarise", Document(data=PDF)))
    assert first_user_content(api, server.requests[0].body) == PDF_IN_USER[api]


async def test_a_document_url_goes_as_a_url_where_the_api_takes_one_and_is_refused_before_the_request_on_chat(
    api: str, server: FakeProviderServer, make_model: ModelFactory
) -> None:
    """Chat takes file data only: a document URL raises `UnsupportedContent` naming the message; none is sent."""
    url = "https://example.com/report.pdf"
    agent = Agent(make_model(api))
    if api == "openai":
        with pytest.raises(UnsupportedContent, match=r"message 0: OpenAI Chat takes a document as data"):
            await agent.run(Message.user("read", Document.from_url(url)))
        assert server.requests == []
        return
    server.script(["done"])
    await agent.run(Message.user("read", Document.from_url(url)))
    part = first_user_content(api, server.requests[0].body)[1]
    expected = (
        {"type": "document", "source": {"type": "url", "url": url}}
        if api == "anthropic"
        else {"type": "input_file", "file_url": url}
    )
    assert part == expected


async def test_a_tool_returning_an_image_is_answered_with_the_image_in_each_apis_own_way(
    api: str, server: FakeProviderServer, make_model: ModelFactory
) -> None:
    """Anthropic: image blocks in the tool_result; Responses: an output list; Chat (text-only tool messages):
    the tool message says where to look and one user message with the image follows the batch's results."""
    server.script([[call("screenshot")], "a desktop"])
    result = await Agent(make_model(api), tools=[screenshot]).run("look at my screen")
    assert result.output == "a desktop"
    assert result.messages[2].parts == [Image(data=PNG, media_type="image/png")]
    body = server.requests[1].body
    if api == "anthropic":
        call_id = body["messages"][1]["content"][0]["id"]
        assert body["messages"][2] == {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": call_id,
                    "content": [
                        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG_B64}}
                    ],
                    "is_error": False,
                }
            ],
        }
    elif api == "openai":
        call_id = body["messages"][1]["tool_calls"][0]["id"]
        assert body["messages"][2:] == [
            {"role": "tool", "tool_call_id": call_id, "content": "(see the next message)"},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": f"Returned by tool call {call_id}:"},
                    {"type": "image_url", "image_url": {"url": PNG_URL}},
                ],
            },
        ]
    else:
        call_id = body["input"][1]["call_id"]
        assert body["input"][2] == {
            "type": "function_call_output",
            "call_id": call_id,
            "output": [{"type": "input_image", "image_url": PNG_URL, "detail": "auto"}],
        }


async def test_an_image_in_an_assistant_message_is_refused_before_the_request_on_every_api(
    api: str, server: FakeProviderServer, make_model: ModelFactory
) -> None:
    """No API carries images in an assistant turn: a clear error naming the message, never a silent drop."""
    history = [
        Message.user("draw a cat"),
        Message("assistant", "here", content=["here", Image(data=PNG, media_type="image/png")]),
        Message.user("thanks"),
    ]
    with pytest.raises(UnsupportedContent, match=r"message 1: an assistant message cannot carry Image parts"):
        await Agent(make_model(api)).run(history)
    assert server.requests == []
