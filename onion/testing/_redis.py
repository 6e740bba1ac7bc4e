"""`RedisServer`: a throwaway `redis-server` on 127.0.0.1, for tests and benchmarks of `RedisStore`."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time


class RedisServer:
    """A `redis-server` process on 127.0.0.1 at a free port, keeping nothing on disk.

    `with RedisServer() as redis:` starts it and stops it afterwards;
    `redis.url` is what `RedisStore` takes. `stop()` then `start()` restarts
    it on the same port (empty: nothing is saved), to test what a store does
    while Redis is down and once it is back. `binary` is the `redis-server`
    to run (default: the one on PATH).
    """

    def __init__(self, binary: str | None = None) -> None:
        found = binary or shutil.which("redis-server")
        if found is None:
            raise FileNotFoundError(
                "RedisServer: no redis-server on PATH; install Redis (apt-get install redis-server) or pass binary="
            )
        self.binary = found
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port: int = probe.getsockname()[1]
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self._process: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 5.0) -> RedisServer:
        """Start the server and wait until it accepts connections (`RuntimeError` if it does not)."""
        if self._process is not None:
            return self
        command = [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and process.poll() is None:
            with socket.socket() as client:
                if client.connect_ex(("127.0.0.1", self.port)) == 0:
                    self._process = process
                    return self
            time.sleep(0.01)
        process.kill()
        process.wait()
        raise RuntimeError(f"RedisServer: {self.binary} did not start on 127.0.0.1:{self.port} within {timeout:g} s")

    def stop(self) -> None:
        """Stop the server (what it held is gone); nothing happens when it is not running."""
        process, self._process = self._process, None
        if process is not None:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
