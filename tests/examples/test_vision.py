"""examples/vision.py sends an image in and gets one back from a tool, on the Anthropic wire."""

from __future__ import annotations

import runpy
from pathlib import Path

EXAMPLES = Path(__file__).parents[2] / "examples"


async def test_vision_example_sends_the_screenshot_and_the_zoomed_image_back_to_the_model() -> None:
    """The question's image and the tool's image both reach the request body as image blocks."""
    main = runpy.run_path(str(EXAMPLES / "vision.py"), run_name="example_vision")["main"]
    assert await main() == [
        "request 1 user: text('What is on this screen?'), image(image/png, 72 bytes)",
        "request 2 user: text('What is on this screen?'), image(image/png, 72 bytes)",
        "request 2 assistant: tool_use('')",
        "request 2 user: tool_result[text('zoomed at 3,4'), image(image/png, 71 bytes)]",
        "answer: A grey window with a lighter button.",
    ]
