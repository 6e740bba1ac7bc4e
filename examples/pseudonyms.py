"""Pseudonyms: the model and the history work with `<EMAIL_1>`; the tool and the reader get the real address.

`python examples/pseudonyms.py` streams one run: the user asks to mail a
customer, the model (scripted here, speaking only in placeholders) asks the
`send_mail` tool to write to `<EMAIL_1>`, and the tool receives the real
address. The streamed answer shows the real address, though the model wrote
a placeholder that arrived split across deltas.
"""

from __future__ import annotations

import asyncio

from middleware import pseudonymize, redact
from onion import Agent, ModelCall, RunFinished, TextDelta, ToolRequest, tool
from onion.testing import ScriptedModel

mailbox: list[str] = []


@tool
def send_mail(to: str, subject: str) -> str:
    """Send an e-mail."""
    mailbox.append(to)
    return f"queued for {to}"


async def main() -> tuple[str, list[str], list[str]]:
    """The streamed answer, what the model was sent, and the addresses the tool wrote to."""
    model = ScriptedModel(
        [
            [ToolRequest("call_1", "send_mail", {"to": "<EMAIL_1>", "subject": "Your order"})],
            "I wrote to <EMAIL_1> about the order on card <CARD_1>.",
        ]
    )
    agent = Agent(model, tools=[send_mail]).use(pseudonymize, redact(tool_results=False))
    question = "Mail ana.silva@example.com about the order paid with 4111 1111 1111 1111."
    shown = ""
    async for event in agent.stream(question):
        if isinstance(event, TextDelta):
            print(event.text, end="", flush=True)
            shown += event.text
        elif isinstance(event, RunFinished):
            print()
    requests: list[ModelCall] = model.requests
    sent = [message.text for call in requests for message in call.messages if message.text]
    print("the model was sent:", sent[0])
    print("send_mail wrote to:", mailbox)
    return shown, sent, mailbox


if __name__ == "__main__":
    asyncio.run(main())
