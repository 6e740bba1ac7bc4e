"""`FakeProviderServer` left open: the interpreter still exits, and says the server was left open."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

LEFT_OPEN = textwrap.dedent(
    """
    import asyncio
    from onion import Agent
    from onion.providers import {model}
    from onion.testing import FakeProviderServer

    server = FakeProviderServer(["hello"]).start()

    async def main() -> None:
        agent = Agent({model}("test-model", base_url=server.{url}, api_key="x"))
        print((await agent.run("hi")).output)

    asyncio.run(main())
    """
)
"""A script that serves one real SDK request (a kept-alive connection) and never closes the server."""


@pytest.mark.parametrize(("model", "url"), [("AnthropicModel", "url"), ("OpenAIChatModel", "openai_url")])
def test_a_server_left_open_after_an_sdk_request_lets_the_interpreter_exit_with_a_warning(
    tmp_path: Path, model: str, url: str
) -> None:
    """`python script.py` ends at once (it hung until killed), and stderr names the server left open."""
    script = tmp_path / "script.py"
    script.write_text(LEFT_OPEN.format(model=model, url=url))
    try:
        done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("the interpreter did not exit: a FakeProviderServer thread held it")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "hello\n"
    assert "FakeProviderServer" in done.stderr and "left open" in done.stderr
