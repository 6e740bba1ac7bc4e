"""`pseudonymize`: the model, the history and the store see placeholders; tools and the user the real values."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from middleware import approve, pseudonymize
from middleware.pseudonymize import MemoryVault, Pseudonyms, RestoredStream, vault_key
from onion import (
    Agent,
    Image,
    Message,
    ModelResponse,
    RunFinished,
    RunState,
    StreamReset,
    TextDelta,
    ToolRequest,
    tool,
)
from onion.errors import RunStateError
from onion.providers import AnthropicModel, OpenAIChatModel, OpenAIResponsesModel
from onion.stores import SQLiteStore
from onion.testing import FakeProviderServer, ScriptedModel

EMAIL = "jane.doe@example.com"
received: list[str] = []


@tool
def send_mail(to: str, body: str) -> str:
    """Send an e-mail."""
    received.append(to)
    return f"sent to {to}"


def provider(api: str, server: FakeProviderServer) -> AnthropicModel | OpenAIChatModel | OpenAIResponsesModel:
    if api == "anthropic":
        return AnthropicModel("claude-test", base_url=server.url, api_key="test-key")
    if api == "openai":
        return OpenAIChatModel("gpt-test", base_url=server.openai_url, api_key="test-key")
    return OpenAIResponsesModel("gpt-test", base_url=server.openai_url, api_key="test-key")


@pytest.mark.parametrize("streamed", [False, True], ids=["run", "stream"])
@pytest.mark.parametrize("api", ["anthropic", "openai", "openai-responses"])
async def test_the_model_sees_a_placeholder_the_tool_and_the_user_the_real_address(
    api: str, streamed: bool, server: FakeProviderServer, one_ssl_context: None
) -> None:
    """Through a real SDK: no request holds the address; the tool gets it; the answer (and each delta) shows it."""
    received.clear()
    server.script(
        [
            [ToolRequest("call_1", "send_mail", {"to": "<EMAIL_1>", "body": "Hello <EMAIL_1>"})],
            "Done: I wrote to <EMAIL_1> for you.",
        ]
    )
    model = provider(api, server)
    agent = Agent(model, tools=[send_mail]).use(pseudonymize)
    deltas: list[str] = []
    try:
        if streamed:
            async for event in agent.stream(f"Please mail {EMAIL} a hello"):
                if isinstance(event, TextDelta):
                    deltas.append(event.text)
                elif isinstance(event, StreamReset):
                    deltas.clear()
                elif isinstance(event, RunFinished):
                    result = event.result
        else:
            result = await agent.run(f"Please mail {EMAIL} a hello")
    finally:
        await model.aclose()

    sent = [json.dumps(request.body, ensure_ascii=False) for request in server.requests]
    assert len(sent) == 2 and all("jane" not in body for body in sent)
    assert all("<EMAIL_1>" in body for body in sent)
    assert received == [EMAIL]
    assert result.output == f"Done: I wrote to {EMAIL} for you."
    assert result.messages[-3].tool_calls[0].args == {"to": "<EMAIL_1>", "body": "Hello <EMAIL_1>"}
    assert "jane" not in json.dumps([m.to_dict() for m in result.messages])
    assert result.state == {}
    if streamed:
        assert "".join(deltas) == result.output and len(deltas) > 3
        assert not any("<" in delta or "EMAIL" in delta for delta in deltas)


async def test_placeholders_survive_a_pause_and_resume_through_the_runs_state() -> None:
    """After a pause saved as JSON (placeholders only), the resumed run restores `<EMAIL_1>` from the layer's vault
    and numbers a new address `<EMAIL_2>`."""
    received.clear()
    model = ScriptedModel(
        [
            [ToolRequest("call_1", "send_mail", {"to": "<EMAIL_1>", "body": "hi"})],
            "Sent to <EMAIL_1>; should I copy <EMAIL_2>?",
        ]
    )
    agent = Agent(model, tools=[send_mail]).use(pseudonymize, approve("send_mail"))
    paused = await agent.run(f"mail {EMAIL}")
    assert paused.paused and paused.pending[0].args == {"to": "<EMAIL_1>", "body": "hi"}
    assert paused.state == {}
    state = RunState.from_json(paused.to_state().to_json())
    assert state.private == {} and state.state == {} and "jane" not in state.to_json()
    state.approve_all()
    state.injected.append(Message.user("and cc bob@corp.io"))
    result = await agent.resume(state)
    assert received == [EMAIL]
    assert result.output == f"Sent to {EMAIL}; should I copy bob@corp.io?"
    last = [message.text for message in model.requests[-1].messages]
    assert "mail <EMAIL_1>" in last and "and cc <EMAIL_2>" in last
    assert not any("jane" in text or "bob@" in text for text in last)


@given(st.lists(st.integers(1, 9), min_size=1, max_size=12))
def test_a_placeholder_split_anywhere_across_deltas_is_restored_whole(sizes: list[int]) -> None:
    """Whatever the delta boundaries, the deltas join to the restored text and none shows part of a placeholder."""
    pseudonyms = Pseudonyms({"<EMAIL_1>": EMAIL, "<PHONE_12>": "+44 20 7946 0958"})
    text = "Mail <EMAIL_1>, call <PHONE_12> <not a tag> or <EMAIL_9> x<"
    stream, sent, start = RestoredStream(pseudonyms), [], 0
    for size in itertools.cycle(sizes):
        if start >= len(text):
            break
        sent.extend(event.text for event in stream(TextDelta(text[start : start + size])))
        start += size
    sent.extend(event.text for event in stream.end())
    assert (
        "".join(sent)
        == pseudonyms.restore(text)
        == (f"Mail {EMAIL}, call +44 20 7946 0958 <not a tag> or <EMAIL_9> x<")
    )
    assert not any("<EMAIL_1" in piece or "<PHONE" in piece for piece in sent)


def test_each_kind_gets_stable_numbered_placeholders_and_your_patterns_come_first() -> None:
    """The same value always maps to one placeholder; IBANs, cards, phones and labelled patterns are found."""
    layer, pseudonyms = pseudonymize(r"ACC-\d{6}", EMPLOYEE=r"EMP-\d{4}"), Pseudonyms()
    text = (
        "jane@x.io, bob@y.org and jane@x.io; card 4111 1111 1111 1111; 1234 5678 9012 3456 stays; "
        "IBAN DE89 3704 0044 0532 0130 00; call +44 20 7946 0958 or (555) 123-4567 on 2024-01-15; "
        "ACC-123456 and EMP-0042"
    )
    assert layer.text(text, pseudonyms) == (
        "<EMAIL_1>, <EMAIL_2> and <EMAIL_1>; card <CARD_1>; 1234 5678 9012 3456 stays; "
        "IBAN <IBAN_1>; call <PHONE_1> or <PHONE_2> on 2024-01-15; <PII_1> and <EMPLOYEE_1>"
    )
    assert pseudonyms.restore(layer.text(text, pseudonyms)) == text
    assert Pseudonyms(dict(pseudonyms.values)).placeholder("EMAIL", "new@z.io") == "<EMAIL_3>"


def test_a_phone_number_in_parentheses_keeps_its_closing_parenthesis() -> None:
    """`(phone +44 20 7946 0958) ok` reaches the model balanced, and is restored as it was."""
    layer, pseudonyms = pseudonymize(), Pseudonyms()
    text = "(phone +44 20 7946 0958) ok, ((555) 123-4567) too"
    assert layer.text(text, pseudonyms) == "(phone <PHONE_1>) ok, (<PHONE_2>) too"
    assert pseudonyms.restore(layer.text(text, pseudonyms)) == text


def test_bad_patterns_and_labels_are_refused_saying_what_to_fix() -> None:
    with pytest.raises(TypeError, match="not a regex"):
        pseudonymize(42)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="upper case"):
        pseudonymize(employee=r"EMP-\d+")
    with pytest.raises(TypeError, match="at least one pattern"):
        pseudonymize(builtin=False)


async def test_a_model_answer_without_placeholders_is_returned_as_it_is() -> None:
    response = ModelResponse(Message.assistant("nothing personal"))
    agent = Agent(ScriptedModel([response])).use(pseudonymize)
    assert (await agent.run("hi")).output == "nothing personal"


async def test_the_text_parts_of_a_message_with_an_image_get_placeholders_and_the_image_is_kept() -> None:
    """A user message of text and an `Image`: its text parts reach the model with placeholders, the image as is."""
    image = Image(data=b"\x89PNG fake", media_type="image/png")
    model = ScriptedModel(["That is <EMAIL_1>'s badge."])
    result = await Agent(model).use(pseudonymize).run(Message.user(f"whose badge? {EMAIL}", image))
    assert model.requests[0].messages[-1].parts == ["whose badge? <EMAIL_1>", image]
    assert result.output == f"That is {EMAIL}'s badge."


BOB = "bob.stone@corp.example"


@tool
def find_address(name: str) -> str:
    """Look up someone's e-mail address."""
    return f"{name}: {BOB}"


