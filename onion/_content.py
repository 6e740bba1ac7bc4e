"""Message parts beyond text: images and documents, given as bytes or as a URL."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any, TypeAlias

from ._text import valid_text

IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")
"""Image media types every supported API accepts."""


@dataclass(frozen=True, slots=True)
class Image:
    """An image: `Image(data=png_bytes, media_type="image/png")` or `Image.from_url(url)`."""

    data: bytes | None = None
    media_type: str | None = None
    url: str | None = None

    def __post_init__(self) -> None:
        _check(self, "Image", IMAGE_TYPES)

    @classmethod
    def from_url(cls, url: str) -> Image:
        """An image the provider fetches from `url`."""
        return cls(url=url)


@dataclass(frozen=True, slots=True)
class Document:
    """A PDF document: `Document(data=pdf_bytes)` or `Document.from_url(url)`."""

    data: bytes | None = None
    media_type: str = "application/pdf"
    url: str | None = None

    def __post_init__(self) -> None:
        _check(self, "Document", ("application/pdf",))

    @classmethod
    def from_url(cls, url: str) -> Document:
        """A document the provider fetches from `url`."""
        return cls(url=url)


def _check(part: Image | Document, kind: str, media_types: tuple[str, ...]) -> None:
    if (part.data is None) == (part.url is None):
        raise ValueError(f"{kind} needs exactly one of data= (bytes) or url=")
    if part.data is not None:
        if not isinstance(part.data, bytes):
            raise TypeError(f"{kind}(data=...) must be bytes, not {type(part.data).__name__}")
        if part.media_type not in media_types:
            raise ValueError(f"{kind}(media_type={part.media_type!r}) must be one of {', '.join(media_types)}")
    elif not isinstance(part.url, str) or not part.url:
        raise TypeError(f"{kind}(url=...) must be a non-empty str")


Part: TypeAlias = str | Image | Document
"""One part of a message's content: text, an image or a document."""

MEDIA = (Image, Document)


def as_parts(parts: tuple[Any, ...] | list[Any], owner: str) -> list[Part]:
    """`parts` checked to be `str`, `Image` or `Document`; raises `TypeError` naming the bad one."""
    for index, part in enumerate(parts):
        if not isinstance(part, str | Image | Document):
            raise TypeError(f"{owner}: part {index} is a {type(part).__name__}; parts are str, Image or Document")
    return list(parts)


def joined_text(parts: list[Part]) -> str:
    """The text parts of `parts`, joined with a line break."""
    return "\n".join(part for part in parts if isinstance(part, str))


def data_url(part: Image | Document) -> str:
    """The part as a `data:` URL (its URL when it has one)."""
    if part.data is None:
        return part.url or ""
    return f"data:{part.media_type};base64,{base64.b64encode(part.data).decode('ascii')}"


def b64(data: bytes | None) -> str:
    return base64.b64encode(data or b"").decode("ascii")


def part_dict(part: Part) -> dict[str, Any]:
    """The part as JSON-able data (bytes base64-encoded); `part_from` reads it back."""
    if isinstance(part, str):
        return {"type": "text", "text": part}
    kind = "image" if isinstance(part, Image) else "document"
    if part.data is None:
        return {"type": kind, "url": part.url}
    return {"type": kind, "media_type": part.media_type, "data": b64(part.data)}


def part_from(data: Any) -> Part:
    """The part `part_dict` made; raises `ValueError` saying what is wrong."""
    if not isinstance(data, dict):
        raise ValueError(f"a content part must be a dict as part_dict makes, not {type(data).__name__}")
    kind = data.get("type")
    if kind == "text" and isinstance(data.get("text"), str):
        return str(data["text"])
    if kind not in ("image", "document"):
        raise ValueError(f"content part type {kind!r} is not one of text, image, document")
    cls = Image if kind == "image" else Document
    try:
        if "url" in data:
            return cls(url=data["url"])
        return cls(data=base64.b64decode(data["data"], validate=True), media_type=data["media_type"])
    except (KeyError, TypeError, ValueError) as error:
        raise ValueError(f"content part {kind}: {error}") from None


def describe(part: Image | Document) -> str:
    """A short description for logs and errors: kind, media type, size or URL."""
    if part.data is None:
        return f"<{type(part).__name__} {part.url}>"
    return f"<{type(part).__name__} {part.media_type} {len(part.data)} bytes>"


def valid_text_parts(parts: list[Part]) -> list[Part]:
    """`parts` with each text part's lone surrogates replaced (see `onion._text.valid_text`)."""
    return [valid_text(part) if isinstance(part, str) else part for part in parts]


def content_text(content: str | list[Part]) -> str:
    """Content as one text for logs and traces: text parts as they are, images and documents described."""
    if isinstance(content, str):
        return content
    return "\n".join(part if isinstance(part, str) else describe(part) for part in content)
