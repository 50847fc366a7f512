"""The whole small request as served, in process: the real app (`create_app`, the runner and
logging `gateway serve` sets up, uvloop) on a loopback port, the bench's stub upstream and a raw
keep-alive load generator in two child processes, and this process's CPU time
(`time.process_time`: the gateway's only, every thread of it) per request over thousands of
requests at a given concurrency. Unlike the bench's figures this holds no other process's time
and no rig, so a change to the gateway's per-request path shows at its own size; with
`--profile` the same load runs under cProfile (coroutines resumed count as calls, so the
attribution is not cut at an `await` as a sampling profile's stacks are; its own overhead
inflates every figure alike).

    python bench/served.py [--concurrency 32] [--requests 4000] [--rounds 5] [--profile N]
    python bench/served.py --model stub-n1-i0     # streamed answers (one content chunk each)
    python bench/served.py --tail                 # also the bookkeeping callback's CPU alone

Prints the best and the median CPU microseconds per request of the rounds. `--without A B ...`
takes each away in turn at run time (`toggles`: the answers stay 200s, not the same) between
rounds of the whole gateway, and prints what each saved, round by round (`--off graph`: the ring
keeps a 1 KB blob per capture instead of its objects, what packing it for free would leave).
`--inspector off` and `--inspector-bytes N` change the config (the inspector's cost is mostly
what its ring holds alive, so it shows between processes, not by toggling: run them side by side,
see bench/README.md).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import io
import os
import pstats
import resource
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import rig, workloads
from bench.run import KEY, KEY_ENV, gateway_config

# the load generator: N raw keep-alive connections, each sending the next request as soon as the
# previous answer is whole (Content-Length answers only: the gateway's whole answers); it reads
# "COUNT\n" on stdin, sends COUNT requests in all and answers "done ERRORS\n"
LOAD = r"""
import asyncio, sys
try:
    import uvloop
except ImportError:
    uvloop = None

port, conns, body, key = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3].encode(), sys.argv[4]
head = (
    "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nAuthorization: Bearer %s\r\n"
    "Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % (port, key, len(body))
).encode()
request = head + body


async def connection(left, errors):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    while left[0] > 0:
        left[0] -= 1
        writer.write(request)
        status = await reader.readline()
        length, chunked = 0, False
        while True:
            line = await reader.readline()
            if line == b"\r\n":
                break
            if line[:15].lower() == b"content-length:":
                length = int(line[15:])
            elif line.lower() == b"transfer-encoding: chunked\r\n":
                chunked = True
        if chunked:  # a stream (--model stub-nN-iM): up to its last chunk
            await reader.readuntil(b"\r\n0\r\n\r\n")
        else:
            await reader.readexactly(length)
        if not status.startswith(b"HTTP/1.1 200"):
            errors[0] += 1
    writer.close()


async def main():
    loop = asyncio.get_running_loop()
    stdin = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stdin), sys.stdin)
    while line := await stdin.readline():
        left, errors = [int(line)], [0]
        await asyncio.gather(*(connection(left, errors) for _ in range(conns)))
        sys.stdout.write("done %d\n" % errors[0])
        sys.stdout.flush()


