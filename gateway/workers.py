"""`gateway serve --workers N`: N worker processes serving one port, and the supervisor that runs
them.

Each worker is a whole gateway (its own event loop, upstream connection pool, routing state and
circuit breakers) bound to the port with SO_REUSEPORT, so the kernel spreads incoming connections
over them. What must agree across workers is shared:

- continuity: the store (sqlite or redis; config validation refuses the memory store), and the
  key that seals continuity data handed to clients (the configured secret, else one random key
  the supervisor gives every worker);
- metrics: prometheus-client's multi-process mode, so a scrape answered by any worker reports
  every worker's counts (`gateway_inflight_requests` is summed over the live workers,
  `gateway_target_available` is 1 while any live worker sends the target traffic);
- the inspector's captures stay in the worker that served each request; every worker answers its
  siblings on a Unix socket in a private directory (gateway/inspector/peers.py), so an inspector
  call answered by any worker shows every worker's requests.

Circuit breakers, retry budgets and round-robin positions stay per worker, by choice: sharing
them would put a cross-process lock or a store round trip on every request, and each worker
learns a failing target from its own share of the traffic (with N workers a dead target sees up
to N times `consecutive_failures` failed requests before every worker has opened its circuit).

The supervisor prints `gateway listening on http://H:P` once every worker accepts connections.
On SIGTERM or SIGINT it passes SIGTERM to every worker, each drains its in-flight requests as a
single-process gateway does, and the supervisor exits 0 once all have.

A worker that dies on its own (a crash, the OOM killer, `kill -9`) after it served is started again,
after a back-off that doubles while restarts keep failing (0.5 s up to 30 s; a worker that stayed up
a minute starts the count over), and counted in `gateway_worker_restarts_total`; the other workers
serve meanwhile. Only the dead worker's own connections are cut (its streams end without their
terminal event: a killed process writes nothing more). A worker that dies before the gateway was
first ready means it cannot start at all (a config or port problem): the gateway stops (exit 1)."""

from __future__ import annotations

import asyncio
import os
import pickle
import secrets
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

from prometheus_client import Counter
from prometheus_client.multiprocess import mark_process_dead

from gateway.config import ConfigError, GatewayConfig, resolve_continuity_secret
from gateway.eventloop import run
from gateway.metrics import Metrics, enable_multiprocess

# How often a worker checks that its supervisor is still there (a supervisor killed with
# SIGKILL cannot pass the signal on; its workers then stop themselves).
PARENT_CHECK_SECONDS = 1.0
# A worker is started as a fresh interpreter (no event loop, lock or socket inherited) that
# reads its config and Worker from stdin.
_WORKER_COMMAND = "from gateway.workers import worker_main; worker_main()"
# restart back-off: the first wait, its ceiling, and how long a worker must have lived for its
# next death to start the doubling over
RESTART_FIRST_SECONDS = 0.5
RESTART_MAX_SECONDS = 30.0
RESTART_RESET_SECONDS = 60.0


@dataclass
class Worker:
    """What a worker process gets from the supervisor (pickled to its stdin)."""

    index: int
    metrics_dir: str
    continuity_key: bytes
    # the write end of a pipe to the supervisor: one byte once the worker accepts connections;
    # the supervisor reads its end closing as the worker's exit
    ready_fd: int
    supervisor_pid: int
    # the directory of the workers' inspector sockets (gateway/inspector/peers.py) and how many
    # workers there are; "" when the inspector is off
    inspector_dir: str = ""
    count: int = 1
    _watcher: asyncio.Task[None] | None = field(default=None, init=False, repr=False)

    def metrics(self) -> Metrics:
        return Metrics(multiprocess_dir=self.metrics_dir)

    def ready(self) -> None:
        """Called once the worker accepts connections (from its running event loop)."""
        os.write(self.ready_fd, b"r")
        self._watcher = asyncio.get_running_loop().create_task(self._watch_supervisor())

    async def _watch_supervisor(self) -> None:
        # polling: nothing signals a parent's death portably (prctl PDEATHSIG is Linux only)
        while os.getppid() == self.supervisor_pid:  # noqa: ASYNC110
            await asyncio.sleep(PARENT_CHECK_SECONDS)
        signal.raise_signal(signal.SIGTERM)  # the worker's own drain, as if the supervisor had sent it


def worker_main() -> None:
    """The worker process: its config and Worker come pickled on stdin."""
    config, worker = pickle.load(sys.stdin.buffer)
    assert isinstance(config, GatewayConfig) and isinstance(worker, Worker)
    enable_multiprocess(worker.metrics_dir)  # before any metric exists in this process
    from gateway.serve import serve  # late: serve imports this module

    try:
        run(serve(config, worker=worker), config.server.event_loop)
    except (ConfigError, OSError) as exc:
        print(f"gateway worker {worker.index}: {exc}", file=sys.stderr, flush=True)
        sys.exit(1)
    except KeyboardInterrupt:  # Ctrl-C before the worker's own signal handlers were installed
        pass


def check_port_free(host: str, port: int) -> None:
    """Raise OSError when something already listens on host:port. Workers bind with
    SO_REUSEPORT, which would silently share the port with another process doing the same
    (an older gateway still running); a plain bind fails against any listener."""
    for family, kind, proto, _, address in socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    ):
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the workers' own bind
            probe.bind(address)


