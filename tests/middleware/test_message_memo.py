"""`MessageMemo`: a layer's rewrites of a run's messages, each computed once, again when the message changed."""

from __future__ import annotations

from middleware._message_memo import MessageMemo
from onion import Message


def test_a_message_whose_content_parts_were_replaced_in_place_is_rewritten_again() -> None:
    """A layer that puts new parts in a message already seen (its `content` reassigned) gets them rewritten:
    `pseudonymize` would otherwise send an address in those parts to the model."""
    seen: list[object] = []

    def rewrite(message: Message) -> Message:
        seen.append(message.content)
        return message

    messages = [Message("user", "hi", content=["hi"])]
    memo = MessageMemo()
    memo.rewrite(messages, rewrite)
    messages[0].content = ["write to jane.doe@example.com"]
    memo.rewrite(messages, rewrite)
    assert seen == [["hi"], ["write to jane.doe@example.com"]]