def real_values_in(text: str | bytes) -> list[str]:
    """Which of the real values of these tests `text` holds, raw or JSON-escaped."""
    data = text.decode("utf-8", "replace") if isinstance(text, bytes) else text
    return [value for value in (EMAIL, BOB, "jane.doe", "bob.stone") if value in data]


async def test_nothing_a_paused_pseudonymized_run_persists_holds_a_real_value(tmp_path: Path) -> None:
    """A run on a session in a SQLite store pauses: its state's JSON, the store's file (database and WAL) and
    the session hold placeholders only; resumed, the tool gets the real values and so does the user; the file
    and the session still hold none."""
    received.clear()
    model = ScriptedModel(
        [
            [ToolRequest("call_1", "find_address", {"name": "Bob"})],
            [ToolRequest("call_2", "send_mail", {"to": "<EMAIL_2>", "body": "From <EMAIL_1>"})],
            "Mailed <EMAIL_2> on behalf of <EMAIL_1>.",
        ]
    )
    with SQLiteStore(tmp_path / "onion.db") as store:
        agent = Agent(model, tools=[find_address, send_mail], store=store)
        agent.use(pseudonymize, approve("send_mail"))
        paused = await agent.run(f"I am {EMAIL}; mail Bob from me", session="s1")
        assert paused.paused
        text = paused.to_state().to_json()
        assert real_values_in(text) == []
        assert real_values_in((await store.load(paused.run_id)).to_json()) == []
        assert real_values_in(b"".join(file.read_bytes() for file in tmp_path.iterdir())) == []

        state = RunState.from_json(text)
        state.approve_all()
        result = await agent.resume(state)
        assert received == [BOB]
        assert result.output == f"Mailed {BOB} on behalf of {EMAIL}."
        session = [json.dumps(m.to_dict()) for m in await store.session("s1").messages()]
        assert len(session) == 6 and real_values_in("".join(session)) == []
        assert real_values_in(b"".join(file.read_bytes() for file in tmp_path.iterdir())) == []
    sent = [m.text for request in model.requests for m in request.messages]
    assert real_values_in(json.dumps(sent)) == []


