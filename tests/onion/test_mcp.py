"""MCP servers as tools: a real server (tests/onion/mcp_server.py) over stdio and over streamable HTTP."""

from __future__ import annotations

import asyncio
import base64
import os
import re
import runpy
import socket
import sys
import threading
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import uvicorn
from mcp.types import (
    BlobResourceContents,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
)
from mcp.types import Tool as McpTool

from middleware import approve, deny_tools, timeout
from onion import Agent, Document, Image, ModelCall, RunState, ToolCall, tool
from onion.errors import MCPServerError, ToolNameClash
from onion.hooks import before_each_tool
from onion.mcp import MCPServer, MCPTool, tool_result
from onion.providers import AnthropicModel
from onion.testing import FakeProviderServer, FunctionModel, ScriptedModel, call

pytestmark = pytest.mark.asyncio(loop_scope="module")

SERVER = Path(__file__).with_name("mcp_server.py")
PNG_B64 = "iVBORw0KGgo="
"""The image the test server's `picture` and `attachments` tools return (as mcp_server.py has it)."""
PDF_B64 = "JVBERi0xLjcgZmFrZQ=="


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    """The test server over streamable HTTP on 127.0.0.1, served from a thread of this process."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    port = sock.getsockname()[1]
    app = runpy.run_path(str(SERVER))["build"]().streamable_http_app()
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=lambda: asyncio.run(server.serve(sockets=[sock])), name="mcp-test-server")
    thread.start()
    yield f"http://127.0.0.1:{port}/mcp"
    server.should_exit = True
    thread.join(10)
    sock.close()


@pytest_asyncio.fixture(scope="module", loop_scope="module", params=["stdio", "http"])
async def docs(request: pytest.FixtureRequest, http_url: str) -> AsyncIterator[MCPServer]:
    """The test server, prefixed `docs_`, shared by this module's tests over one transport."""
    if request.param == "stdio":
        server = MCPServer.stdio(sys.executable, str(SERVER), prefix="docs_", name="docs")
    else:
        server = MCPServer.http(http_url, headers={"x-tenant": "tests"}, prefix="docs_", name="docs over http")
    yield server
    await server.aclose()


def child_processes() -> set[int]:
    """The processes whose parent is this one (a zombie counts until it is reaped)."""
    children = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == os.getpid():
                children.add(int(entry))
    return children


def tool_answers(messages: list[Any]) -> list[tuple[str, bool]]:
    return [(m.text, m.is_error) for m in messages if m.role == "tool"]


async def test_two_mcp_tools_and_a_local_tool_run_in_one_batch(docs: MCPServer) -> None:
    """The model is offered the server's tools (prefixed, with their schemas) beside the local one; all three run."""
    model = ScriptedModel(
        [[call("docs_search", query="onions"), call("docs_read_page", page=2), call("add", a=1, b=2)], "ok"]
    )
    result = await Agent(model, tools=[add, docs]).run("go")
    assert tool_answers(result.messages) == [
        ("3 pages about onions", False),
        ('{\n  "page": 2,\n  "title": "Page 2"\n}', False),
        ("3", False),
    ]
    offered = {t.name: t for t in model.requests[0].tools}
    assert {"add", "docs_search", "docs_read_page", "docs_hang"} <= offered.keys()
    search = offered["docs_search"]
    assert isinstance(search, MCPTool) and search.remote_name == "search"
    assert search.description == "Search the documents."
    assert search.parameters["properties"]["query"]["type"] == "string"
    assert search.parameters["required"] == ["query"]


async def test_an_http_server_gets_the_headers_given(docs: MCPServer) -> None:
    result = await Agent(ScriptedModel([[call("docs_header", name="x-tenant")], "ok"]), tools=[docs]).run("go")
    expected = "tests" if docs.name == "docs over http" else ""
    assert tool_answers(result.messages) == [(expected, False)]


async def test_a_hook_with_a_regex_matcher_sees_the_mcp_calls(docs: MCPServer) -> None:
    seen: list[tuple[str, dict[str, Any]]] = []

    @before_each_tool(re.compile(r"docs_\w+"))
    def note(call: ToolCall) -> None:
        seen.append((call.name, dict(call.args)))

    model = ScriptedModel([[call("docs_search", query="a"), call("add", a=1, b=1), call("docs_pid")], "ok"])
    await Agent(model, tools=[add, docs], middleware=[note]).run("go")
    assert seen == [("docs_search", {"query": "a"}), ("docs_pid", {})]


