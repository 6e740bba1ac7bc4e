"""Worker processes for the multi-process tests, forked from one process that imported onion and the SDKs once.

A new interpreter spends most of its start importing the SDKs (over a
second of CPU on this machine) and as long again tearing them down. A
`Forker` starts one server process that imports them once; each
`forker.popen(script, *args)` is a fresh child forked from it that runs
`script` as `python script args...` would: its own `__main__`, argv,
environment (PYTHONPATH on `sys.path`), directory and `sys.path[0]`, stdin, stdout and stderr on
pipes to the test, threads joined and atexit functions run at the end,
the same exit code. The child is `Forked`, used as a `subprocess.Popen`.

The server is single-threaded, so a fork never copies a lock held by
another thread; it exits when the test process's end of its stdin closes.
It needs Linux (pidfd_open, SCM_RIGHTS on a SOCK_SEQPACKET socket);
elsewhere, or with ONION_TEST_NO_FORK=1, each process is a new interpreter.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import importlib
import io
import json
import os
import runpy
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import traceback
import types
from pathlib import Path
from typing import Any, NoReturn

ROOT = Path(__file__).resolve().parents[1]
FORKING = sys.platform == "linux" and hasattr(os, "pidfd_open") and not os.environ.get("ONION_TEST_NO_FORK")
"""Else (another system, or ONION_TEST_NO_FORK=1) `Forker.popen` starts a new interpreter with subprocess.Popen."""


class Forked:
    """A child of the fork server, used as a `subprocess.Popen` in text mode with all three pipes."""

    def __init__(self, link: socket.socket, stdin: int | None, stdout: int | None, stderr: int | None) -> None:
        self._link = link
        self.stdin: io.TextIOWrapper | None = None if stdin is None else open(stdin, "w", encoding="utf-8")  # noqa: SIM115
        self.stdout: io.TextIOWrapper | None = None if stdout is None else open(stdout, encoding="utf-8")  # noqa: SIM115
        self.stderr: io.TextIOWrapper | None = None if stderr is None else open(stderr, encoding="utf-8")  # noqa: SIM115
        self.pid: int = json.loads(link.recv(1 << 16))["pid"]
        self.returncode: int | None = None

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            self._link.settimeout(timeout)
            try:
                reply = self._link.recv(1 << 16)
            except TimeoutError:
                raise subprocess.TimeoutExpired(str(self.pid), timeout or 0) from None
            self.returncode = json.loads(reply)["returncode"]
            self._link.close()
        return self.returncode

    def poll(self) -> int | None:
        if self.returncode is None and select.select([self._link], [], [], 0)[0]:
            return self.wait()
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            os.kill(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def communicate(self, input: str | None = None, timeout: float | None = None) -> tuple[str, str]:
        """Send `input`, close stdin, read stdout and stderr to their ends, wait for the exit."""
        if self.stdin is not None:
            if input:
                self.stdin.write(input)
            with contextlib.suppress(BrokenPipeError):
                self.stdin.close()
            self.stdin = None
        read: dict[str, str] = {}

        def drain(name: str, stream: io.TextIOWrapper | None) -> None:
            read[name] = stream.read() if stream is not None else ""

        threads = [threading.Thread(target=drain, args=(name, getattr(self, name))) for name in ("stdout", "stderr")]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout)
            if thread.is_alive():
                raise subprocess.TimeoutExpired(str(self.pid), timeout or 0)
        for name in ("stdout", "stderr"):
            stream = getattr(self, name)
            if stream is not None:
                stream.close()
        self.wait(timeout)
        return read["stdout"], read["stderr"]


class Forker:
    """One fork server: `popen(script, *args, env=...)` forks a child of it that runs `script`."""

    def __init__(self, *preload: str) -> None:
        self._folder = tempfile.TemporaryDirectory()
        self.address = str(Path(self._folder.name) / "forker")
        self._server: subprocess.Popen[bytes] | None = None
        if not FORKING:
            return
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        command = [sys.executable, __file__, self.address, *preload]
        self._server = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
        assert self._server.stdout is not None and self._server.stdout.readline() == b"ready\n"

    def popen(
        self,
        script: str | Path,
        *args: str,
        env: dict[str, str] | None = None,
        cwd: str | Path | None = None,
        inherit: tuple[int, ...] = (),
    ) -> Forked:
        """Run `python script *args` (or `python -m module ...`, `python -c code ...`) as a child of the server,
        in the environment `env` (else this process's); `inherit`: of 0, 1, 2, those given this process's own
        (as `subprocess.Popen` without a pipe), not a pipe."""
        if self._server is None:  # a new interpreter, as subprocess.Popen starts it
            pipe = [None if fd in inherit else subprocess.PIPE for fd in (0, 1, 2)]
            command = [sys.executable, str(script), *args]
            return subprocess.Popen(  # type: ignore[return-value]
                command, stdin=pipe[0], stdout=pipe[1], stderr=pipe[2], text=True, env=env, cwd=cwd
            )
        pipes = [None if fd in inherit else os.pipe() for fd in (0, 1, 2)]  # (read, write) each
        theirs = [fd if pipe is None else pipe[fd > 0] for fd, pipe in enumerate(pipes)]
        request = {"argv": [str(script), *args], "env": dict(os.environ if env is None else env)}
        request["cwd"] = str(cwd if cwd is not None else os.getcwd())
        link = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        link.connect(self.address)
        socket.send_fds(link, [json.dumps(request).encode()], theirs)
        for fd, pipe in enumerate(pipes):
            if pipe is not None:
                os.close(theirs[fd])
        ours = [None if pipe is None else pipe[fd == 0] for fd, pipe in enumerate(pipes)]
        return Forked(link, *ours)

    def run(
        self,
        *argv: str | Path,
        env: dict[str, str] | None = None,
        cwd: str | Path | None = None,
        timeout: float | None = None,
        input: str | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """`subprocess.run([sys.executable, *argv], capture_output=True, text=True, ...)`, forked from the server."""
        process = self.popen(*argv, env=env, cwd=cwd)  # type: ignore[arg-type]
        try:
            output, errors = process.communicate(input, timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            raise
        return subprocess.CompletedProcess([str(a) for a in argv], process.wait(), output, errors)

    def close(self) -> None:
        if self._server is not None:
            assert self._server.stdin is not None
            self._server.stdin.close()
            self._server.wait(timeout=30)
        self._folder.cleanup()


# -- the server --------------------------------------------------------------------------------------------------


def _child(request: dict[str, Any], fds: list[int]) -> NoReturn:
    """Become `python argv...` on the pipes `fds`; exit as its interpreter would."""
    for fd, target in zip(fds, (0, 1, 2), strict=True):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    extra = [folder for folder in request["env"].get("PYTHONPATH", "").split(os.pathsep) if folder]
    sys.path[1:1] = [folder for folder in extra if folder not in sys.path]  # as the interpreter reads PYTHONPATH
    first, *rest = request["argv"]
    try:
        if first == "-m":  # python -m module args: argv[0] becomes the module's file, sys.path[0] the directory
            sys.argv, sys.path[0] = [first, *rest[1:]], os.getcwd()
            runpy.run_module(rest[0], run_name="__main__", alter_sys=True)
        else:
            main = types.ModuleType("__main__")
            sys.modules["__main__"] = main
            if first == "-c":  # python -c code args
                sys.argv, sys.path[0] = ["-c", *rest[1:]], ""
                code = compile(rest[0], "<string>", "exec")
            else:
                script = main.__file__ = os.path.abspath(first)
                sys.argv, sys.path[0] = [script, *rest], os.path.dirname(script)
                with open(script, encoding="utf-8") as file:
                    code = compile(file.read(), script, "exec")
            exec(code, main.__dict__)
    except SystemExit as exit:
        _finish(exit)
    except BaseException:
        traceback.print_exc()
        _finish(SystemExit(1))
    _finish(SystemExit(0))


def _finish(exit: SystemExit) -> NoReturn:
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
        with contextlib.suppress(BrokenPipeError, ValueError):
            stream.flush()
    os._exit(code or 0)


def _serve(address: str, preload: list[str]) -> None:
    for name in preload:
        importlib.import_module(name)
    gc.freeze()  # a child's collections leave the preloaded objects (and their pages) alone
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(address)
    listener.listen(64)
    os.write(1, b"ready\n")
    children: dict[int, tuple[socket.socket, int]] = {}  # pidfd -> (the test's link, pid)
    while True:
        ready, _, _ = select.select([0, listener, *children], [], [])
        for fd in ready:
            if fd == 0:
                if not os.read(0, 1 << 16):  # the test process is gone, or closed us
                    return
            elif fd is listener:
                link, _ = listener.accept()
                message, fds, _, _ = socket.recv_fds(link, 1 << 20, 3)
                pid = os.fork()
                if pid == 0:
                    listener.close()
                    for pidfd, (other, _) in children.items():
                        os.close(pidfd)
                        other.close()
                    link.close()
                    _child(json.loads(message), fds)
                for given in fds:
                    os.close(given)
                link.send(json.dumps({"pid": pid}).encode())
                children[os.pidfd_open(pid)] = (link, pid)
            else:
                link, pid = children.pop(fd)
                os.close(fd)
                _, status = os.waitpid(pid, 0)
                with contextlib.suppress(OSError):  # the test may have left
                    link.send(json.dumps({"returncode": os.waitstatus_to_exitcode(status)}).encode())
                link.close()


if __name__ == "__main__":
    _serve(sys.argv[1], sys.argv[2:])
