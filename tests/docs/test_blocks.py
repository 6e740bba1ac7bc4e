"""The Python blocks of README.md and docs/, as the docs tests read them.

A block whose first line starts with `# fragment` is a fragment: it shows part
of a program (names it uses come from the prose around it), and the suite only
compiles it (top-level `await` allowed). Every other Python block is a whole
program: the suite runs it in a fresh process, offline (forked from one that
imported onion and the SDKs once: tests/forker.py). A program that calls a
real provider (`"anthropic:..."`, `"openai:..."`) talks to a fake provider
server scripted by an HTML comment just above the block, invisible on the page:

    <!-- fake model: [[call("get_weather", city="Paris")], "18°C and sunny."] -->

(a Python expression, evaluated with `call` and the faults `HTTPError`,
`Delay`, `StreamError` and `DropConnection` in scope, giving the script of
`FakeProviderServer`). A ```` ```text ```` block right after a program is
its output, and the suite checks the program prints exactly that.

A fragment's first line says what the reader supplies (`# fragment: agent
and City are yours`); the site shows that note without the marker
(docs_hooks.py). A fragment of another tool's code, not onion's (the
migration pages' "before"), says so: `(not installed here)` or `run by
Claude Code`. The first block of every page that is not another tool's is
a program. The suite prints how many programs ran, how many fragments
compiled and how many failed (tests/docs/conftest.py).
"""

from __future__ import annotations

import ast
import functools
import os
import re
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
from forker import Forker

from onion.testing import Delay, DropConnection, FakeProviderServer, HTTPError, StreamError, call

ROOT = Path(__file__).parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]

FENCE = re.compile(r"^(?P<indent>[ ]*)```(?P<info>[^\n`]*)\n(?P<body>.*?)^(?P=indent)```[ ]*$", re.M | re.S)
SCRIPT = re.compile(r"<!--\s*fake model:\s*(?P<script>.*?)-->\s*\Z", re.S)


@dataclass(frozen=True)
class Block:
    """One Python block: where it is, its code, and what the page says about running it."""

    page: Path
    line: int
    code: str
    script: str | None
    output: str | None

    @property
    def fragment(self) -> bool:
        return self.code.startswith("# fragment")

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"

    @property
    def foreign(self) -> bool:
        """A fragment of another tool's code (a migration page's "before"), which onion's suite cannot run."""
        first = self.code.partition("\n")[0]
        return self.fragment and ("(not installed here)" in first or "run by Claude Code" in first)


def _dedent(body: str, indent: str) -> str:
    return "".join(line.removeprefix(indent) for line in body.splitlines(keepends=True))


def blocks_of(page: Path) -> list[Block]:
    """The Python blocks of one Markdown page, in order."""
    text = page.read_text()
    fences = list(FENCE.finditer(text))
    found = []
    for index, fence in enumerate(fences):
        if fence["info"].strip().split()[:1] != ["python"]:
            continue
        before = text[fences[index - 1].end() if index else 0 : fence.start()]
        script = SCRIPT.search(before)
        output = None
        if index + 1 < len(fences):
            after = fences[index + 1]
            if after["info"].strip() == "text" and not text[fence.end() : after.start()].strip():
                output = _dedent(after["body"], after["indent"])
        found.append(
            Block(
                page=page,
                line=text.count("\n", 0, fence.start()) + 1,
                code=_dedent(fence["body"], fence["indent"]),
                script=script["script"].strip() if script else None,
                output=output,
            )
        )
    return found


def all_blocks() -> list[Block]:
    """Every Python block of README.md and docs/."""
    return [block for page in PAGES for block in blocks_of(page)]


def _compile(block: Block) -> None:
    compile(block.code, block.where, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True)


def _run(forker: Forker, block: Block) -> subprocess.CompletedProcess[str]:
    """Run one program in a fresh process and directory, its providers pointed at a fake server."""
    scope = {"call": call, "HTTPError": HTTPError, "Delay": Delay, "StreamError": StreamError}
    script = eval(block.script, {**scope, "DropConnection": DropConnection}) if block.script else []
    with tempfile.TemporaryDirectory() as folder, FakeProviderServer() as server:
        server.script(script)
        program = Path(folder) / "program.py"
        program.write_text(block.code)
        env = {
            **os.environ,
            "ANTHROPIC_API_KEY": "test-key",
            "ANTHROPIC_BASE_URL": server.url,
            "OPENAI_API_KEY": "test-key",
            "OPENAI_BASE_URL": server.openai_url,
            "PYTHONUNBUFFERED": "1",
        }
        env.pop("ONION_STATE_KEY", None)
        process = forker.popen(program, env=env, cwd=folder)
        try:
            output, errors = process.communicate(timeout=60)  # stdin closed at once
        except subprocess.TimeoutExpired:
            process.kill()
            raise
        return subprocess.CompletedProcess([str(program)], process.wait(), output, errors)


