"""A run paused on Anthropic with extended thinking resumes through the real SDK without a 400.

The fake server signs the thinking blocks it sends and, like the real API,
refuses a request whose tool-use turn comes back without them (or with a
changed signature) when thinking is enabled.
"""

from __future__ import annotations

import pytest

from middleware import approve
from onion import Agent, Message, ModelResponse, RunPaused, RunResult, RunState, ToolRequest, tool
from onion.errors import BadRequestError
from onion.testing import FakeProviderServer
from onion.testing._fake_wire import thinking_signature

from .conftest import ModelFactory

THINKING = "anthropic_thinking"  # where Message.meta keeps Anthropic thinking blocks (docs/providers.md)
REASONING = "openai_reasoning"  # where Message.meta keeps Responses reasoning items (docs/providers.md)

ran: list[str] = []


@tool
def delete(path: str) -> str:
    """Delete a file."""
    ran.append(path)
    return f"deleted {path}"


THOUGHT = "The user wants a.txt gone; deleting needs approval."
SETTINGS = {"thinking": {"type": "enabled", "budget_tokens": 1024}}


def first_answer() -> ModelResponse:
    blocks = [{"type": "thinking", "thinking": THOUGHT, "signature": ""}]
    return ModelResponse(
        Message("assistant", "", [ToolRequest("toolu_1", "delete", {"path": "a.txt"})], meta={THINKING: blocks})
    )


def agent_of(make_model: ModelFactory) -> Agent:
    return Agent(make_model("anthropic"), tools=[delete], settings=SETTINGS).use(approve("delete"))


async def pause(agent: Agent, streamed: bool) -> RunState:
    if not streamed:
        result: RunResult = await agent.run("delete a.txt")
        assert result.paused
        return result.to_state()
    events = [event async for event in agent.stream("delete a.txt")]
    last = events[-1]
    assert isinstance(last, RunPaused)
    return last.state


async def test_a_run_paused_with_thinking_resumes_from_json_without_a_400(
    server: FakeProviderServer, make_model: ModelFactory, streamed: bool
) -> None:
    """The signed thinking block survives `to_json` / `from_json` and goes back first in its turn."""
    ran.clear()
    server.script([first_answer(), "a.txt is gone"])
    state = await pause(agent_of(make_model), streamed)
    state = RunState.from_json(state.to_json())
    state.approve("toolu_1")
    result = await agent_of(make_model).resume(state)
    assert result.output == "a.txt is gone" and ran == ["a.txt"]
    turn = server.requests[1].body["messages"][1]
    assert turn["content"][0] == {"type": "thinking", "thinking": THOUGHT, "signature": thinking_signature(THOUGHT)}
    assert [block["type"] for block in turn["content"]] == ["thinking", "tool_use"]


async def test_a_resumed_history_without_its_thinking_block_gets_the_400(
    server: FakeProviderServer, make_model: ModelFactory
) -> None:
    """Dropping the thinking metadata (as a lossy serialisation would) is refused by the server, as by the real API."""
    ran.clear()
    server.script([first_answer(), "never sent"])
    state = RunState.from_json((await pause(agent_of(make_model), False)).to_json())
    state.messages[-1].meta = None
    state.approve("toolu_1")
    with pytest.raises(BadRequestError, match="must start with a thinking block"):
        await agent_of(make_model).resume(state)


REASONING_ITEM = {
    "type": "reasoning",
    "id": "rs_fake_1",
    "summary": [{"type": "summary_text", "text": "needs approval"}],
    "encrypted_content": "gAAAA-opaque",
}


async def test_a_run_paused_on_openai_responses_sends_its_reasoning_item_back_on_resume(
    server: FakeProviderServer, make_model: ModelFactory, streamed: bool
) -> None:
    """The reasoning item of the paused turn survives JSON and goes back, unchanged, before its function call."""

    ran.clear()
    asked = Message("assistant", "", [ToolRequest("call_1", "delete", {"path": "a.txt"})])
    asked.meta = {REASONING: [REASONING_ITEM]}
    server.script([ModelResponse(asked), "a.txt is gone"])

    def agent() -> Agent:
        return Agent(make_model("openai-responses"), tools=[delete]).use(approve("delete"))

    state = RunState.from_json((await pause(agent(), streamed)).to_json())
    state.approve("call_1")
    assert (await agent().resume(state)).output == "a.txt is gone" and ran == ["a.txt"]
    sent = server.requests[1].body["input"]
    kinds = [item.get("type") for item in sent]
    assert kinds[-3:] == ["reasoning", "function_call", "function_call_output"]
    reasoning = sent[-3]
    assert {key: reasoning[key] for key in REASONING_ITEM} == REASONING_ITEM
