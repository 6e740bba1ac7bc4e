"""Fixtures shared by every test that talks HTTP to the fake provider server."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from onion.testing import FakeProviderServer, RedisServer

sys.path.insert(0, str(Path(__file__).parent))  # forker.py imports by name

from forker import Forker

# Property tests explore the same examples on every run (CI never fails on a new random draw);
# `HYPOTHESIS_PROFILE=explore` searches afresh.
settings.register_profile("ci", derandomize=True, deadline=None)
settings.register_profile("explore", deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "slow: multi-process or real-time tests (`make test` runs them; `pytest -m 'not slow'` skips them)"
    )


def server_threads() -> list[threading.Thread]:
    """Threads started by a FakeProviderServer (its loop and its per-connection handlers)."""
    return [t for t in threading.enumerate() if t.name == "FakeProviderServer" or "process_request_thread" in t.name]


@pytest.fixture
def live_server_threads() -> Callable[[], list[threading.Thread]]:
    """`server_threads`, for tests that check for leaks themselves."""
    return server_threads


@pytest.fixture
def server() -> Iterator[FakeProviderServer]:
    """A running fake provider; after the test, no thread of it may be left."""
    with FakeProviderServer() as fake:
        yield fake
    assert server_threads() == []


@pytest.fixture(scope="module")
def one_ssl_context() -> Iterator[None]:
    """Build the TLS context once per module (undone after it).

    Each SDK client otherwise spends ~45 ms loading CA certificates that it
    never uses against the plain-HTTP fake server; nothing else changes.
    """
    import httpcore2

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(httpcore2, "default_ssl_context", functools.cache(httpcore2.default_ssl_context))
        yield


def redis_binary() -> str | None:
    """`redis-server` on PATH, installed with apt-get first when missing (as root); None when impossible."""
    found = shutil.which("redis-server")
    if found is None and shutil.which("apt-get") and os.geteuid() == 0:
        subprocess.run(
            "apt-get update -q && apt-get install -y -q redis-server", shell=True, capture_output=True, timeout=600
        )
        found = shutil.which("redis-server")
    return found


@pytest.fixture(scope="session")
def redis_installed() -> str | None:
    """`redis_binary()` once per session: the docs' programs that start a `RedisServer` need it on PATH."""
    return redis_binary()


@pytest.fixture(scope="session")
def redis_bin() -> str:
    """The `redis-server` binary; the tests needing it are skipped (saying why) when it cannot be installed."""
    binary = redis_binary()
    if binary is None:
        pytest.skip("redis-server is not installed and cannot be (apt-get install -y redis-server needs root)")
    return binary


@pytest.fixture(scope="session")
def redis_url(redis_bin: str) -> Iterator[str]:
    """A real Redis for the whole test session (tests keep apart by namespace); stopped afterwards."""
    server = RedisServer(redis_bin).start()
    yield server.url
    server.stop()


@pytest.fixture(scope="session")
def forker() -> Iterator[Forker]:
    """Worker processes forked from one that imported onion, the SDKs and redis once (see tests/forker.py)."""
    preload = ("anthropic", "openai", "redis", "onion", "onion.providers.anthropic", "onion.providers.openai")
    server = Forker(*preload, "onion.stores", "onion.testing", "middleware", "pytest", "hypothesis", "pytest_asyncio")
    yield server
    server.close()


@pytest.fixture
def redis_server(redis_bin: str) -> Iterator[RedisServer]:
    """A Redis of the test's own, to stop and start again."""
    server = RedisServer(redis_bin).start()
    yield server
    server.stop()