async def test_a_run_paused_in_another_process_resumes_only_with_a_shared_vault() -> None:
    """A layer whose vault lacks the run's values (another process) refuses to resume it, naming the fix, and runs
    no tool; two layers sharing one vault resume it with the real values."""
    received.clear()
    script = [[ToolRequest("call_1", "send_mail", {"to": "<EMAIL_1>", "body": "hi"})], "Sent to <EMAIL_1>."]
    vault = MemoryVault()
    first = Agent(ScriptedModel(script), tools=[send_mail]).use(pseudonymize(vault=vault), approve("send_mail"))
    text = (await first.run(f"mail {EMAIL}")).to_state().to_json()
    assert real_values_in(text) == [] and len(vault) == 1

    elsewhere = Agent(ScriptedModel(script[1:]), tools=[send_mail]).use(pseudonymize, approve("send_mail"))
    state = RunState.from_json(text)
    state.approve_all()
    with pytest.raises(RunStateError, match=r"<EMAIL_1>.*shared pseudonymize\(vault=\.\.\.\)"):
        await elsewhere.resume(state)
    assert received == []

    shared = Agent(ScriptedModel(script[1:]), tools=[send_mail]).use(pseudonymize(vault=vault), approve("send_mail"))
    result = await shared.resume(state)
    assert received == [EMAIL] and result.output == f"Sent to {EMAIL}."
    assert len(vault) == 0  # a completed run's values are not kept


