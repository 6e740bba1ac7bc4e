"""`onion.evals.evaluate`: 20 cases recorded through the real SDK, replayed with the server gone, the same report."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from middleware import approve
from onion import Agent, Message, ModelCall, ModelResponse, ToolCall, ToolNext, ToolResult, Usage, tool
from onion.evals import (
    Case,
    Trajectory,
    blocked,
    called,
    called_in_order,
    evaluate,
    evaluate_sync,
    judge,
    not_called,
    output_equals,
    output_is,
    output_matches,
    paused,
    usage_under,
)
from onion.providers import AnthropicModel
from onion.testing import FakeProviderServer, FunctionModel, RecordedRequest, ScriptedModel, call

TEMPERATURES = {"Paris": 18, "Lyon": 16, "Rome": 24, "Oslo": 3, "Cairo": 31, "Lima": 19, "Quito": 14, "Tokyo": 22}
TEMPERATURES |= {"Delhi": 35, "Berlin": 12, "Madrid": 27, "Dublin": 9, "Vienna": 15}


@pytest.fixture(scope="module", autouse=True)
def _fast_tls(one_ssl_context: None) -> None:
    """Build the TLS context once for the module (see tests/conftest.py)."""


@tool
def get_weather(city: str) -> str:
    """Current weather for a city."""
    return f"{TEMPERATURES[city]}°C in {city}"


@tool
def get_forecast(city: str) -> str:
    """Tomorrow's weather for a city."""
    return f"rain tomorrow in {city}"


@tool
def delete_file(path: str) -> str:
    """Delete a file."""
    raise AssertionError("delete_file must never run")


@tool
def charge(amount: int) -> str:
    """Charge the customer."""
    return f"charged {amount}"


async def no_deletes(ctx: ToolCall, call_next: ToolNext) -> ToolResult:
    if ctx.name == "delete_file":
        return ctx.block("deleting files is not allowed")
    return await call_next(ctx)


def respond(request: RecordedRequest) -> Any:
    """The fake model: a pure function of the conversation (runs arrive concurrently)."""
    messages = request.body["messages"]
    question = messages[0]["content"][0]["text"]
    results = [
        block
        for message in messages
        if message["role"] == "user" and isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "tool_result"
    ]
    done = len(results)
    last = results[-1]["content"] if results else ""
    last = last if isinstance(last, str) else "".join(part.get("text", "") for part in last)
    if question.startswith("say hi"):
        return answer("hi")
    if question.startswith("delete"):
        return answer("I could not delete old.txt.") if done else tools(call("delete_file", path="old.txt"))
    if question.startswith("charge"):
        return tools(call("charge", amount=5))
    city = question.rstrip("?").split()[-1]
    if question.startswith("forecast"):
        steps = [call("get_weather", city=city), call("get_forecast", city=city)]
        return tools(steps[done]) if done < 2 else answer(f"It is {last}, and {city} will be wet.")
    if done:
        return answer(f"It is {last}.")
    return tools(call("get_weather", city="Paris" if city == "Lyon" else city))  # a model that gets Lyon wrong


def answer(text: str) -> ModelResponse:
    return ModelResponse(Message.assistant(text), Usage(30, 8, 1))


def tools(*requests: Any) -> ModelResponse:
    return ModelResponse(Message.assistant("", list(requests)), Usage(20, 5, 1))


def short_answer(trajectory: Trajectory) -> bool:
    """A check of the user's own: a plain function answering a bool."""
    return len(str(trajectory.output)) < 40


def weather(city: str, *more: Any) -> Case:
    return Case(f"weather in {city}?", checks=[called("get_weather", city=city), output_matches(city), *more])


CASES = [
    *(weather(city, usage_under(tokens=100)) for city in ["Paris", "Cairo", "Lima", "Tokyo", "Delhi", "Berlin"]),
    weather("Madrid", short_answer),
    weather("Dublin", not_called("delete_file")),
    weather("Vienna", usage_under(requests=2)),
    Case("weather in Rome?", expected="It is 24°C in Rome."),
    weather("Oslo", usage_under(tokens=50)),
    weather("Lyon"),
    Case("delete old.txt", checks=[blocked("delete_file"), not_called("delete_file")]),
    Case("charge 5 euros", checks=[paused("charge"), not_called("get_weather")]),
    Case("say hi", checks=[output_equals("hi"), not_called("get_weather")]),
    Case("say hi twice", expected="hi hi"),
    Case("say hi as a number", name="hi-as-number", checks=[output_is(int)]),
    Case("forecast for Tokyo?", checks=[called_in_order("get_weather", "get_forecast"), output_matches("wet")]),
    Case("forecast for Quito?", name="forecast-backwards", checks=[called_in_order("get_forecast", "get_weather")]),
    Case("weather in Quito?", checks=[called("get_weather"), output_matches(r"\d+°C")]),
]

