"""Where a lone request's time goes (c=1), step by step, in the gateway and in the floor: the real
app (as `bench/served.py` serves it) or the floor (`bench/relay.py`) in this process, the stub and
a one-connection keep-alive load generator in child processes. Marks at fixed points of every
request take this thread's CPU time (`time.thread_time_ns`: a step the kernel paused for other
processes is not counted); each step's figure is the median over the requests of a round.

    PYTHONPATH=$PWD python bench/c1_path.py [--floor] [--requests 3000] [--rounds 3] [--warm 1000]

The three segments the floor has too: `request in -> upstream out` (the client's request
bytes handed to the server protocol until the upstream request's write), `answer in -> client
out` (the upstream answer's bytes until the client answer's write) and the tail (after that write
until the next request's bytes: the bookkeeping). The gateway's steps in between are its own
functions, wrapped at run time (a mark costs ~1 us: figures are inflated alike). Also prints how
many requests found the bookkeeping (`Books.settle`; `_account_pending` in a checkout from before
gateway/books.py) run after their bytes came in and before their handler: at c=1 it then adds to
their latency. `--tail`: the bookkeeping's own steps too.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import importlib.util
import inspect
import os
import statistics
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

from aiohttp import client_proto, http_writer, web_app, web_protocol

from bench import rig, served, workloads
from bench.run import KEY, KEY_ENV, gateway_config

Mark = tuple[str, int]
_marks: list[Mark] = []


def mark(label: str) -> None:
    _marks.append((label, time.thread_time_ns()))


def wrap(owner: Any, name: str, label: str) -> None:
    """Marks `label0` as `owner.name` is entered and `label1` as it returns (or raises)."""
    f = getattr(owner, name)
    if inspect.iscoroutinefunction(f):

        @functools.wraps(f)
        async def g(*args: Any, **kwargs: Any) -> Any:
            mark(label + "0")
            try:
                return await f(*args, **kwargs)
            finally:
                mark(label + "1")

    else:

        @functools.wraps(f)
        def g(*args: Any, **kwargs: Any) -> Any:
            mark(label + "0")
            try:
                return f(*args, **kwargs)
            finally:
                mark(label + "1")

    setattr(owner, name, g)


class _MarkedTransport:
    """The gateway's upstream connection's transport, marking its writes."""

    def __init__(self, transport: Any) -> None:
        self._transport = transport

    def write(self, data: bytes) -> None:
        mark("up")
        self._transport.write(data)
        mark("up_end")

    def writelines(self, data: Any) -> None:  # a large body beside its head
        mark("up")
        self._transport.writelines(data)
        mark("up_end")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


def instrument(floor: bool, tail: bool = False) -> None:
    """The segment marks (both) and the gateway's steps (its own functions); `tail`: the
    bookkeeping's own steps too (in place of the request's)."""
    received = web_protocol.RequestHandler.data_received

    def data_received(self: Any, data: bytes) -> None:
        if data[:4] == b"POST":
            mark("in")
        received(self, data)

    web_protocol.RequestHandler.data_received = data_received  # type: ignore[method-assign]
    writelines, write = http_writer.StreamWriter._writelines, http_writer.StreamWriter._write

    def side(writer: Any) -> str:  # the server's writer answers the client; the client's calls upstream
        return "out" if isinstance(writer._protocol, web_protocol.RequestHandler) else "up"

    def marked_writelines(self: Any, chunks: Any) -> None:
        mark(side(self))
        writelines(self, chunks)
        mark(side(self) + "_end")

    def marked_write(self: Any, chunk: Any) -> None:
        mark(side(self))
        write(self, chunk)
        mark(side(self) + "_end")

    http_writer.StreamWriter._writelines = marked_writelines  # type: ignore[method-assign]
    http_writer.StreamWriter._write = marked_write  # type: ignore[method-assign]
    answer = client_proto.ResponseHandler.data_received

    def answer_received(self: Any, data: bytes) -> None:
        mark("ans")
        answer(self, data)

    client_proto.ResponseHandler.data_received = answer_received  # type: ignore[method-assign]
    wrap(web_app.Application, "_handle", "app")
    if floor:
        return
    import gateway.exchange as exchange
    import gateway.routing.attempt as attempt
    import gateway.routing.engine as engine
    import gateway.security as security
    from gateway import upstream_connection
    from gateway.ingress.chat.codec import ChatCodec
    from gateway.providers.openai_compat.adapter import ChatAdapter

    connection = upstream_connection.Connection
    upstream_answer, made = connection.data_received, connection.connection_made

    def upstream_received(self: Any, data: bytes) -> None:
        mark("ans")
        upstream_answer(self, data)

    connection.data_received = upstream_received  # type: ignore[method-assign]
    connection.connection_made = lambda self, transport: made(self, _MarkedTransport(transport))  # type: ignore[method-assign]
    for owner, name, label in (
        (security.RequestGuard, "admit", "admit"),
        (security.RequestGuard, "read_body", "read_body"),
        (exchange, "run_exchange", "exchange"),
        (exchange, "values_within_budget", "budget"),
        (exchange, "_parse", "parse"),
        (ChatCodec, "decode", "decode"),
        (exchange, "_session", "session"),
        (exchange, "_restore", "restore"),
        (engine.Engine, "open", "open"),
        (engine, "prepare", "repair"),
        (engine.Engine, "encode", "encode"),
        (attempt, "_whole", "whole"),
        (ChatAdapter, "decode_response", "decode_answer"),
        (exchange, "answer_whole", "answer"),
    ):
        wrap(owner, name, label)
    try:  # the bookkeeping, held and done for several requests together (gateway/books.py)
        from gateway.books import Books

        wrap(Books, "settle", "account")
    except ImportError:  # a checkout from before: one callback a loop pass
        wrap(exchange, "_account_pending", "account")
    if tail:
        instrument_tail()


def instrument_tail() -> None:
    """The bookkeeping's steps (`books.account` and what it calls): what is left between
    them is the batch's own work and what freeing the request's objects costs."""
    import gateway.books as books
    import gateway.exchange as exchange
    import gateway.state as state
    from gateway.access_log import _LineHandler
    from gateway.cost import PriceBook
    from gateway.ingress.memo import DecodeMemo
    from gateway.inspector import Inspector
    from gateway.inspector.capture import Ring
    from gateway.metrics import Metrics

    # since round eleven the books take `observe`'s steps one by one, over the whole batch
    stepwise = hasattr(books, "account_all")
    for owner, name, label in (
        (exchange.Exchange, "record", "record"),
        *(() if stepwise else ((state.GatewayState, "observe", "observe"),)),
        (PriceBook, "cost", "cost"),
        (Metrics, "record", "metrics"),
        (books if stepwise else state, "log_access", "access_line"),
        (Inspector, "capture", "capture"),
        (Ring, "add", "ring"),
        (DecodeMemo, "settle", "settle"),
        (books, "release_retired", "release"),
        (_LineHandler, "flush_held", "flush"),
    ):
        wrap(owner, name, label)


def steps(marks: list[Mark]) -> tuple[dict[str, list[int]], list[str], int, int]:
    """Per step (`a->b`, numbered when it repeats in a request) the CPU nanoseconds of each
    request; the steps of the last whole request in order; requests; those whose bytes came in
    before the previous request's bookkeeping ran."""
    requests: list[list[Mark]] = []
    for label, cpu in marks:
        if label == "in":
            requests.append([])
        if requests:
            requests[-1].append((label, cpu))
    found: dict[str, list[int]] = defaultdict(list)
    order: list[str] = []
    late = 0
    for request in requests[len(requests) // 10 : -1]:  # the first ones may hold the warm-up's
        seen: Counter[str] = Counter()
        order = []
        labels = [label for label, _ in request]
        if "account0" in labels and "out" in labels and labels.index("account0") < labels.index("out"):
            late += 1
        for (a, before), (b, after) in zip(request, request[1:], strict=False):
            key = f"{a}->{b}"
            seen[key] += 1
            key += "" if seen[key] == 1 else f"#{seen[key]}"
            found[key].append(after - before)
            order.append(key)
    return found, order, len(requests[len(requests) // 10 : -1]), late


def segments(marks: list[Mark]) -> dict[str, list[int]]:
    found: dict[str, list[int]] = defaultdict(list)
    last: dict[str, int] = {}
    for label, cpu in marks:
        if label == "in" and "out_end" in last:
            found["tail (next request in)"].append(cpu - last.pop("out_end"))
        elif label == "up" and "in" in last:
            found["request in -> upstream out"].append(cpu - last.pop("in"))
        elif label == "out" and "ans" in last:
            found["answer in -> client out"].append(cpu - last.pop("ans"))
        if label != "ans" or "ans" not in last:  # from the answer's first bytes (aiohttp's
            last[label] = cpu  # client may hand them over in more than one call)
    return found


@contextlib.asynccontextmanager
async def served_here(
    floor: bool, pin: bool, models: list[str], tmp: Path
) -> AsyncIterator[tuple[int, dict[str, str], rig.Pinning]]:
    """The stub in a child process and the floor (`floor`) or the gateway (serving `models`) in
    this one, pinned as bench/run.py pins (this process on a CPU of its own, the stub and the load
    on the other): unpinned, the load generator often runs on this CPU, woken by the answer's
    write, and its next request is in before the answered one's bookkeeping ran. Yields the
    port served, the environment and the pinning; stops both on the way out."""
    stub_port, port = served.free_port(), served.free_port()
    env = {**os.environ, KEY_ENV: "sk-bench-0123456789abcdefghijklmnop"}
    plan = rig.Pinning.plan(pin)
    stub_args = rig.python("bench/stub.py", "--port", str(stub_port))
    stub = rig.Child("stub", stub_args, env, plan.rig, tmp / "stub.log")
    stub.wait_ready("stub listening")
    runner: Any = None
    try:
        if floor:
            spec = importlib.util.spec_from_file_location("relay", rig.ROOT / "bench" / "relay.py")
            assert spec is not None and spec.loader is not None
            relay = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(relay)
            serving = asyncio.ensure_future(relay._serve(port, f"http://127.0.0.1:{stub_port}", env[KEY_ENV]))
            await asyncio.sleep(1.0)
        else:
            from gateway.access_log import configure_logging
            from gateway.app import create_app
            from gateway.config import load_config
            from gateway.redaction import secrets_redactor
            from gateway.serve import start, tune_garbage_collector

            path = tmp / "gateway.toml"
            path.write_text(gateway_config(port, stub_port, models, "memory", tmp, None, ""))
            config = load_config(path, env=env)
            log_file = (tmp / "gateway.log").open("w")
            configure_logging(config.server.log_level, secrets_redactor(config, env), log_file)
            runner = await start(create_app(config, env), config)
            tune_garbage_collector()
        if plan.gateway is not None:
            os.sched_setaffinity(0, plan.gateway)
        print(f"this process {rig.describe_cpus(plan.gateway)}, stub and load {rig.describe_cpus(plan.rig)}")
        yield port, env, plan
    finally:
        if runner is not None:
            await runner.cleanup()
        elif floor:
            serving.cancel()
        stub.stop()


def run_measure(
    measure: Callable[[argparse.Namespace, Path], Awaitable[None]], args: argparse.Namespace
) -> None:
    """`measure(args, tmp)` on uvloop where it is installed (as the gateway serves), `tmp` a
    temporary directory for the logs and the config."""
    try:
        import uvloop
    except ImportError:
        uvloop = None
    with tempfile.TemporaryDirectory() as tmp:
        (uvloop.run if uvloop is not None else asyncio.run)(measure(args, Path(tmp)))


async def measure(args: argparse.Namespace, tmp: Path) -> None:
    async with served_here(args.floor, not args.no_pin, ["stub"], tmp) as (port, _, plan):
        await _measure(args, port, plan)


async def _measure(args: argparse.Namespace, port: int, plan: rig.Pinning) -> None:
    body = workloads.small_body("stub", False).decode()
    load = await asyncio.create_subprocess_exec(
        sys.executable,
        *("-c", served.LOAD, str(port), "1", body, KEY),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        preexec_fn=None if plan.rig is None else lambda: os.sched_setaffinity(0, plan.rig),
    )
    assert load.stdin is not None and load.stdout is not None

    async def batch(count: int) -> None:
        load.stdin.write(b"%d\n" % count)
        line = await load.stdout.readline()
        if line != b"done 0\n":
            raise SystemExit(f"load generator: {line!r}")

    try:
        await batch(args.warm)  # warm: connections, caches
        for round_ in range(args.rounds):
            _marks.clear()
            started = time.process_time()
            await batch(args.requests)
            cpu = (time.process_time() - started) / args.requests * 1e6
            each = segments(_marks)
            figures = "  ".join(f"{name} {statistics.median(v) / 1e3:.1f}" for name, v in each.items())
            print(f"round {round_ + 1}: CPU {cpu:.0f} us/request (this process); us: {figures}")
        found, order, count, late = steps(_marks)
        print(f"steps of the last round, median CPU us ({count} requests):")
        for key in order:
            print(f"  {key:34} {statistics.median(found[key]) / 1e3:7.1f}")
        if not args.floor:
            print(f"the previous request's bookkeeping ran inside the next one's: {late} of {count} requests")
    finally:
        load.stdin.close()
        await load.wait()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python bench/c1_path.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--floor", action="store_true", help="the floor (bench/relay.py), not the gateway")
    parser.add_argument("--requests", type=int, default=3000, help="per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-pin", action="store_true", help="leave every process unpinned")
    parser.add_argument("--warm", type=int, default=1000, help="requests before the first round")
    parser.add_argument("--tail", action="store_true", help="the bookkeeping's own steps too")
    args = parser.parse_args()
    instrument(args.floor, args.tail)
    run_measure(measure, args)


if __name__ == "__main__":
    main()