class Supervisor:
    def __init__(
        self, config: GatewayConfig, count: int, metrics_dir: str, key: bytes, inspector_dir: str = ""
    ) -> None:
        self.config = config
        self.count = count
        self.metrics_dir = metrics_dir
        self.inspector_dir = inspector_dir
        self.key = key
        self.processes: list[subprocess.Popen[bytes]] = []
        self.stopping = False
        self.failed = False
        self.restarts = 0
        self._started_at: list[float] = []  # per worker: when its current process started
        self._delays: list[float] = []  # per worker: its next restart's back-off
        self._due: dict[int, float] = {}  # worker index -> monotonic time of its restart
        self._restart_counter: Counter | None = None

    def _stop(self, signum: int | None = None, frame: object = None) -> None:
        if signum is not None and not self.stopping:
            grace = self.config.server.shutdown_grace_seconds
            print(
                f"gateway stopping: draining in-flight requests (up to {grace:g}s)",
                file=sys.stderr,
                flush=True,
            )
        self.stopping = True
        self._due.clear()
        for process in self.processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)

    def run(self) -> int:
        previous = {sig: signal.signal(sig, self._stop) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            with selectors.DefaultSelector() as selector:
                for index in range(self.count):
                    if self.stopping:
                        break
                    self._spawn(selector, index)
                self._watch(selector)
        finally:
            self._stop()
            for process in self.processes:
                process.wait()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        if self.failed or any(process.returncode != 0 for process in self.processes):
            return 1
        return 0

    def _spawn(self, selector: selectors.BaseSelector, index: int) -> None:
        read_end, write_end = os.pipe()
        worker = Worker(
            index, self.metrics_dir, self.key, write_end, os.getpid(), self.inspector_dir, self.count
        )
        try:
            process = subprocess.Popen(
                [sys.executable, "-c", _WORKER_COMMAND], stdin=subprocess.PIPE, pass_fds=(write_end,)
            )
        finally:
            os.close(write_end)
        if index < len(self.processes):
            self.processes[index] = process
            self._started_at[index] = time.monotonic()
        else:
            self.processes.append(process)
            self._started_at.append(time.monotonic())
            self._delays.append(RESTART_FIRST_SECONDS)
        selector.register(read_end, selectors.EVENT_READ, index)
        assert process.stdin is not None
        with process.stdin:
            pickle.dump((self.config, worker), process.stdin)

    def _watch(self, selector: selectors.BaseSelector) -> None:
        """Until every worker has exited: announce once all are ready; restart a worker that
        died after the gateway was ready, stop all when one dies before."""
        ready: set[int] = set()
        announced = False
        while selector.get_map() or self._due:
            timeout = None
            if self._due:
                timeout = max(0.0, min(self._due.values()) - time.monotonic())
            for key, _ in selector.select(timeout):
                index = key.data
                if os.read(key.fd, 16):
                    ready.add(index)
                    if len(ready) == self.count and not announced and not self.stopping:
                        announced = True
                        host, port = self.config.server.host, self.config.server.port
                        print(f"gateway listening on http://{host}:{port}", flush=True)
                    continue
                selector.unregister(key.fd)  # the worker exited
                os.close(key.fd)
                ready.discard(index)
                if not self.stopping:
                    self._died(index, restart=announced)
            now = time.monotonic()
            for index, due in list(self._due.items()):
                if due <= now and not self.stopping:
                    del self._due[index]
                    self._spawn(selector, index)

    def _died(self, index: int, restart: bool) -> None:
        process = self.processes[index]
        code = process.wait()
        mark_process_dead(process.pid, self.metrics_dir)  # its live gauges no longer count
        if not restart:
            print(
                f"gateway: worker {index} (pid {process.pid}) exited with code {code} before the"
                " gateway was ready; stopping the other workers",
                file=sys.stderr,
                flush=True,
            )
            self.failed = True
            self._stop()
            return
        if time.monotonic() - self._started_at[index] >= RESTART_RESET_SECONDS:
            self._delays[index] = RESTART_FIRST_SECONDS
        delay = self._delays[index]
        self._delays[index] = min(RESTART_MAX_SECONDS, delay * 2)
        self._due[index] = time.monotonic() + delay
        self.restarts += 1
        self._count_restart()
        print(
            f"gateway: worker {index} (pid {process.pid}) exited with code {code}; restarting it in"
            f" {delay:g}s (the other workers go on serving)",
            file=sys.stderr,
            flush=True,
        )

    def _count_restart(self) -> None:
        if self._restart_counter is None:
            # the supervisor's own count in the workers' metrics directory: every scrape sums it
            self._restart_counter = Metrics(multiprocess_dir=self.metrics_dir).worker_restarts
        self._restart_counter.inc()


def serve_workers(config: GatewayConfig, count: int) -> int:
    """Run `count` workers until SIGINT/SIGTERM; the process exit code."""
    check_port_free(config.server.host, config.server.port)
    key = resolve_continuity_secret(config) or secrets.token_bytes(32)
    with tempfile.TemporaryDirectory(prefix="gateway-metrics-") as metrics_dir:
        inspector_dir = ""
        if config.inspector.enabled:
            # mkdtemp: mode 0700, so only the gateway's user reaches the sockets (they trust the
            # tenant a caller names)
            inspector_dir = tempfile.mkdtemp(prefix="inspector-", dir=metrics_dir)
        enable_multiprocess(metrics_dir)  # the supervisor counts worker restarts there
        return Supervisor(config, count, metrics_dir, key, inspector_dir).run()