async def test_deny_tools_blocks_an_mcp_tool_by_name(docs: MCPServer) -> None:
    """The denied tool is not offered, and a call to it is answered blocked without reaching the server."""
    model = ScriptedModel([[call("docs_delete_page", page=1), call("docs_search", query="x")], "ok"])
    result = await Agent(model, tools=[docs], middleware=[deny_tools("docs_delete_page")]).run("go")
    (blocked, blocked_error), (found, found_error) = tool_answers(result.messages)
    assert blocked_error and "blocked" in blocked and "docs_delete_page" in blocked
    assert (found, found_error) == ("3 pages about x", False)
    assert "docs_delete_page" not in {t.name for t in model.requests[0].tools}


async def test_approve_pauses_an_mcp_tool_and_resume_runs_it(docs: MCPServer) -> None:
    """The paused call survives a JSON round trip; once approved it runs on the server."""
    model = ScriptedModel([[call("docs_delete_page", page=3), call("docs_search", query="y")], "done"])
    agent = Agent(model, tools=[docs], middleware=[approve("docs_delete_page")])
    paused = await agent.run("tidy")
    assert paused.paused and [p.name for p in paused.pending] == ["docs_delete_page"]
    state = RunState.from_json(paused.to_state().to_json())
    state.approve_all()
    result = await agent.resume(state)
    assert result.output == "done"
    assert tool_answers(result.messages) == [("deleted page 3", False), ("3 pages about y", False)]


async def test_error_results_for_is_error_a_raising_tool_and_a_protocol_error_and_the_run_goes_on(
    docs: MCPServer,
) -> None:
    model = ScriptedModel([[call("docs_quota"), call("docs_broken"), call("docs_refuse"), call("docs_picture")], "ok"])
    result = await Agent(model, tools=[docs]).run("go")
    quota, broken, refused, picture = tool_answers(result.messages)
    assert quota == ("quota exceeded: try tomorrow", True)
    assert broken[1] and "broken" in broken[0]
    assert refused[1] and f"MCP server {docs.name!r}" in refused[0] and "-32001" in refused[0]
    assert "not allowed for this client" in refused[0]
    assert picture == ("a red dot", False)  # the image is a part of the result (see below), not text
    assert result.output == "ok"


async def test_a_hung_server_is_bounded_by_timeout_and_its_request_cancelled(docs: MCPServer) -> None:
    """The hung call becomes a timeout error; the server is told to stop it (its handler is cancelled)."""
    token = uuid.uuid4().hex
    model = ScriptedModel([[call("docs_hang", token=token), call("docs_search", query="z")], "ok"])
    result = await Agent(model, tools=[docs], middleware=[timeout(per_tool={"docs_hang": 0.5})]).run("go")
    (hung, hung_error), found = tool_answers(result.messages)
    assert hung_error and "timed out after 0.5s" in hung
    assert found == ("3 pages about z", False)
    assert await _was_cancelled(docs, token)


async def test_cancelling_a_run_cancels_its_mcp_request(docs: MCPServer, tmp_path: Path) -> None:
    token, marker = uuid.uuid4().hex, tmp_path / "started"
    model = ScriptedModel([[call("docs_hang", token=token, marker=str(marker))], "ok"])
    task = asyncio.ensure_future(Agent(model, tools=[docs]).run("go"))
    async with asyncio.timeout(20):
        while not marker.exists():  # the server has the call
            await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await _was_cancelled(docs, token)


async def _was_cancelled(docs: MCPServer, token: str) -> bool:
    """Ask the server (through the tool object, outside any run) whether the `hang` with `token` was cancelled."""
    tools = {t.name: t for t in await docs.list_tools(None)}
    answer = await tools["docs_was_cancelled"](token=token)
    return bool(answer.content == "true")


