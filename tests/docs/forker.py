"""Runs the docs' programs for `test_blocks.py`, each in a fresh process forked from this one.

This process imports what the programs import (onion, the SDKs: most of a
program's start) once, then forks a child per request, which runs the
program as `python program.py` would: its own `__main__`, directory,
environment, `sys.argv` and `sys.path[0]`, stdin closed, stdout and stderr
written to files, the same exit code. A program still running after 60 s
is ended by SIGALRM.

Requests are JSON lines on stdin (`id`, `program`, `cwd`, `env`, `stdout`,
`stderr`); each child's end is a JSON line `{"id": ..., "returncode": ...}`
on stdout. Single-threaded, so a fork never copies a lock held elsewhere.
"""

from __future__ import annotations

import atexit
import gc
import importlib
import json
import os
import select
import signal
import sys
import threading
import traceback
import types
from typing import Any, NoReturn

PRELOAD = (  # the SDKs are imported when a model is made, not with onion.providers
    "anthropic",
    "openai",
    "pydantic",
    "onion",
    "onion.hooks",
    "onion.providers.anthropic",
    "onion.providers.openai",
    "onion.providers.openai_responses",
    "onion.stores",
    "onion.testing",
    "onion.tracing",
    "middleware",
)


def child(request: dict[str, Any]) -> NoReturn:
    """Become the program of `request`; exit as its interpreter would."""
    signal.alarm(60)
    stdin = os.open(os.devnull, os.O_RDONLY)
    out = os.open(request["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    err = os.open(request["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    for fd, target in ((stdin, 0), (out, 1), (err, 2)):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    program = request["program"]
    sys.argv, sys.path[0] = [program], os.path.dirname(program)
    main = types.ModuleType("__main__")
    main.__file__ = program
    sys.modules["__main__"] = main
    with open(program, encoding="utf-8") as file:
        code = compile(file.read(), program, "exec")
    try:
        exec(code, main.__dict__)
    except SystemExit as exit:
        finish(exit)
    except BaseException:
        traceback.print_exc()
        finish(SystemExit(1))
    finish(SystemExit(0))


def finish(exit: SystemExit) -> NoReturn:
    """End as the interpreter would (threads joined, atexit functions run, output flushed, the same code), without
    tearing down the preloaded modules: that would copy most of their pages into the child."""
    for thread in threading.enumerate():
        if thread is not threading.main_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    code = exit.code
    if code is not None and not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(code or 0)


def serve() -> None:
    for name in PRELOAD:
        importlib.import_module(name)
    gc.freeze()  # a child's collections leave the preloaded objects (and their pages) alone
    waiting: dict[int, tuple[Any, int]] = {}  # pidfd -> (request id, pid)
    pending = b""
    open_input = True
    while open_input or waiting:
        ready, _, _ = select.select([0, *waiting] if open_input else [*waiting], [], [])
        for fd in ready:
            if fd == 0:
                chunk = os.read(0, 1 << 16)
                open_input = bool(chunk)
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    request = json.loads(line)
                    pid = os.fork()
                    if pid == 0:
                        for other in waiting:
                            os.close(other)
                        child(request)
                    waiting[os.pidfd_open(pid)] = (request["id"], pid)
            else:
                key, pid = waiting.pop(fd)
                os.close(fd)
                _, status = os.waitpid(pid, 0)
                os.write(1, json.dumps({"id": key, "returncode": os.waitstatus_to_exitcode(status)}).encode() + b"\n")


if __name__ == "__main__":
    serve()