async def test_a_session_keeps_its_placeholders_across_runs_and_its_store_holds_none(tmp_path: Path) -> None:
    """A later run on the session refers to `<EMAIL_1>` from an earlier one: the tool gets the real address,
    a new address gets `<EMAIL_2>`, and the session in the store holds placeholders only."""
    received.clear()
    model = ScriptedModel(
        [
            "Noted, <EMAIL_1>.",
            [ToolRequest("call_1", "send_mail", {"to": "<EMAIL_1>", "body": "cc <EMAIL_2>"})],
            "Done.",
        ]
    )
    with SQLiteStore(tmp_path / "onion.db") as store:
        agent = Agent(model, tools=[send_mail], store=store).use(pseudonymize)
        assert (await agent.run(f"I am {EMAIL}", session="s")).output == f"Noted, {EMAIL}."
        await agent.run(f"mail me, cc {BOB}", session="s")
        session = json.dumps([m.to_dict() for m in await store.session("s").messages()])
    assert received == [EMAIL] and real_values_in(session) == []
    assert "mail me, cc <EMAIL_2>" in session
    assert model.requests[-1].messages[-2].tool_calls[0].args == {"to": "<EMAIL_1>", "body": "cc <EMAIL_2>"}


async def test_a_new_run_given_placeholders_it_has_no_values_for_keeps_them_and_numbers_after_them() -> None:
    """History passed in with `<EMAIL_1>` (from another run): it stays as it is, and a new address is `<EMAIL_2>`."""
    model = ScriptedModel(["ok"])
    history = [Message.user("I am <EMAIL_1>"), Message.assistant("Hi <EMAIL_1>"), Message.user(f"cc {BOB}")]
    result = await Agent(model).use(pseudonymize).run(history)
    assert [m.text for m in model.requests[0].messages] == ["I am <EMAIL_1>", "Hi <EMAIL_1>", "cc <EMAIL_2>"]
    assert result.output == "ok"


async def test_stream_events_show_the_real_values_and_no_reset_follows_a_restored_answer() -> None:
    """A streamed run with a model that does not stream: the whole-text delta, tool call, tool result and
    response events show real values, and no `StreamReset` replaces the shown answer with placeholders."""
    received.clear()
    model = ScriptedModel([[ToolRequest("c1", "send_mail", {"to": "<EMAIL_1>", "body": "x"})], "Mailed <EMAIL_1>."])
    events = [event async for event in Agent(model, tools=[send_mail]).use(pseudonymize).stream(f"mail {EMAIL}")]
    assert not any(isinstance(event, StreamReset) for event in events)
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == f"Mailed {EMAIL}."
    shown = repr([e for e in events if not isinstance(e, RunFinished)])
    assert "<EMAIL_1>" not in shown and EMAIL in shown
    assert events[-1].result.output == f"Mailed {EMAIL}."  # type: ignore[attr-defined]


async def test_a_failed_run_recovered_from_the_journal_needs_its_values_in_the_vault() -> None:
    """A run that failed after a tool call is recovered from its journal (placeholders only): with the layer's
    vault, the next tool gets the real address; a layer without those values refuses before any tool runs."""
    from onion.stores import MemoryStore

    received.clear()

    store = MemoryStore()
    first = [ToolRequest("c1", "find_address", {"name": "Bob"})]
    layer = pseudonymize()
    agent = Agent(
        ScriptedModel([first, RuntimeError("the provider fell over")]), tools=[find_address, send_mail], store=store
    ).use(layer)
    with pytest.raises(RuntimeError, match="fell over"):
        await agent.run(f"I am {EMAIL}; mail Bob")
    (record,) = await store.runs()
    assert record.status == "failed"
    assert real_values_in(json.dumps(await store.journal(record.run_id))) == []

    rest = [[ToolRequest("c2", "send_mail", {"to": "<EMAIL_2>", "body": "from <EMAIL_1>"})], "Done."]
    another_process = pseudonymize(vault=MemoryVault())
    elsewhere = Agent(ScriptedModel(rest), tools=[find_address, send_mail], store=store).use(another_process)
    with pytest.raises(RunStateError, match=r"placeholders \(<EMAIL_1>\)"):
        await elsewhere.recover(record.run_id)
    assert received == []
    here = Agent(ScriptedModel(rest), tools=[find_address, send_mail], store=store).use(layer)
    assert (await here.recover(record.run_id)).output == "Done."
    assert received == [BOB]