async def test_a_server_killed_mid_call_gives_error_results_and_is_restarted_on_the_next_run() -> None:
    """The killed call and later calls of that run are errors saying so; the next run has a new process;
    after aclose no process or task is left."""
    children, tasks = child_processes(), asyncio.all_tasks()
    server = MCPServer.stdio(sys.executable, str(SERVER), name="docs")
    model = ScriptedModel([[call("crash")], [call("search", query="a")], "gone", [call("pid")], "back"])
    async with Agent(model, tools=[add, server]) as agent:
        first = await agent.run("go")
        (crashed, crashed_error), (later, later_error) = tool_answers(first.messages)
        assert crashed_error and "MCP server 'docs' stopped during the call" in crashed
        assert "the next run starts it again" in crashed
        assert later_error and "MCP server 'docs' is not running" in later
        assert first.output == "gone"
        second = await agent.run("again")
        [(pid, pid_error)] = tool_answers(second.messages)
        assert not pid_error and int(pid) in child_processes()
    assert not child_processes() - children
    assert not asyncio.all_tasks() - tasks


async def test_a_server_that_cannot_start_stops_the_run_with_a_clear_error() -> None:
    server = MCPServer.stdio("/nonexistent/mcp-server", name="ghost")
    async with Agent(ScriptedModel(["never"]), tools=[server]) as agent:
        with pytest.raises(MCPServerError, match=r"MCP server 'ghost' could not start: FileNotFoundError"):
            await agent.run("go")


async def test_of_two_servers_one_that_cannot_start_stops_the_run_naming_it(http_url: str) -> None:
    servers = [MCPServer.http(http_url, name="docs"), MCPServer.stdio("/nonexistent/mcp-server", name="ghost")]
    async with Agent(ScriptedModel(["never"]), tools=servers) as agent:
        with pytest.raises(MCPServerError, match=r"MCP server 'ghost' could not start"):
            await agent.run("go")


async def test_a_server_that_does_not_answer_in_connect_timeout_stops_the_run_and_is_stopped() -> None:
    children = child_processes()
    silent = MCPServer.stdio(sys.executable, "-c", "import sys; sys.stdin.read()", name="silent", connect_timeout=0.5)
    async with Agent(ScriptedModel(["never"]), tools=[silent]) as agent:
        with pytest.raises(MCPServerError, match=r"MCP server 'silent' did not start within 0.5s"):
            await agent.run("go")
    assert not child_processes() - children


async def test_tools_of_the_same_name_without_a_prefix_are_a_clear_error_naming_both(http_url: str) -> None:
    @tool
    def search(query: str) -> str:
        return "local"

    server = MCPServer.http(http_url, name="docs")
    async with Agent(ScriptedModel(["never"]), tools=[search, server]) as agent:
        with pytest.raises(ToolNameClash, match=r"'search': the agent's own tool search, and one of MCP server 'docs'"):
            await agent.run("go")
    twice = [MCPServer.http(http_url, name="a"), MCPServer.http(http_url, name="b")]
    async with Agent(ScriptedModel(["never"]), tools=twice) as agent:
        with pytest.raises(ToolNameClash, match=r"one of MCP server 'a', and one of MCP server 'b'; give the server a"):
            await agent.run("go")


async def test_a_tool_list_the_server_says_changed_is_listed_again(http_url: str) -> None:
    """After `grow` the server notifies; the next listing offers `extra`, which the model then calls."""
    tasks = asyncio.all_tasks()
    server = MCPServer.http(http_url, name="docs")
    model = ScriptedModel([[call("grow")], "grown", [call("extra")], "done"])
    async with Agent(model, tools=[server]) as agent:
        await agent.run("grow")
        async with asyncio.timeout(20):
            while "extra" not in {t.name for t in await server.list_tools(None)}:  # the notification is on its way
                await asyncio.sleep(0.01)
        result = await agent.run("use it")
    assert tool_answers(result.messages) == [("extra ran", False)]
    assert "extra" in {t.name for t in model.requests[-1].tools}
    assert not asyncio.all_tasks() - tasks


PNG = base64.b64decode(PNG_B64)


async def test_an_image_an_mcp_tool_returns_reaches_the_model_as_an_image_part(docs: MCPServer) -> None:
    """The model reads the caption and the image itself (an `onion.Image`), not a description of it."""
    model = ScriptedModel([[call("docs_picture")], "a red dot"])
    result = await Agent(model, tools=[docs]).run("draw")
    answer = model.requests[1].messages[-1]
    assert answer.role == "tool" and not answer.is_error
    assert answer.parts == ["a red dot", Image(data=PNG, media_type="image/png")]
    assert result.messages[-2].parts == answer.parts