(uvloop.run if uvloop else asyncio.run)(main())
"""


class Toggle:
    """Something taken away from the running gateway and put back (module globals, looked up
    per request), to measure what it costs: the answers stay 200s, not the same."""

    def __init__(self, target: object, name: str, replacement: object) -> None:
        self.target, self.name, self.replacement = target, name, replacement
        self.saved = getattr(target, name)

    def off(self) -> None:
        setattr(self.target, self.name, self.replacement)

    def on(self) -> None:
        setattr(self.target, self.name, self.saved)


async def _restored_nothing(state, request, session, tenant):  # type: ignore[no-untyped-def]
    return request, ()


class _Packed:
    """What the ring would keep of a capture packed into one blob at no cost (`--off graph`):
    its id, its size and `PACKED` bytes (over 512: glibc malloc, outside the pymalloc pools)."""

    __slots__ = ("id", "size", "blob")

    def __init__(self, capture: Any) -> None:
        self.id, self.size, self.blob = capture.id, capture.size, bytes(PACKED)


PACKED = 1024  # a small request's capture pickled is ~1 KB


def toggles(app: Any, name: str) -> list[Toggle]:
    import gateway.exchange as exchange
    import gateway.state
    from gateway.inspector.capture import Ring
    from gateway.state import GatewayState

    state = app[GatewayState.KEY]
    made = {
        "account": lambda: [Toggle(exchange, "_account", lambda *args: None)],
        "session": lambda: [Toggle(exchange, "derive_session_key", lambda request, tenant: "sess_0")],
        "restore": lambda: [Toggle(exchange, "restore_recorded", _restored_nothing)],
        # each route's handler unwrapped from the edge (gateway/app.py `edge`)
        "edge": lambda: [Toggle(r, "_handler", r.handler.__wrapped__) for r in app.router.routes()],
        "inspector": lambda: [Toggle(state.inspector, "enabled", False)],
        "ring": lambda: [Toggle(Ring, "add", lambda self, capture: False)],
        "graph": lambda: [Toggle(Ring, "add", lambda ring, kept, add=Ring.add: add(ring, _Packed(kept)))],
        "metrics": lambda: [Toggle(state.metrics, "record", lambda record: None)],
        "access-log": lambda: [Toggle(gateway.state, "log_access", lambda record: None)],
    }
    return made[name]()


WITHOUT = ("account", "session", "restore", "edge", "inspector", "ring", "graph", "metrics", "access-log")


def retained(ring: Any, sample: int = 100) -> str:
    """What the inspector's newest captures hold alive: objects and bytes (`sys.getsizeof`) per
    capture, counting an object shared between captures once."""
    seen: set[int] = set()
    size = 0
    stack = list(ring._entries)[-sample:]
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, type) or type(obj).__name__ == "module":
            continue
        seen.add(id(obj))
        size += sys.getsizeof(obj)
        if type(obj).__module__ != "builtins" or isinstance(obj, (list, tuple, dict, set, frozenset)):
            stack.extend(gc.get_referents(obj))
    each = f"{len(seen) / sample:.0f} objects, {size / sample:.0f} bytes"
    return f"inspector: {len(ring)} captures, each holding {each}"


def capture_timed() -> list[int]:
    """The CPU time (this thread's, ns) and count of the inspector's capture calls, the ring's add
    and its evictions included, accumulated into the list returned (the batch resets it)."""
    from gateway.inspector import Inspector

    timed, clock, spent = Inspector.capture, time.thread_time_ns, [0, 0]

    def capture(self: Inspector, exchange: Any, headers: Any, *when: Any) -> None:
        started = clock()
        timed(self, exchange, headers, *when)
        spent[0] += clock() - started
        spent[1] += 1

    Inspector.capture = capture  # type: ignore[method-assign]  # this process serves only the bench
    return spent


def tail_timed() -> list[int]:
    """The CPU time (this thread's, ns) of the bookkeeping (`Books.settle`, or in a checkout from
    before gateway/books.py the callback `exchange._account_pending`: record, metrics, access log,
    inspector capture) and the requests it accounted for, accumulated into the list returned (the
    batch resets it): the tail every request pays, measured alone, a steadier figure than the
    whole request's CPU on a busy machine."""
    clock, spent = time.thread_time_ns, [0, 0]
    try:
        from gateway.books import Books
    except ImportError:
        import gateway.exchange as exchange

        timed = exchange._account_pending

        def account_pending(pending: Any) -> None:
            count = len(pending)
            started = clock()
            timed(pending)
            spent[0] += clock() - started
            spent[1] += count

        exchange._account_pending = account_pending  # this process serves only the bench
        return spent
    settle = Books.settle

    def settled(books: Any) -> None:
        count = len(books)
        started = clock()
        settle(books)
        spent[0] += clock() - started
        spent[1] += count

    Books.settle = settled  # type: ignore[method-assign]  # this process serves only the bench
    return spent


def small_blocks() -> str:
    """pymalloc's blocks (objects of 512 bytes or less) in use and free, from CPython's own
    statistics: many free blocks scattered among used pools would be fragmentation."""
    if not hasattr(sys, "_debugmallocstats"):
        return "pymalloc: no statistics in this interpreter"
    err = sys.stderr.fileno()
    saved = os.dup(err)
    with tempfile.TemporaryFile() as out:
        os.dup2(out.fileno(), err)  # the statistics are written to the C stderr
        try:
            sys._debugmallocstats()
        finally:
            os.dup2(saved, err)
            os.close(saved)
        out.seek(0)
        text = out.read().decode()
    found = {}
    for line in text.splitlines():
        for name in ("arenas allocated current", "bytes in allocated blocks", "bytes in available blocks"):
            if line.startswith(f"# {name}"):
                found[name] = int(line.rsplit("=", 1)[1].replace(",", ""))
    return "pymalloc: " + ", ".join(f"{name} {value:,}" for name, value in found.items())


class Stalls:
    """How long the loop runs without coming back to a timer due every `tick` seconds (1 ms:
    libuv's timers have no finer grain): each beat records the loop thread's CPU time
    (`time.thread_time`, so other processes on the machine do not count) since the last one. A
    chunk that arrives while the loop is busy waits for that stretch: under many streams the
    chunks of a cycle arrive together and are relayed one after another (a stretch of 128 x a
    chunk's cost every cycle), besides the bursts of request handlers, the collector and
    finished streams' bookkeeping."""

    def __init__(self, tick: float = 0.001) -> None:
        self.tick = tick
        self.spans: list[float] = []
        self.long: list[tuple[float, float]] = []  # (wall seconds since start, CPU span) over 1 ms
        self._last = self._began = 0.0
        self._handle: asyncio.TimerHandle | None = None

    def start(self) -> None:
        self.spans, self.long = [], []
        self._last = time.thread_time()
        self._began = time.perf_counter()
        self._handle = asyncio.get_running_loop().call_later(self.tick, self._beat)

    def _beat(self) -> None:
        now = time.thread_time()
        span = now - self._last
        self.spans.append(span)
        if span > 0.001:
            self.long.append((time.perf_counter() - self._began, span))
        self._last = now
        self._handle = asyncio.get_running_loop().call_later(self.tick, self._beat)

    def stop(self) -> str:
        if self._handle is not None:
            self._handle.cancel()
        spans = sorted(self.spans)
        if not spans:
            return "stalls: none measured"

        def at(q: float) -> float:
            return spans[min(len(spans) - 1, int(q * len(spans)))] * 1e3

        long = [s for s in spans if s > 0.001]
        # when the long ones came: per tenth of the batch's wall time, how many and their CPU
        whole = max((when for when, _ in self.long), default=0.0) or 1.0
        tenths = [[0, 0.0] for _ in range(10)]
        for when, span in self.long:
            cell = tenths[min(9, int(when / whole * 10))]
            cell[0] += 1
            cell[1] += span
        timeline = " ".join(f"{n}:{cpu * 1e3:.0f}" for n, cpu in tenths)
        return (
            f"loop stretches (CPU ms between {self.tick * 1e3:g} ms ticks): {len(spans)} beats,"
            f" p50 {at(0.5):.3f} p99 {at(0.99):.3f} p99.9 {at(0.999):.3f} max {spans[-1] * 1e3:.2f};"
            f" over 1 ms: {len(long)}, {sum(long) * 1e3:.1f} ms in all; by tenth of the batch"
            f" (count:CPU ms) {timeline}"
        )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def measure(args: argparse.Namespace, tmp: Path) -> list[float]:
    from gateway.access_log import configure_logging
    from gateway.app import create_app
    from gateway.config import load_config
    from gateway.redaction import secrets_redactor
    from gateway.serve import start, tune_garbage_collector

    stub_port, port = free_port(), free_port()
    env = {**os.environ, KEY_ENV: "sk-bench-0123456789abcdefghijklmnop"}
    stub = rig.Child(
        "stub", rig.python("bench/stub.py", "--port", str(stub_port)), env, None, tmp / "stub.log"
    )
    stub.wait_ready("stub listening")
    path = tmp / "gateway.toml"
    path.write_text(
        gateway_config(port, stub_port, sorted({"stub", args.model}), "memory", tmp, None, "", args.inspector)
    )
    config = load_config(path, env=env)
    if args.inspector_bytes:
        inspector = config.inspector.model_copy(update={"max_bytes": args.inspector_bytes})
        config = config.model_copy(update={"inspector": inspector})
    configure_logging(config.server.log_level, secrets_redactor(config, env), (tmp / "gateway.log").open("w"))
    app = create_app(config, env)
    runner = await start(app, config)
    for name in args.off:  # for the whole run (to compare processes run side by side)
        for part in toggles(app, name):
            part.off()
    tune_garbage_collector()
    body = workloads.small_body(args.model, args.model != "stub").decode()
    load = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        LOAD,
        str(port),
        str(args.concurrency),
        body,
        KEY,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    assert load.stdin is not None and load.stdout is not None

    collecting: dict[str, Any] = {"start": 0.0, "spent": 0.0, "runs": [0, 0, 0], "longest": [0.0, 0.0, 0.0]}

    def collector(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            collecting["start"] = time.perf_counter()
        else:
            took = time.perf_counter() - collecting["start"]
            collecting["spent"] += took
            generation = info["generation"]
            collecting["runs"][generation] += 1
            collecting["longest"][generation] = max(collecting["longest"][generation], took)

    gc.callbacks.append(collector)
    captured = capture_timed() if args.gc else [0, 0]
    tail = tail_timed() if args.tail else [0, 0]

    stalls = Stalls() if args.stalls else None

    async def batch(count: int) -> float:
        collecting.update(spent=0.0, runs=[0, 0, 0], longest=[0.0, 0.0, 0.0])
        captured[:] = [0, 0]
        tail[:] = [0, 0]
        usage = resource.getrusage(resource.RUSAGE_SELF)
        if stalls is not None:
            stalls.start()
        started = time.process_time()
        load.stdin.write(b"%d\n" % count)
        line = await load.stdout.readline()
        spent = time.process_time() - started
        if stalls is not None:
            print(stalls.stop())
        if args.gc:
            now = resource.getrusage(resource.RUSAGE_SELF)
            user, system = (now.ru_utime - usage.ru_utime, now.ru_stime - usage.ru_stime)
            faults = (now.ru_minflt - usage.ru_minflt) / count
            times = f"user {user / count * 1e6:.0f} system {system / count * 1e6:.0f} us"
            print(f"minor faults {faults:.2f}/request, {times}")
            longest = " / ".join(f"{t * 1e3:.2f}" for t in collecting["longest"])
            print(
                f"gc: {collecting['spent'] / count * 1e6:.1f} us/request, collections {collecting['runs']},"
                f" the longest of each generation {longest} ms (wall-clock: the loop held)"
            )
            capture = captured[0] / count / 1e3
            print(f"inspector capture call (its ring evictions included): {capture:.1f} us/request")
            print(small_blocks())
        if line != b"done 0\n":
            raise SystemExit(f"load generator: {line!r}")
        if args.tail:
            each = tail[0] / max(1, tail[1]) / 1e3
            print(f"bookkeeping callback: {each:.1f} us/request ({tail[1]} requests)")
        return spent / count * 1e6

    try:
        await batch(args.requests // 4)  # warm: connections, caches, the upstream pool
        if args.profile:
            profile = cProfile.Profile()
            profile.enable()
            await batch(args.profile)
            profile.disable()
            if args.dump:
                profile.dump_stats(args.dump)
            out = io.StringIO()
            stats = pstats.Stats(profile, stream=out)
            stats.sort_stats("tottime").print_stats(45)
            stats.sort_stats("cumulative").print_stats(70)
            print(out.getvalue())
            return []
        if args.gc:
            from gateway.state import GatewayState

            print(retained(app[GatewayState.KEY].inspector.ring))
        if not args.without:
            return [await batch(args.requests) for _ in range(args.rounds)]
        # each round: the whole gateway, then without each in turn, so load changes hit all alike
        taken = {name: toggles(app, name) for name in args.without}
        figures: dict[str, list[float]] = {"all": [], **{name: [] for name in taken}}
        for _ in range(args.rounds):
            figures["all"].append(await batch(args.requests))
            for name, parts in taken.items():
                for part in parts:
                    part.off()
                try:
                    figures[name].append(await batch(args.requests))
                finally:
                    for part in parts:
                        part.on()
        base = figures.pop("all")
        for name, values in figures.items():
            saved = [b - v for b, v in zip(base, values, strict=True)]
            each = " ".join(f"{x:.0f}" for x in saved)
            print(f"without {name:10}: saves median {statistics.median(saved):6.1f} us/request ({each})")
        return base
    finally:
        load.stdin.close()
        await load.wait()
        await runner.cleanup()
        stub.stop()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python bench/served.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--requests", type=int, default=4000, help="per round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--inspector", choices=("on", "off"), default=None)
    parser.add_argument(
        "--model",
        default="stub",
        help="the stub's model: stub (a whole answer) or a streamed one, e.g. stub-n1-i0 (1 chunk, no wait)",
    )
    parser.add_argument("--profile", type=int, default=0, help="run N requests under cProfile instead")
    parser.add_argument("--without", nargs="*", default=[], choices=WITHOUT, help="measure what each costs")
    parser.add_argument("--off", nargs="*", default=[], choices=WITHOUT, help="without these throughout")
    parser.add_argument("--inspector-bytes", type=int, default=0, help="the ring's [inspector] max_bytes")
    parser.add_argument("--tail", action="store_true", help="per batch: the bookkeeping callback's CPU")
    parser.add_argument(
        "--gc",
        action="store_true",
        help="per batch: the collector's time, page faults, what the inspector holds",
    )
    parser.add_argument("--dump", default="", help="with --profile: write the pstats file there too")
    parser.add_argument(
        "--stalls", action="store_true", help="per batch: how long the loop ran between 1 ms ticks (CPU)"
    )
    args = parser.parse_args()
    args.inspector = None if args.inspector is None else args.inspector == "on"
    try:
        import uvloop
    except ImportError:
        uvloop = None
    gc.collect()
    with tempfile.TemporaryDirectory() as tmp:
        run = uvloop.run if uvloop is not None else asyncio.run
        figures = run(measure(args, Path(tmp)))
    if figures:
        each = " ".join(f"{f:.0f}" for f in figures)
        best, median = min(figures), statistics.median(figures)
        print(f"c={args.concurrency}: CPU us/request best {best:.1f} median {median:.1f} ({each})")


if __name__ == "__main__":
    main()