async def test_an_approver_can_see_the_real_arguments_of_a_pending_call_through_the_vault() -> None:
    """The pending call shows placeholders; the layer's vault turns them back into the real arguments."""
    layer = pseudonymize()
    model = ScriptedModel([[ToolRequest("c1", "send_mail", {"to": "<EMAIL_1>", "body": "hi"})]])
    state = (await Agent(model, tools=[send_mail]).use(layer, approve("send_mail")).run(f"mail {EMAIL}")).to_state()
    (call,) = state.pending
    assert call.args == {"to": "<EMAIL_1>", "body": "hi"}
    values = await layer.vault.get(vault_key("run", state.run_id, None))
    assert Pseudonyms(values).restore_value(call.args) == {"to": EMAIL, "body": "hi"}


def test_a_memory_vault_read_in_one_thread_and_evicted_in_another_never_raises() -> None:
    """A vault shared by agents in several threads (each its own loop): a read whose entry another thread's write
    evicts right after the reader found it returns the values it found (it raised KeyError: no lock)."""
    vault = MemoryVault(max_entries=1)
    asyncio.run(vault.set("run:a", {"<EMAIL_1>": EMAIL}))
    armed, writer_done = threading.Event(), threading.Event()
    writer = threading.Thread(target=lambda: (asyncio.run(vault.set("run:b", {"<EMAIL_1>": "b"})), writer_done.set()))

    class WriterBetweenLookupAndTouch(OrderedDict[str, dict[str, str]]):
        def get(self, key: str, default: Any = None) -> Any:
            found = super().get(key, default)
            if armed.is_set():
                armed.clear()
                writer.start()
                writer_done.wait(0.5)  # never set while the reader holds a lock the writer waits for
            return found

    vault._entries = WriterBetweenLookupAndTouch(vault._entries)
    armed.set()
    assert asyncio.run(vault.get("run:a")) == {"<EMAIL_1>": EMAIL}
    writer.join()
    assert asyncio.run(vault.get("run:b")) == {"<EMAIL_1>": "b"}


@pytest.mark.parametrize("forget", ["clear", "clear_and_delete_runs"])
async def test_after_a_session_is_cleared_its_earlier_values_are_never_restored(forget: str) -> None:
    """The session `s` held Jane's `<EMAIL_1>`; it is cleared (and its runs deleted). The next person on `s` who
    types `<EMAIL_1>` gets `<EMAIL_1>` as typed, in the tool call and in the output, never Jane's address; and
    that run's end deletes her values from the vault."""
    from onion.stores import MemoryStore

    received.clear()
    store, vault = MemoryStore(), MemoryVault()
    model = ScriptedModel(
        [
            "Noted, <EMAIL_1>.",
            [ToolRequest("c1", "send_mail", {"to": "<EMAIL_1>", "body": "hi"})],
            "Mailed <EMAIL_1>.",
        ]
    )
    agent = Agent(model, tools=[send_mail], store=store).use(pseudonymize(vault=vault))
    first = await agent.run(f"I am {EMAIL}", session="s")
    assert first.output == f"Noted, {EMAIL}." and len(vault) == 1
    await store.session("s").clear()
    if forget == "clear_and_delete_runs":
        await store.delete_run(first.run_id)

    result = await agent.run("mail <EMAIL_1> please", session="s")
    assert received == ["<EMAIL_1>"]
    assert result.output == "Mailed <EMAIL_1>."
    assert len(vault) == 0


ANA = "ana.lima@tenant-a.example"
BEN = "ben.ross@tenant-b.example"


