"""`onion.testing.cassette`: record real runs through the provider SDKs once, replay them with no server at all."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from onion import Agent, Event, Message, ModelResponse, RunFinished, RunResult, TextDelta, ToolCallStarted, Usage, tool
from onion.providers import AnthropicModel, OpenAIChatModel, OpenAIResponsesModel
from onion.testing import CassetteMismatch, FakeProviderServer, ScriptedModel, call, cassette

ProviderModel = AnthropicModel | OpenAIChatModel | OpenAIResponsesModel  # the three public provider models

APIS = ["anthropic", "openai", "openai-responses"]
KEY = "sk-ant-api03-SECRETSECRETSECRET0123456789"
"""The API key every model here is built with: it must never reach a cassette."""


@pytest.fixture(scope="module", autouse=True)
def _fast_tls(one_ssl_context: None) -> None:
    """Build the TLS context once for the module (see tests/conftest.py)."""


@pytest.fixture(params=APIS)
def api(request: pytest.FixtureRequest) -> str:
    value: str = request.param
    return value


@pytest.fixture(params=[False, True], ids=["run", "stream"])
def streamed(request: pytest.FixtureRequest) -> bool:
    value: bool = request.param
    return value


def build_model(api: str, url: str) -> ProviderModel:
    """An onion model of `api` talking to the fake server at `url` (the server's base URL)."""
    if api == "anthropic":
        return AnthropicModel("claude-test", base_url=url, api_key=KEY)
    if api == "openai":
        return OpenAIChatModel("gpt-test", base_url=f"{url}/v1", api_key=KEY)
    return OpenAIResponsesModel("gpt-test", base_url=f"{url}/v1", api_key=KEY)


looked_up: list[str] = []


@tool
def get_weather(city: str) -> str:
    """Current weather for a city."""
    looked_up.append(city)
    return f"18°C and sunny in {city}"


def weather_script() -> list[Any]:
    """A tool call, then the answer, each with token usage."""
    return [
        ModelResponse(Message.assistant("", [call("get_weather", city="Paris")]), Usage(21, 7, 1)),
        ModelResponse(Message.assistant("It is 18°C and sunny in Paris."), Usage(40, 12, 1)),
    ]


async def ask(agent: Agent, question: str, streamed: bool) -> tuple[RunResult, list[Event]]:
    if not streamed:
        return await agent.run(question), []
    events = [event async for event in agent.stream(question)]
    last = events[-1]
    assert isinstance(last, RunFinished)
    return last.result, events


async def weather_run(api: str, url: str, streamed: bool, question: str = "weather in Paris?", **options: Any) -> Any:
    """One run of the weather agent against `url`, its model closed after."""
    model = build_model(api, url)
    try:
        return await ask(Agent(model, tools=[get_weather], **options), question, streamed)
    finally:
        await model.aclose()


def tool_calls(result: RunResult) -> list[tuple[str, dict[str, Any]]]:
    return [(c.name, c.args) for m in result.messages for c in m.tool_calls]


def shown(events: list[Event]) -> list[Any]:
    """What a stream consumer sees, comparable across runs."""
    seen: list[Any] = []
    for event in events:
        if isinstance(event, TextDelta):
            seen.append(("text", event.text))
        elif isinstance(event, ToolCallStarted):
            seen.append(("call", event.name, event.args))
        else:
            seen.append(type(event).__name__)
    return seen


async def test_a_run_recorded_through_the_real_sdk_replays_with_the_server_gone(
    api: str, streamed: bool, tmp_path: Path
) -> None:
    """Recorded against the fake server, replayed after it stopped: same output, tool calls, usage and stream.

    The replay sends nothing: the server saw only the recording's requests.
    """
    path = tmp_path / "weather.json"
    with FakeProviderServer(weather_script()) as server:
        async with cassette(path) as recording:
            live, live_events = await weather_run(api, server.url, streamed)
        seen, url = len(server.requests), server.url
    assert recording.recording and seen == 2
    looked_up.clear()
    async with cassette(path, mode="replay") as replaying:
        replayed, replayed_events = await weather_run(api, url, streamed)
    assert not replaying.recording
    assert len(server.requests) == seen
    assert replayed.output == live.output == "It is 18°C and sunny in Paris."
    assert tool_calls(replayed) == tool_calls(live) == [("get_weather", {"city": "Paris"})]
    assert replayed.usage == live.usage == Usage(61, 19, 2)
    assert looked_up == ["Paris"], "tools still run on replay (tools=False)"
    assert shown(replayed_events) == shown(live_events)
    if streamed:
        deltas = [e for e in replayed_events if isinstance(e, TextDelta)]
        assert len(deltas) > 1, "a streamed replay streams the recorded deltas, not one block of text"


async def test_a_streamed_recording_holds_the_events_in_order(tmp_path: Path) -> None:
    """Each streamed call is kept with its events, in the order the model sent them."""
    path = tmp_path / "stream.json"
    with FakeProviderServer(["Hello there, streamed world."], chunk_size=5) as server:
        async with cassette(path):
            await weather_run("anthropic", server.url, True, "hi")
    entry = json.loads(path.read_text())["model_calls"][0]
    texts = [event["text"] for event in entry["events"] if event["type"] == "text_delta"]
    assert len(texts) > 1 and "".join(texts) == "Hello there, streamed world."


async def test_a_changed_question_under_replay_raises_cassette_mismatch_naming_the_field(tmp_path: Path) -> None:
    """The first differing field is named, with the recorded and the new value; no request is sent."""
    path = tmp_path / "weather.json"
    with FakeProviderServer(weather_script()) as server:
        async with cassette(path):
            await weather_run("openai", server.url, False)
        with pytest.raises(CassetteMismatch) as raised:
            async with cassette(path, mode="replay"):
                await weather_run("openai", server.url, False, "weather in Lyon?")
        assert len(server.requests) == 2
    error = raised.value
    assert error.field == "messages[0].text"
    assert (error.recorded, error.actual) == ("weather in Paris?", "weather in Lyon?")
    assert "messages[0].text" in str(error) and "weather in Lyon?" in str(error) and "weather in Paris?" in str(error)


async def test_a_mismatch_shows_both_values_scrubbed(tmp_path: Path) -> None:
    """A secret in either value is shown as [REDACTED], never as itself."""
    path = tmp_path / "secret.json"
    async with cassette(path):
        await Agent(ScriptedModel(["ok"])).run(f"my key is {KEY}, keep it")
    with pytest.raises(CassetteMismatch) as raised:
        async with cassette(path, mode="replay"):
            await Agent(ScriptedModel([])).run("my key is sk-proj-ANOTHERSECRET0123456789, forget it")
    assert "[REDACTED], keep it" in str(raised.value) and "[REDACTED], forget it" in str(raised.value)
    assert "SECRET" not in str(raised.value)


async def test_replay_of_a_missing_file_raises_before_any_request(tmp_path: Path) -> None:
    """mode="replay" never calls a model: without the file it raises on entering the block."""
    model = ScriptedModel(["never asked"])
    with pytest.raises(CassetteMismatch, match="does not exist"):
        async with cassette(tmp_path / "missing.json", mode="replay"):
            await Agent(model).run("hi")
    assert model.requests == []


async def test_once_records_a_missing_file_creating_its_folders_then_replays_it(tmp_path: Path) -> None:
    """The default mode records when the file is missing (folders made) and replays once it exists."""
    path = tmp_path / "deep" / "er" / "once.json"
    first = ScriptedModel(["recorded answer"])
    async with cassette(path):
        assert (await Agent(first).run("hi")).output == "recorded answer"
    second = ScriptedModel(["a live answer"])
    with cassette(path):
        assert (await Agent(second).run("hi")).output == "recorded answer"
    assert len(first.requests) == 1 and second.requests == []


def test_a_sync_with_block_records_and_replays_run_sync(tmp_path: Path) -> None:
    """`with cassette(...)` (no event loop) applies to `agent.run_sync` inside it."""
    path = tmp_path / "sync.json"
    with cassette(path):
        Agent(ScriptedModel(["sync answer"])).run_sync("hi")
    with cassette(path, mode="replay"):
        assert Agent(ScriptedModel([])).run_sync("hi").output == "sync answer"


async def test_record_mode_calls_the_model_and_rewrites_the_file(tmp_path: Path) -> None:
    """mode="record" ignores what the file holds, asks the model, and writes the new answers over it."""
    path = tmp_path / "again.json"
    async with cassette(path):
        await Agent(ScriptedModel(["old answer"])).run("hi")
    fresh = ScriptedModel(["new answer"])
    async with cassette(path, mode="record"):
        assert (await Agent(fresh).run("hi")).output == "new answer"
    async with cassette(path, mode="replay"):
        assert (await Agent(ScriptedModel([])).run("hi")).output == "new answer"
    assert len(fresh.requests) == 1
    assert len(json.loads(path.read_text())["model_calls"]) == 1


async def test_the_cassette_file_holds_no_key_no_authorization_header_and_no_sk_string(tmp_path: Path) -> None:
    """Keys in the question, credential headers and settings are scrubbed before the file is written."""
    settings = {
        "extra_headers": {"Authorization": "Bearer abcdefghijklmnop0123", "x-api-key": KEY, "x-run": "7"},
        "extra_body": {"api_key": "plain-credential-value", "note": "password=hunter2hunter2"},
    }
    for api in APIS:
        with FakeProviderServer(weather_script()) as server:
            url = server.url
            async with cassette(tmp_path / f"{api}.json"):
                await weather_run(api, url, False, f"weather in Paris? my key: {KEY}", settings=settings)
            assert server.requests[0].headers["x-run"] == "7"
        data = (tmp_path / f"{api}.json").read_bytes()
        assert KEY.encode() not in data
        assert re.search(rb"sk-[A-Za-z0-9_-]{6,}", data) is None
        assert b"Bearer" not in data and b"abcdefghijklmnop0123" not in data
        assert b"plain-credential-value" not in data and b"hunter2" not in data
        assert b'"x-run": "7"' in data
        async with cassette(tmp_path / f"{api}.json", mode="replay"):
            replayed, _ = await weather_run(api, url, False, f"weather in Paris? my key: {KEY}", settings=settings)
        assert replayed.output == "It is 18°C and sunny in Paris."


async def test_the_file_is_readable_json_one_entry_per_call_in_a_stable_key_order(tmp_path: Path) -> None:
    """Indented, sorted keys, an entry per model call with the request as the model got it and its response."""
    path = tmp_path / "shape.json"
    with FakeProviderServer(weather_script()) as server:
        async with cassette(path):
            await weather_run("openai-responses", server.url, False, settings={"temperature": 0})
    text = path.read_text()
    data = json.loads(text)
    assert text == json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    first, second = data["model_calls"]
    assert first["request"]["provider"] == "openai-responses" and first["request"]["model"] == "gpt-test"
    assert first["request"]["settings"] == {"temperature": 0}
    assert first["request"]["tools"][0]["name"] == "get_weather"
    assert first["request"]["output_type"] == "str"
    assert first["response"]["message"]["tool_calls"][0]["args"] == {"city": "Paris"}
    assert second["request"]["messages"][-1]["role"] == "tool"
    assert second["response"]["usage"]["input_tokens"] == 40


class City(BaseModel):
    name: str


async def test_another_provider_model_or_output_type_is_named_plainly(tmp_path: Path) -> None:
    """A cassette recorded with one model or output type, replayed with another, says which it was recorded with."""
    path = tmp_path / "anthropic.json"
    with FakeProviderServer(weather_script()) as server:
        async with cassette(path):
            await weather_run("anthropic", server.url, False)
        with pytest.raises(CassetteMismatch) as other_api:
            async with cassette(path, mode="replay"):
                await weather_run("openai", server.url, False)
    assert other_api.value.field == "provider"
    assert "recorded with anthropic:claude-test (output type str)" in str(other_api.value)
    assert "goes to openai:gpt-test" in str(other_api.value)
    with pytest.raises(CassetteMismatch) as other_type:
        async with cassette(path, mode="replay"):
            await Agent(build_model("anthropic", "http://127.0.0.1:9"), output_type=City).run("weather in Paris?")
    assert other_type.value.field == "output_type" and "output type City" in str(other_type.value)


async def test_provider_generated_ids_and_ignored_fields_are_left_out_of_matching(tmp_path: Path) -> None:
    """Tool call ids differ from one recording to the next; `ignore` leaves named fields out too."""
    path = tmp_path / "ids.json"
    history = [Message.user("add"), Message.assistant("", [call("add", a=1)]), Message.tool("x", "2")]
    history[2].tool_call_id = history[1].tool_calls[0].id
    async with cassette(path):
        await Agent(ScriptedModel(["done"]), settings={"temperature": 0.2}).run(history)
    again = [Message.user("add"), Message.assistant("", [call("add", a=1)]), Message.tool("x", "2")]
    again[2].tool_call_id = again[1].tool_calls[0].id
    assert again[2].tool_call_id != history[2].tool_call_id
    async with cassette(path, mode="replay", ignore=["settings.temperature"]):
        result = await Agent(ScriptedModel([]), settings={"temperature": 0.9}).run(again)
    assert result.output == "done"
    with pytest.raises(CassetteMismatch) as raised:
        async with cassette(path, mode="replay"):
            await Agent(ScriptedModel([]), settings={"temperature": 0.9}).run(again)
    assert raised.value.field == "settings.temperature"


async def test_each_recorded_call_answers_once(tmp_path: Path) -> None:
    """A request asked more often than it was recorded raises, saying each recording was already replayed."""
    path = tmp_path / "once.json"
    async with cassette(path):
        await Agent(ScriptedModel(["first"])).run("hi")
    agent = Agent(ScriptedModel([]))
    with pytest.raises(CassetteMismatch, match="already replayed"):
        async with cassette(path, mode="replay"):
            assert (await agent.run("hi")).output == "first"
            await agent.run("hi")


async def test_every_agent_and_task_inside_the_block_is_recorded(tmp_path: Path) -> None:
    """Two agents, run concurrently inside one block, both record and both replay."""
    import asyncio

    path = tmp_path / "two.json"
    async with cassette(path):
        outputs = await asyncio.gather(
            Agent(ScriptedModel(["from a"]), name="a").run("a?"), Agent(ScriptedModel(["from b"])).run("b?")
        )
    async with cassette(path, mode="replay"):
        again = await asyncio.gather(Agent(ScriptedModel([])).run("b?"), Agent(ScriptedModel([])).run("a?"))
    assert [r.output for r in outputs] == ["from a", "from b"]
    assert [r.output for r in again] == ["from b", "from a"]


async def test_a_recording_block_that_raises_writes_no_file(tmp_path: Path) -> None:
    """A failed recording leaves no cassette behind (the next run records afresh)."""
    path = tmp_path / "failed.json"
    with pytest.raises(RuntimeError):
        async with cassette(path):
            await Agent(ScriptedModel(["answer"])).run("hi")
            raise RuntimeError("the test failed")
    assert not path.exists()


async def test_tools_true_replays_tool_results_without_running_the_tools(tmp_path: Path) -> None:
    """With `tools=True` the tools' results are recorded, and a replay answers them without calling the tools."""
    ran: list[int] = []

    @tool
    def lookup(order: int) -> str:
        """Look an order up."""
        ran.append(order)
        if order == 2:
            raise ValueError("no such order")
        return f"order {order}: shipped"

    path = tmp_path / "tools.json"
    script = [[call("lookup", order=1), call("lookup", order=2)], "order 1 shipped, order 2 unknown"]
    async with cassette(path, tools=True):
        live = await Agent(ScriptedModel(script), tools=[lookup]).run("orders?")
    assert sorted(ran) == [1, 2]
    ran.clear()
    async with cassette(path, mode="replay", tools=True):
        replayed = await Agent(ScriptedModel([]), tools=[lookup]).run("orders?")
    assert ran == []
    assert [m.to_dict() for m in replayed.messages] == [m.to_dict() for m in live.messages]
    assert "ValueError: no such order" in replayed.messages[3].text
    assert {entry["name"] for entry in json.loads(path.read_text())["tool_calls"]} == {"lookup"}


async def test_an_unknown_model_class_is_recorded_by_its_class_name(tmp_path: Path) -> None:
    """A model that is not a provider model is named by its class (ScriptedModel) and its name."""
    path = tmp_path / "scripted.json"
    async with cassette(path):
        await Agent(ScriptedModel(["x"], name="mine")).run("hi")
    request = json.loads(path.read_text())["model_calls"][0]["request"]
    assert (request["provider"], request["model"]) == ("ScriptedModel", "mine")


def test_an_unknown_mode_is_refused() -> None:
    """A typo in `mode` is a ValueError naming the modes."""
    with pytest.raises(ValueError, match="'once', 'record', 'replay'"):
        cassette("x.json", mode="replay-all")  # type: ignore[arg-type]