FAILING = {
    ("weather-in-oslo", "usage_under(tokens=50)"),
    ("weather-in-lyon", "called('get_weather', city='Lyon')"),
    ("weather-in-lyon", "output_matches('Lyon')"),
    ("delete-old-txt", "not_called('delete_file')"),
    ("say-hi-twice", "output_equals('hi hi')"),
    ("hi-as-number", "output_is(int)"),
    ("forecast-backwards", "called_in_order('get_forecast', 'get_weather')"),
}


def weather_agent(url: str) -> Agent:
    model = AnthropicModel("claude-test", base_url=url, api_key="sk-ant-api03-EVALKEY0123456789")
    return Agent(model, tools=[get_weather, get_forecast, delete_file, charge]).use(no_deletes, approve("charge"))


async def test_an_eval_of_20_cases_names_each_failing_check_and_replays_to_the_same_report(tmp_path: Path) -> None:
    """Recorded live (concurrently, one cassette per case), then replayed twice with the server gone: one report."""
    assert len(CASES) == 20
    folder = tmp_path / "evals"
    with FakeProviderServer(respond=respond) as server:
        url = server.url
        agent = weather_agent(url)
        recorded = await evaluate(agent, CASES, cassettes=folder, concurrency=5, name="weather")
        await agent.model.aclose()  # type: ignore[attr-defined]
        seen = len(server.requests)
    assert seen == 13 * 2 + 2 + 1 + 3 + 2 * 3  # weather: a tool call, then the answer; charge pauses; forecasts: 3
    assert len(list(folder.glob("*.json"))) == 20
    assert {(case, check.name) for case, check in recorded.failures} == FAILING
    table = str(recorded)
    for case, check in FAILING:
        assert check in table, f"{check} of {case} is not named in the report"
    assert "eval weather: 14 of 20 cases passed" in table
    words = " ".join(table.split())
    assert "tokens 63 > 50" in words and "get_weather was called with {'city': 'Paris'}" in words

    replays = []
    for _ in range(2):
        agent = weather_agent(url)
        replays.append(await evaluate(agent, CASES, cassettes=folder, mode="replay", concurrency=7, name="weather"))
        await agent.model.aclose()  # type: ignore[attr-defined]
    assert len(server.requests) == seen
    assert str(replays[0]) == str(replays[1]) == table
    assert replays[0].to_html() == replays[1].to_html() == recorded.to_html()


def test_the_report_is_a_table_and_an_html_page_naming_every_case_and_check(tmp_path: Path) -> None:
    """The table lists each case with its result; the page (escaped) each case, check and detail."""
    cases = [Case("say <b>hi</b>", name="tags", expected="<i>no</i>"), Case("ok?", name="fine", expected="yes")]
    report = evaluate_sync(FunctionModelAgent(), cases)
    page = report.to_html(tmp_path / "report.html")
    assert (tmp_path / "report.html").read_text() == page
    assert "<b>hi</b>" not in page and "&lt;b&gt;hi&lt;/b&gt;" in page
    assert "output_equals(&#x27;&lt;i&gt;no&lt;/i&gt;&#x27;)" in page
    lines = str(report).splitlines()
    assert lines[0] == "eval eval: 1 of 2 cases passed"
    assert lines[4].startswith("tags") and "FAIL" in lines[4] and "output_equals('<i>no</i>')" in lines[4]
    assert lines[5].startswith("fine") and "pass" in lines[5]


def FunctionModelAgent() -> Agent:
    return Agent(FunctionModel(lambda c: "yes" if c.messages[-1].text == "ok?" else "no"))


async def test_a_judge_asks_its_model_with_the_rubric_and_replays_from_the_cassette(tmp_path: Path) -> None:
    """The judge's model reads the question, the answer and the rubric; replayed, it is not asked again."""
    asked: list[str] = []

    def grade(call: ModelCall) -> str:
        asked.append(call.messages[-1].text)
        passed = "polite" in call.messages[-1].text and "Hello, dear user" in call.messages[-1].text
        return '{"passed": %s, "reason": "it greets the user"}' % ("true" if passed else "false")

    rubric = judge(FunctionModel(grade), "The answer is polite.", name="polite")
    cases = [Case("greet me", checks=[rubric])]
    first = await evaluate(Agent(ScriptedModel(["Hello, dear user"])), cases, cassettes=tmp_path)
    again = await evaluate(Agent(ScriptedModel([])), cases, cassettes=tmp_path, mode="replay")
    assert len(asked) == 1
    assert "Question:\ngreet me" in asked[0] and "Rubric:\nThe answer is polite." in asked[0]
    assert first.passed and again.passed
    assert str(first) == str(again)
    assert first.cases[0].checks[0].name == "polite" and first.cases[0].checks[0].detail == "it greets the user"