BLOCKS = all_blocks()
PROGRAMS = [block for block in BLOCKS if not block.fragment]
FRAGMENTS = [block for block in BLOCKS if block.fragment]


@pytest.fixture(scope="module")
def ran(
    request: pytest.FixtureRequest, forker: Forker, redis_installed: str | None
) -> dict[str, subprocess.CompletedProcess[str]]:
    """The programs of the docs this session runs (all, or those `-k` selects), concurrently (each in its own
    process), Redis installed first (a fresh machine has none until a fixture installs it, and docs/scaling.md
    starts one)."""
    selected = {item.callspec.params["block"].where for item in request.session.items if _program_test(item)}
    chosen = [block for block in PROGRAMS if block.where in selected]
    with ThreadPoolExecutor(max_workers=8) as pool:
        runs = pool.map(functools.partial(_run, forker), chosen)
        return dict(zip([b.where for b in chosen], runs, strict=True))


def _program_test(item: pytest.Item) -> bool:
    return getattr(item, "originalname", None) == PROGRAM_TEST and hasattr(item, "callspec")


PROGRAM_TEST = "test_every_program_in_the_docs_runs_offline_and_prints_what_the_page_shows"


@pytest.mark.parametrize("block", PROGRAMS, ids=lambda block: block.where)
def test_every_program_in_the_docs_runs_offline_and_prints_what_the_page_shows(
    block: Block, ran: dict[str, subprocess.CompletedProcess[str]]
) -> None:
    """A Python block not marked `# fragment` runs as pasted; a `text` block after it is exactly its output."""
    done = ran[block.where]
    assert done.returncode == 0, f"{block.where} failed:\n{done.stderr}"
    if block.output is not None:
        assert done.stdout.strip() == block.output.strip(), f"{block.where} printed:\n{done.stdout}"


@pytest.mark.parametrize("block", FRAGMENTS, ids=lambda block: block.where)
def test_every_fragment_in_the_docs_compiles(block: Block) -> None:
    """A block marked `# fragment` is valid Python (top-level `await` allowed)."""
    _compile(block)


def test_the_docs_have_programs_and_fragments_and_every_block_is_one_of_them() -> None:
    """The parser finds the pages' blocks: README has programs, the count adds up, and 45 or more of the blocks
    are programs the suite runs."""
    assert any(block.page.name == "README.md" for block in PROGRAMS)
    assert len(PROGRAMS) + len(FRAGMENTS) == len(BLOCKS) > 50
    assert len(PROGRAMS) >= 45


def test_every_fragment_says_on_its_first_line_what_the_reader_supplies() -> None:
    """`# fragment: agent and City are yours`, not a bare `# fragment`: a reader knows what to bring."""
    bare = [b.where for b in FRAGMENTS if not re.fullmatch(r"# fragment: \S.*", b.code.partition("\n")[0])]
    assert bare == []


def test_the_first_example_of_every_page_is_a_program() -> None:
    """Each page's first block of onion code runs as pasted (another tool's code before it is a fragment)."""
    first: dict[Path, Block] = {}
    for block in BLOCKS:
        if not block.foreign:
            first.setdefault(block.page, block)
    assert [block.where for block in first.values() if block.fragment] == []


def test_a_fake_model_comment_and_an_output_block_are_read_from_the_page(tmp_path: Path) -> None:
    """The parser ties a `fake model:` comment above a block and a `text` block after it to that block."""
    page = tmp_path / "page.md"
    page.write_text(
        'Intro.\n\n<!-- fake model: ["hi"] -->\n```python\nprint("hi")\n```\n\n```text\nhi\n```\n\n'
        "```python\n# fragment\nagent.use(log)\n```\n"
    )
    program, fragment = blocks_of(page)
    assert (program.script, program.output, program.fragment, program.line) == ('["hi"]', "hi\n", False, 4)
    assert (fragment.script, fragment.output, fragment.fragment) == (None, None, True)