@pytest.mark.parametrize("stores", ["memory", "sqlite", "redis namespaces"])
async def test_two_tenants_sharing_one_policy_stack_never_get_each_others_values(
    stores: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """One `pseudonymize` in one `Stack`, two agents with two stores (or two Redis namespaces), the same session id:
    each tenant's `<EMAIL_1>` comes back as its own customer's address, whichever tenant wrote last."""
    from onion import Stack
    from onion.stores import MemoryStore, RedisStore

    if stores == "memory":
        store_a, store_b = MemoryStore(), MemoryStore()
    elif stores == "sqlite":
        store_a, store_b = SQLiteStore(tmp_path / "a.db"), SQLiteStore(tmp_path / "b.db")
    else:
        url = request.getfixturevalue("redis_url")
        tag = os.urandom(4).hex()
        store_a, store_b = RedisStore(url, namespace=f"a{tag}"), RedisStore(url, namespace=f"b{tag}")
    policy = Stack(pseudonymize, name="policy")

    def agent(store: Any) -> Agent[str]:
        script = ["Noted, <EMAIL_1>.", [ToolRequest("c1", "send_mail", {"to": "<EMAIL_1>", "body": "hi"})], "Sent."]
        return Agent(ScriptedModel(script), tools=[send_mail], store=store, middleware=[policy])

    tenant_a, tenant_b = agent(store_a), agent(store_b)
    received.clear()
    try:
        assert (await tenant_a.run(f"I am {ANA}", session="s1")).output == f"Noted, {ANA}."
        assert (await tenant_b.run(f"I am {BEN}", session="s1")).output == f"Noted, {BEN}."
        await tenant_a.run("mail me", session="s1")
        await tenant_b.run("mail me", session="s1")
        assert received == [ANA, BEN]
    finally:
        await store_a.aclose()
        await store_b.aclose()


async def test_vault_keys_keep_stores_and_namespaces_apart_and_name_one_store_alike_everywhere(
    tmp_path: Path,
) -> None:
    """Two memory stores, two SQLite files, two Redis namespaces or databases: different keys for one run id.
    The same file or Redis namespace opened again (another process): the same key, so a shared vault resumes
    there. No key holds a path, a host or a password."""
    from onion.stores import MemoryStore, RedisStore

    def key(store: object | None) -> str:
        return vault_key("run", "run-1", store)

    redis = "redis://:hunter2@10.0.0.5:6380/2"
    apart = [
        None,
        MemoryStore(),
        MemoryStore(),
        SQLiteStore(tmp_path / "a.db"),
        SQLiteStore(tmp_path / "b.db"),
        RedisStore(redis, namespace="a"),
        RedisStore(redis, namespace="b"),
        RedisStore("redis://10.0.0.5:6380/3", namespace="a"),
        RedisStore("unix:///run/redis.sock?db=2&password=hunter2", namespace="a"),
    ]
    from redis.asyncio import Redis

    apart += [  # clients of the user's own: told apart by their server and db, not by the url left at its default
        RedisStore(client=Redis(host="10.0.0.7", port=6379), namespace="a"),
        RedisStore(client=Redis(host="10.0.0.8", port=6379), namespace="a"),
        RedisStore(client=Redis(host="10.0.0.8", port=6379, db=1), namespace="a"),
    ]
    again = [SQLiteStore(tmp_path / "a.db"), RedisStore("redis://other:secret@10.0.0.5:6380/2", namespace="a")]
    assert len({key(store) for store in apart}) == len(apart)
    assert [key(store) for store in again] == [key(apart[3]), key(apart[5])]
    assert all(key(store).startswith("run:") and key(store).endswith(":run-1") for store in apart)
    assert not any(word in key(store) for store in apart for word in ("hunter2", "10.0.0.5", "a.db", "redis"))
    for store in [*apart[3:], *again]:
        await store.aclose()  # type: ignore[union-attr]


async def test_sessions_given_to_agents_without_a_store_keep_no_values_rather_than_mix_tenants() -> None:
    """Two agents without a store share one layer, each on session `s1` of its own store: the run cannot say which
    store its session is in, so the next turn's `<EMAIL_1>` stays a placeholder rather than become the other
    tenant's customer."""
    from onion.stores import MemoryStore

    layer = pseudonymize()
    script = ["Noted, <EMAIL_1>.", [ToolRequest("c1", "send_mail", {"to": "<EMAIL_1>", "body": "hi"})], "Sent."]
    tenant_a = Agent(ScriptedModel(script), tools=[send_mail]).use(layer)
    tenant_b = Agent(ScriptedModel(script), tools=[send_mail]).use(layer)
    session_a, session_b = MemoryStore().session("s1"), MemoryStore().session("s1")
    received.clear()
    assert (await tenant_a.run(f"I am {ANA}", session=session_a)).output == f"Noted, {ANA}."
    await tenant_b.run(f"I am {BEN}", session=session_b)
    await tenant_a.run("mail me", session=session_a)
    assert received == ["<EMAIL_1>"]


async def test_a_session_keeps_its_values_across_agents_built_per_request(tmp_path: Path) -> None:
    """An agent built for each request with a bare `pseudonymize` (a new layer each time): the session's next turn
    still reads its real address, from the process's default vault."""
    with SQLiteStore(tmp_path / "onion.db") as store:

        def per_request(answer: str) -> Agent[str]:
            return Agent(ScriptedModel([answer]), store=store).use(pseudonymize)

        await per_request("Noted.").run(f"I am {EMAIL}", session="s")
        result = await per_request("Your address is <EMAIL_1>.").run("what is my address?", session="s")
    assert result.output == f"Your address is {EMAIL}."


@tool
def check_mailbox(to: str) -> str:
    """Check that a mailbox exists."""
    raise LookupError(f"no mailbox for {to}")


async def test_a_tools_error_with_a_real_value_is_kept_with_its_placeholder(tmp_path: Path) -> None:
    """A tool raises an error naming the real address while another call of its batch waits for approval: the
    SQLite journal and the paused state's `answered` list hold `<EMAIL_1>`, never the address; the model reads
    the error with the placeholder."""
    model = ScriptedModel(
        [
            [
                ToolRequest("c1", "check_mailbox", {"to": "<EMAIL_1>"}),
                ToolRequest("c2", "send_mail", {"to": "<EMAIL_1>", "body": "hi"}),
            ],
            "The mailbox <EMAIL_1> does not exist.",
        ]
    )
    with SQLiteStore(tmp_path / "onion.db") as store:
        agent = Agent(model, tools=[check_mailbox, send_mail], store=store).use(pseudonymize, approve("send_mail"))
        paused = await agent.run(f"mail {EMAIL}")
        state = paused.to_state()
        (answer,) = state.answered
        assert answer.text == "Tool check_mailbox failed: LookupError: no mailbox for <EMAIL_1>"
        assert real_values_in(state.to_json()) == []
        assert real_values_in(json.dumps(await store.journal(paused.run_id))) == []
        assert real_values_in(b"".join(file.read_bytes() for file in tmp_path.iterdir())) == []
        state.reject("c2", "no")
        result = await agent.resume(state)
    assert result.output == f"The mailbox {EMAIL} does not exist."
    sent = [m.text for m in model.requests[-1].messages]
    assert "Tool check_mailbox failed: LookupError: no mailbox for <EMAIL_1>" in sent


async def test_a_typed_answer_gets_values_with_backslashes_and_quotes_back_as_they_were() -> None:
    """A typed answer's JSON holds `<PATH_1>` and `<NAME_1>`: the values restored into it (`C:\\Users\\...`, a name
    with a quote) are escaped as JSON, so the answer validates and the fields hold the values as typed."""
    from pydantic import BaseModel

    class Found(BaseModel):
        path: str
        name: str

    path, name = r"C:\Users\jane\notes.txt", 'Jane "JD" Doe'
    model = ScriptedModel(['{"path": "<PATH_1>", "name": "<NAME_1>"}'])
    layer = pseudonymize(PATH=r"C:\\Users\\\S+", NAME=r"Jane \"JD\" Doe")
    result = await Agent(model, output_type=Found).use(layer).run(f"{name} lost {path}")
    assert model.requests[0].messages[-1].text == "<NAME_1> lost <PATH_1>"
    assert result.output == Found(path=path, name=name)


async def test_a_streamed_typed_answer_shows_json_that_parses_to_the_restored_output(
    server: FakeProviderServer, one_ssl_context: None
) -> None:
    """Streamed through a real SDK, a typed answer's `TextDelta`s join to JSON with the restored values escaped:
    it parses to the same value as `result.output`."""
    from pydantic import BaseModel

    class Found(BaseModel):
        path: str

    path = r"C:\Users\jane\notes.txt"
    server.script(['{"path": "<PATH_1>"}'])
    model = provider("anthropic", server)
    agent = Agent(model, output_type=Found).use(pseudonymize(PATH=r"C:\\Users\\\S+"))
    deltas: list[str] = []
    try:
        async for event in agent.stream(f"find {path}"):
            if isinstance(event, TextDelta):
                deltas.append(event.text)
            elif isinstance(event, StreamReset):
                deltas.clear()
            elif isinstance(event, RunFinished):
                result = event.result
    finally:
        await model.aclose()
    assert result.output == Found(path=path)
    assert len(deltas) > 1 and Found.model_validate_json("".join(deltas)) == result.output