async def test_cases_run_concurrently_up_to_the_limit_and_keep_their_order() -> None:
    """At most `concurrency` runs at once; the report lists cases in the order given."""
    running, most = 0, 0

    async def slow(call: ModelCall) -> str:
        nonlocal running, most
        running += 1
        most = max(most, running)
        await asyncio.sleep(0.01 if "1" in call.messages[-1].text else 0.001)
        running -= 1
        return call.messages[-1].text.upper()

    cases = [Case(f"case {n}", expected=f"CASE {n}") for n in range(12)]
    report = await evaluate(Agent(FunctionModel(slow)), cases, concurrency=4)
    assert most == 4
    assert [case.name for case in report.cases] == [f"case-{n}" for n in range(12)]
    assert report.passed


async def test_a_case_whose_run_raises_fails_with_the_error_and_the_others_go_on() -> None:
    """The error is the case's failure (as a `run` check); the rest of the eval runs."""

    def sometimes(call: ModelCall) -> str:
        if call.messages[-1].text == "boom":
            raise ValueError("the model broke")
        return "fine"

    report = await evaluate(Agent(FunctionModel(sometimes)), [Case("boom"), Case("calm", expected="fine")])
    assert [case.passed for case in report.cases] == [False, True]
    assert report.failures[0][0] == "boom" and report.failures[0][1].name == "run"
    assert "ValueError: the model broke" in str(report)


async def test_case_names_come_from_the_input_and_given_names_must_differ() -> None:
    """Inputs that read alike are numbered; two cases given one name are refused (they would share a cassette)."""
    agent = Agent(FunctionModel(lambda ctx: ModelResponse(Message.assistant("ok"))))
    report = await evaluate(agent, [Case("Weather in Paris?"), Case("weather in paris"), Case("x", name="mine")])
    assert [case.name for case in report.cases] == ["weather-in-paris", "weather-in-paris-2", "mine"]
    with pytest.raises(ValueError, match="given twice"):
        await evaluate(agent, [Case("a", name="same"), Case("b", name="same")])


async def test_a_factory_gives_each_case_an_agent_of_its_own() -> None:
    """`evaluate(lambda: Agent(...), ...)` builds one agent per case (layers' state stays per case)."""
    made: list[Agent] = []

    def fresh() -> Agent:
        made.append(Agent(ScriptedModel(["one answer"])))
        return made[-1]

    report = await evaluate(fresh, [Case("a", expected="one answer"), Case("b", expected="one answer")])
    assert report.passed and len(made) == 2


async def test_progress_is_a_bar_on_stderr_when_asked_and_silent_otherwise(capsys: pytest.CaptureFixture[str]) -> None:
    """`progress=True` redraws one line as cases finish, counting failures; by default (no terminal) nothing."""
    cases = [Case("a", expected="x"), Case("b", expected="nope")]
    await evaluate(Agent(FunctionModel(lambda call: "x")), cases, progress=True)
    drawn = capsys.readouterr().err
    assert "] 0/2 cases" in drawn and "[" + "#" * 30 + "] 2/2 cases, 1 failed\n" in drawn
    await evaluate(Agent(FunctionModel(lambda call: "x")), cases)
    assert capsys.readouterr().err == ""


async def test_a_case_whose_run_failed_says_run_failed_with_the_error_not_a_count_of_checks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its row reads `run failed: CassetteMismatch: cassette cassettes/boom.json ...` (a path under the working
    directory shown relative to it), not `FAIL 0/0`; the page says the same."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "cassettes").mkdir()
    (tmp_path / "cassettes" / "boom.json").write_text('{"version": 1, "model_calls": []}')
    cases = [Case("boom", expected="fine")]
    report = await evaluate(Agent(ScriptedModel([])), cases, cassettes=tmp_path / "cassettes", mode="replay")
    row = str(report).splitlines()[4]
    assert row.startswith("boom  run failed: CassetteMismatch: cassette cassettes/boom.json holds no model call")
    assert "0/" not in row and str(tmp_path) not in str(report)
    assert "run failed: CassetteMismatch: cassette cassettes/boom.json" in report.to_html()


async def test_a_cassette_missing_in_replay_fails_its_case_and_the_others_go_on(tmp_path: Path) -> None:
    """`mode="replay"` with no file for a case: that case fails naming the file; the eval goes on."""
    agent = Agent(ScriptedModel(["fine"]))
    await evaluate(agent, [Case("calm", expected="fine")], cassettes=tmp_path)
    report = await evaluate(agent, [Case("calm", expected="fine"), Case("new")], cassettes=tmp_path, mode="replay")
    assert [case.passed for case in report.cases] == [True, False]
    assert report.cases[1].error is not None and "new.json does not exist" in report.cases[1].error
