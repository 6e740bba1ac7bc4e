"""Vision: an image in the question, a tool that returns an image. Runs offline.

The model is Claude through the real `anthropic` SDK, talking to onion's fake
provider server, so what you see is the request body the API would get.

python examples/vision.py
"""

from __future__ import annotations

import asyncio
import base64
import zlib

from middleware import prompt_cache
from onion import Agent, Image, Message, tool
from onion.providers import AnthropicModel
from onion.testing import FakeProviderServer, call


def png(width: int, height: int, grey: int) -> bytes:
    """A plain grey PNG (a stand-in for a real screenshot)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return len(data).to_bytes(4, "big") + body + zlib.crc32(body).to_bytes(4, "big")

    header = width.to_bytes(4, "big") + height.to_bytes(4, "big") + bytes([8, 0, 0, 0, 0])
    rows = b"".join(b"\x00" + bytes([grey]) * width for _ in range(height))
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


@tool
def zoom(x: int, y: int) -> list[object]:
    """Zoom into the screenshot around (x, y): returns a caption and the enlarged image."""
    return [f"zoomed at {x},{y}", Image(data=png(8, 8, 200), media_type="image/png")]


def describe(block: dict[str, object]) -> str:
    source = block.get("source")
    if isinstance(source, dict):
        size = len(base64.b64decode(str(source["data"])))
        return f"{block['type']}({source['media_type']}, {size} bytes)"
    if block["type"] == "tool_result":
        inner = block["content"]
        parts = [describe(part) for part in inner] if isinstance(inner, list) else [repr(inner)]
        return f"tool_result[{', '.join(parts)}]"
    return f"{block['type']}({block.get('text', '')!r})"


async def main() -> list[str]:
    with FakeProviderServer([[call("zoom", x=3, y=4)], "A grey window with a lighter button."]) as server:
        model = AnthropicModel("claude-sonnet-5-5", base_url=server.url, api_key="offline")
        agent = Agent(model, tools=[zoom], instructions="Describe screenshots.").use(prompt_cache)
        screenshot = Image(data=png(16, 16, 90), media_type="image/png")
        result = await agent.run(Message.user("What is on this screen?", screenshot))
        await model.aclose()
        lines = []
        for number, request in enumerate(server.requests, 1):
            for entry in request.body["messages"]:
                blocks = ", ".join(describe(block) for block in entry["content"])
                lines.append(f"request {number} {entry['role']}: {blocks}")
        lines.append(f"answer: {result.output}")
        return lines


if __name__ == "__main__":
    for line in asyncio.run(main()):
        print(line)