async def test_mcp_audio_and_resources_become_parts_where_they_can_and_named_placeholders_where_not(
    docs: MCPServer,
) -> None:
    """Images and PDFs (embedded or not) are parts; audio, an SVG and other binaries are text naming their type."""
    model = ScriptedModel([[call("docs_attachments")], "ok"])
    await Agent(model, tools=[docs]).run("show me")
    assert model.requests[1].messages[-1].parts == [
        "[audio audio/wav, 8 bytes, not shown: onion cannot pass audio to a model]\n"
        "[image image/svg+xml, 6 bytes, not shown: a model takes image/png, image/jpeg, image/gif or image/webp]\n"
        "[resource file:///chart.png]",
        Image(data=PNG, media_type="image/png"),
        "[resource file:///report.pdf]",
        Document(data=base64.b64decode(PDF_B64)),
        "[resource file:///dump.bin application/octet-stream, 3 bytes, not shown: "
        "a model takes images and PDF documents only]\n"
        "[resource file:///note.txt]\n"
        "remember the milk",
    ]


async def test_an_mcp_image_is_sent_to_the_provider_as_an_image_block(one_ssl_context: None) -> None:
    """Through the real Anthropic SDK: the tool_result of the MCP call carries the image block."""
    server = MCPServer.stdio(sys.executable, str(SERVER), prefix="docs_", name="docs")
    with FakeProviderServer([[call("docs_picture")], "a red dot"]) as provider:
        model = AnthropicModel("claude-test", base_url=provider.url, api_key="test-key")
        async with Agent(model, tools=[server]) as agent:
            assert (await agent.run("draw")).output == "a red dot"
        await model.aclose()
    result_block = provider.requests[1].body["messages"][-1]["content"][0]
    assert result_block["type"] == "tool_result"
    assert result_block["content"] == [
        {"type": "text", "text": "a red dot"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG_B64}},
    ]


async def test_results_read_as_text_structured_json_and_described_content() -> None:
    """Text blocks in order; structured content as JSON when no text carries it; other content described."""
    text = CallToolResult(content=[TextContent(type="text", text="a"), TextContent(type="text", text="b")])
    assert tool_result(text).content == "a\nb"
    structured = tool_result(CallToolResult(content=[], structured_content={"n": 1, "city": "Zürich"}))
    assert structured.content == '{"n": 1, "city": "Zürich"}' and not structured.is_error
    both = CallToolResult(content=[TextContent(type="text", text="1")], structured_content={"result": 1})
    assert tool_result(both).content == "1"
    described = CallToolResult(
        content=[
            ImageContent(type="image", data="not base64!", mime_type="image/png"),
            ResourceLink(type="resource_link", name="report", uri="file:///r.pdf", mime_type="application/pdf"),
            EmbeddedResource(type="resource", resource=TextResourceContents(uri="file:///a.txt", text="hi")),
            EmbeddedResource(type="resource", resource=BlobResourceContents(uri="file:///b.bin", blob="AAAA")),
        ]
    )
    assert tool_result(described).content.splitlines() == [
        "[image image/png, not shown: its data is not valid base64]",
        "[resource link report application/pdf: file:///r.pdf]",
        "[resource file:///a.txt]",
        "hi",
        "[resource file:///b.bin, 3 bytes, not shown: a model takes images and PDF documents only]",
    ]
    image = tool_result(
        CallToolResult(content=[ImageContent(type="image", data=PNG_B64, mime_type="image/png")], is_error=True)
    )
    assert image.content == [Image(data=PNG, media_type="image/png")] and image.is_error
    failed = tool_result(CallToolResult(content=[], is_error=True))
    assert failed.is_error and failed.content == "The tool reported an error without a message."
    assert isinstance(failed.value, CallToolResult)


async def test_a_model_call_offers_what_the_server_lists_through_model_layers(docs: MCPServer) -> None:
    """allow/deny layers see MCP tools in `call.tools` like the agent's own."""
    names: list[str] = []

    def answer(request: ModelCall) -> str:
        names.extend(t.name for t in request.tools)
        return "ok"

    await Agent(FunctionModel(answer), tools=[add, docs]).run("go")
    assert names[0] == "add" and "docs_search" in names


