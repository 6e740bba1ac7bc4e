"""Serialisation: `Message.to_dict` / `from_dict` and `RunState` as versioned JSON."""

from __future__ import annotations

import json

import pytest

from onion import Message, PendingCall, RunState, RunStateError, ToolRequest, Usage

THINKING = "anthropic_thinking"  # where Message.meta keeps Anthropic thinking blocks (docs/providers.md)
REASONING = "openai_reasoning"  # where Message.meta keeps Responses reasoning items (docs/providers.md)

THINKING_BLOCKS = [
    {"type": "thinking", "thinking": "the user wants x", "signature": "sig-abc=="},
    {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix"},
]
REASONING_ITEMS = [
    {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [{"type": "summary_text", "text": "plan"}],
        "encrypted_content": "gAAA",
    }
]
MESSAGES = [
    Message.system("be brief"),
    Message.user("hi ünïcode"),
    Message(
        "assistant",
        "let me look",
        [ToolRequest("c1", "read", {"path": "a.txt", "n": [1, 2]}), ToolRequest("c2", "bad", {}, raw_args="{oops")],
        meta={THINKING: THINKING_BLOCKS},
    ),
    Message.tool("c1", "contents"),
    Message.tool("c2", "invalid JSON", is_error=True),
    Message("assistant", "done", meta={REASONING: REASONING_ITEMS}),
]


@pytest.mark.parametrize("message", MESSAGES, ids=lambda m: m.role)
def test_message_round_trips_every_field_through_json(message: Message) -> None:
    """`Message.from_dict(json(to_dict()))` equals the message: tool calls, raw args, errors, provider meta."""
    back = Message.from_dict(json.loads(json.dumps(message.to_dict())))
    assert back == message


def test_message_dict_is_a_copy_of_the_meta() -> None:
    """Changing the dict (or the message built from it) leaves the original's thinking blocks alone."""
    message = MESSAGES[2]
    data = message.to_dict()
    data["meta"][THINKING][0]["signature"] = "changed"
    Message.from_dict(data).tool_calls[0].args["path"] = "b.txt"
    assert message.meta is not None and message.meta[THINKING][0]["signature"] == "sig-abc=="
    assert message.tool_calls[0].args["path"] == "a.txt"


@pytest.mark.parametrize(
    ("data", "says"),
    [
        ("hello", "must be a dict"),
        ({"role": "robot", "text": ""}, "role 'robot'"),
        ({"role": "user", "text": 3}, "'text' must be str"),
        ({"role": "assistant", "tool_calls": [{"name": "x"}]}, "'id' is missing"),
        ({"role": "tool", "tool_call_id": 5}, "'tool_call_id' must be str"),
    ],
)
def test_message_from_dict_names_the_wrong_field(data: object, says: str) -> None:
    """A dict that is not a message raises `ValueError` saying which field is wrong."""
    with pytest.raises(ValueError, match=says):
        Message.from_dict(data)


def paused_state() -> RunState:
    return RunState(
        run_id="run-x-1",
        agent="tidy",
        status="paused",
        input="tidy up",
        messages=MESSAGES[:3],
        answered=[Message.tool("c2", "invalid JSON", is_error=True)],
        pending=[PendingCall("c1", "read", {"path": "a.txt", "n": [1, 2]}, "read needs approval")],
        injected=[Message.user("reflect")],
        steps=1,
        usage=Usage(input_tokens=10, output_tokens=5, requests=1, cached_input_tokens=2),
        state={"cost": 0.5, "notes": ["a"]},
    )


def test_run_state_round_trips_through_json_text() -> None:
    """Every field of a paused state survives `to_json` / `from_json`, decisions included."""
    state = paused_state()
    state.edit("c1", {"path": "b.txt"})
    back = RunState.from_json(state.to_json())
    assert back.to_dict() == state.to_dict()
    assert json.loads(state.to_json())["version"] == 1
    assert back.messages == state.messages and back.answered == state.answered and back.injected == state.injected
    assert back.pending == [
        PendingCall("c1", "read", {"path": "a.txt", "n": [1, 2]}, "read needs approval", "edited", {"path": "b.txt"})
    ]
    assert (back.run_id, back.agent, back.status, back.input, back.steps) == ("run-x-1", "tidy", "paused", "tidy up", 1)
    assert back.usage == state.usage and back.state == {"cost": 0.5, "notes": ["a"]}


def test_run_state_keeps_an_input_given_as_messages() -> None:
    """A run started from a message list saves that list as its input."""
    state = paused_state()
    state.input = [Message.user("one"), Message.user("two")]
    assert RunState.from_json(state.to_json()).input == state.input


def test_decisions_approve_reject_edit_and_approve_all() -> None:
    """Each decision sets the call's decision; the last decision about a call wins; approve_all fills the rest."""
    state = paused_state()
    state.pending.append(PendingCall("c9", "delete", {"path": "x"}, "delete needs approval"))
    state.reject("c1", reason="not today")
    assert (state.pending[0].decision, state.pending[0].rejection) == ("rejected", "not today")
    state.approve_all()
    assert [call.decision for call in state.pending] == ["rejected", "approved"]
    state.approve("c1")
    assert (state.pending[0].decision, state.pending[0].rejection) == ("approved", None)


def test_deciding_a_call_that_is_not_pending_names_the_pending_ones() -> None:
    """`approve` of an unknown call id is a `RunStateError` listing the calls that are pending."""
    with pytest.raises(RunStateError, match=r"no pending call 'nope'.*c1 \(read\)"):
        paused_state().approve("nope")
    with pytest.raises(TypeError, match="must be a dict"):
        paused_state().edit("c1", "b.txt")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ('{"version": 1, "run_id": "r", "agent": "a", "status": "pa', "not valid JSON.*corrupt or truncated"),
        ("\x00\x01garbage", "not valid JSON"),
        ("[1, 2]", "not an onion run state"),
        ('{"run_id": "r"}', "no top-level 'version'"),
        ('{"version": 99}', "version 99 is not supported.*reads version 1"),
    ],
)
def test_a_corrupt_truncated_or_unknown_state_is_a_clear_error(text: str, says: str) -> None:
    """`from_json` refuses text that is not a state it can read, saying why and what to do."""
    with pytest.raises(RunStateError, match=says):
        RunState.from_json(text)


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("status", "running", "'status' must be 'completed' or 'paused'"),
        ("steps", "one", "'steps' must be int"),
        ("messages", [{"role": "robot"}], r"messages\[0\]: message role 'robot'"),
        ("pending", [{"id": "c1", "name": "read", "args": {}, "reason": "r", "decision": "maybe"}], "decision 'maybe'"),
        ("usage", {"tokens": 3}, "tokens"),
    ],
)
def test_a_damaged_field_is_named(field: str, value: object, says: str) -> None:
    """A state whose fields are damaged raises `RunStateError` naming the field."""
    data = paused_state().to_dict()
    data[field] = value
    with pytest.raises(RunStateError, match=f"damaged: .*{says}"):
        RunState.from_json(json.dumps(data))
    del data[field]
    with pytest.raises(RunStateError, match=f"'{field}' is missing"):
        RunState.from_dict(data)
