"""Every `python -m onion ...` command the docs show names a command, an action and options the CLI has."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from onion.__main__ import parser

ROOT = Path(__file__).parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")), *sorted((ROOT / "examples").glob("*.py"))]
CODE = re.compile(r"```[^\n]*\n(?P<block>.*?)```|`(?P<span>[^`]+)`", re.S)
COMMAND = re.compile(r"python -m onion\s+(?P<rest>.*)")


def subcommands(command: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    found: dict[str, argparse.ArgumentParser] = {}
    for action in command._actions:
        if isinstance(action, argparse._SubParsersAction):
            found.update(action.choices)
    return found


def options(command: argparse.ArgumentParser) -> set[str]:
    return {option for action in command._actions for option in action.option_strings}


def commands_in(text: str) -> list[str]:
    """What follows `python -m onion` in each code span, and on each line of each code block, of `text`."""
    found = []
    for code in CODE.finditer(text):
        pieces = code["block"].splitlines() if code["block"] is not None else [" ".join(code["span"].split())]
        for piece in pieces:
            command = COMMAND.search(piece)
            if command:
                found.append(re.split(r"\s+#\s", command["rest"])[0])  # a shell comment after the command
    return found


def mistakes(command: str, cli: argparse.ArgumentParser) -> list[str]:
    """What in one documented command the CLI lacks: an unknown command or action, an option it has not.

    `runs approve|reject|edit ... --as NAME` names three actions: each must have the option.
    """
    words = command.replace("[", " ").replace("]", " ").split()
    if not words or words[0] not in subcommands(cli):
        return [f"no command {words[:1]}"]
    main = subcommands(cli)[words[0]]
    named = [word.split("=")[0] for word in words[1:] if word.startswith("-") and word.strip("-")]
    choices = subcommands(main)
    names = next((w.split("|") for w in words[1:] if any(n in choices for n in w.split("|"))), [])
    actions = {name: choices[name] for name in names if name in choices}
    if len(actions) < len(names):
        return [f"{words[0]} has no action among {'|'.join(names)}"]
    found = []
    for name, action in actions.items() or {"": main}.items():
        known = options(main) | options(action)
        where = f"{words[0]} {name}".strip()
        found += [f"{where} has no option {option}" for option in named if option not in known]
    return found


DOCUMENTED = [(page, command) for page in PAGES for command in commands_in(page.read_text())]


def test_the_docs_show_commands_of_every_kind() -> None:
    """The parser finds the docs' commands: `demo`, `runs` with its actions and options, `serve`."""
    shown = {command.split()[0] for _, command in DOCUMENTED if command.split()}
    assert {"demo", "runs", "serve"} <= shown
    assert sum("--" in command for _, command in DOCUMENTED) >= 10


@pytest.mark.parametrize(("page", "command"), DOCUMENTED, ids=[f"{p.name}: {c}" for p, c in DOCUMENTED])
def test_every_documented_command_has_the_options_it_names(page: Path, command: str) -> None:
    """`python -m onion runs purge --older-than 7d`: `runs` has `purge`, which has `--older-than`."""
    assert mistakes(command, parser()) == [], f"{page.relative_to(ROOT)}: python -m onion {command}"


def test_a_made_up_option_action_or_command_is_caught() -> None:
    """The check fails on an option no parser has, on an action that does not exist, and on an unknown command."""
    cli = parser()
    assert mistakes("runs approve RUN --agent a:b --db x.db", cli) == []
    assert mistakes("runs purge --older-than 7d [--all]", cli) == []
    assert mistakes("runs --db x.db approve|reject|edit RUN --as NAME", cli) == []
    assert mistakes("runs --sqlite x.db", cli) == ["runs has no option --sqlite"]
    assert mistakes("runs approve|reject --reason why", cli) == ["runs approve has no option --reason"]
    assert mistakes("runs approve|undo RUN", cli) == ["runs has no action among approve|undo"]
    assert mistakes("serve app:agent --workers=4", cli) == ["serve has no option --workers"]
    assert mistakes("inbox", cli) == ["no command ['inbox']"]
    assert commands_in("`python -m onion\n  runs purge --older-than`") == ["runs purge --older-than"]