async def test_default_server_names_never_carry_arguments_or_url_tokens() -> None:
    """Errors and traces name a server; the default name leaves out tokens given as arguments or in the URL."""
    stdio = MCPServer.stdio("/usr/bin/python3", "/srv/notes_server.py", "--api-key", "sk-proj-secret")
    assert stdio.name == "python3 notes_server.py"
    http = MCPServer.http("https://user:pw@mcp.example.com/v1/mcp?token=secret#x")
    assert http.name == "https://mcp.example.com/v1/mcp"


async def test_an_mcp_tool_named_as_providers_refuse_is_offered_under_a_safe_name_and_called_by_its_own(
    one_ssl_context: None,
) -> None:
    """Through the real Anthropic SDK: `notes.search` is offered as `docs_notes_search`; the server runs its own."""
    server = MCPServer.stdio(sys.executable, str(SERVER), prefix="docs_", name="docs")
    with FakeProviderServer([[call("docs_notes_search", query="onions")], "two notes"]) as provider:
        model = AnthropicModel("claude-test", base_url=provider.url, api_key="test-key")
        async with Agent(model, tools=[server]) as agent:
            result = await agent.run("find")
        await model.aclose()
    offered = [listed["name"] for listed in provider.requests[0].body["tools"]]
    assert "docs_notes_search" in offered and "docs_notes.search" not in offered
    assert tool_answers(result.messages) == [("2 notes about onions", False)]
    tools = {t.name: t for t in await server.list_tools(None)}
    assert tools["docs_notes_search"].remote_name == "notes.search"
    await server.aclose()


async def test_mcp_tool_names_map_to_provider_safe_names_a_long_one_truncated_with_a_hash_of_the_whole() -> None:
    """Bad characters become `_`; past 64 characters, 57 and a hash keep two long names apart; good names stay."""
    server = MCPServer.stdio(sys.executable, str(SERVER), name="docs")

    def offered(name: str, prefix: str = "") -> str:
        listed = McpTool(name=name, input_schema={"type": "object", "properties": {}})
        return MCPTool(server, listed, prefix).name

    assert offered("search") == "search"
    assert offered("files/read", prefix="fs.") == "fs_files_read"
    long_a, long_b = offered("x" * 70 + "a"), offered("x" * 70 + "b")
    assert len(long_a) == len(long_b) == 64 and long_a != long_b
    assert long_a.startswith("x" * 57 + "_") and long_a == offered("x" * 70 + "a")
    assert re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", offered("grüße.überall/" + "ä" * 80))


async def test_an_mcp_result_over_the_servers_cap_is_an_error_result_saying_its_size_the_cap_and_how_to_raise_it(
    docs: MCPServer,
) -> None:
    """By default a result over 1 MiB (`max_result_bytes`) reaches the model as an error result naming the server,
    the tool, the result's size and the cap, and `max_result_bytes` to raise it; a smaller one, as it is."""
    model = ScriptedModel([[call("docs_big", size=2_000_000), call("docs_big", size=1_000)], "ok"])
    result = await Agent(model, tools=[docs]).run("go")
    (over, over_error), (under, under_error) = tool_answers(result.messages)
    assert over_error and f"MCP server {docs.name!r} answered big with 2,000," in over and len(over) < 400
    assert "over its cap of 1,048,576 bytes" in over and "max_result_bytes" in over
    assert (under, under_error) == ("x" * 1_000, False)


async def test_max_result_bytes_raises_or_lowers_an_mcp_servers_cap() -> None:
    """`max_result_bytes=` on `MCPServer.stdio` sets the cap: 3 MB lets a 2 MB result through, 100 stops 200
    characters; a cap that is not a positive int is refused when the server is built."""
    raised = MCPServer.stdio(sys.executable, str(SERVER), name="docs", max_result_bytes=3_000_000)
    lowered = MCPServer.stdio(sys.executable, str(SERVER), name="small", prefix="s_", max_result_bytes=100)
    model = ScriptedModel([[call("big", size=2_000_000), call("s_big", size=200)], "ok"])
    async with Agent(model, tools=[raised, lowered]) as agent:
        (whole, whole_error), (stopped, stopped_error) = tool_answers((await agent.run("go")).messages)
    assert (len(whole), whole_error) == (2_000_000, False)
    assert stopped_error and "over its cap of 100 bytes" in stopped
    with pytest.raises(ValueError, match=r"MCP server 'x': max_result_bytes must be a positive int"):
        MCPServer.http("http://127.0.0.1:1/mcp", name="x", max_result_bytes=0)
