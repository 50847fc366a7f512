"""A request's bookkeeping after its answer, in process: the steps `books.account` runs for a
finished request (its record, pricing, metrics, the access-log line) and the session key derived
on its way in, each timed alone over many calls on requests the real app served (the bench's
small Chat request through the stub upstream, whole and streamed; logging as `gateway serve`
sets it up, the lines to a file). The inspector's capture is not part of it (its cost is what
its ring keeps alive, see bench/served.py).

    python bench/books.py [--calls 20000] [--rounds 5]

Run it with another checkout's gateway to compare (the script's own imports are the same):
    PYTHONPATH=/work/wt/s6 python /path/to/bench/books.py
Prints CPU microseconds per call (`time.process_time`), the median of the rounds.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import aiohttp

from bench import rig, workloads
from bench.run import KEY, KEY_ENV, gateway_config
from bench.served import free_port


async def served_samples(tmp: Path) -> tuple[Any, list[tuple[Any, Any]]]:
    """The app's state and (exchange, record) of a whole and a streamed request it served."""
    import gateway.exchange as exchange_module
    from gateway.access_log import configure_logging
    from gateway.app import create_app
    from gateway.config import load_config
    from gateway.redaction import secrets_redactor
    from gateway.serve import start
    from gateway.state import GatewayState

    stub_port, port = free_port(), free_port()
    env = {**os.environ, KEY_ENV: "sk-bench-0123456789abcdefghijklmnop"}
    command = rig.python("bench/stub.py", "--port", str(stub_port))
    stub = rig.Child("stub", command, env, None, tmp / "stub.log")
    stub.wait_ready("stub listening")
    path = tmp / "gateway.toml"
    path.write_text(gateway_config(port, stub_port, ["stub"], "memory", tmp, None, "", None))
    config = load_config(path, env=env)
    configure_logging(config.server.log_level, secrets_redactor(config, env), (tmp / "gateway.log").open("w"))
    app = create_app(config, env)
    runner = await start(app, config)
    samples: list[tuple[Any, Any]] = []
    try:  # the bookkeeping's home since gateway/books.py; before, the exchange's `_account`
        import gateway.books as module

        name = "account_all" if hasattr(module, "account_all") else "account"
    except ImportError:
        module, name = exchange_module, "_account"
    account = getattr(module, name)

    def capture(exchange: Any, record: Any, *rest: Any) -> None:
        samples.append((exchange, record))
        account(exchange, record, *rest)

    def capture_all(batch: Any, wall: float) -> None:  # a batch of (exchange, ended, headers)
        samples.extend((exchange, exchange.record(ended)) for exchange, ended, _ in batch)
        account(batch, wall)

    setattr(module, name, capture_all if name == "account_all" else capture)
    try:
        headers = {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"}
        async with aiohttp.ClientSession() as client:
            for stream in (False, True, False, True):
                body = workloads.small_body("stub", stream=stream)
                url = f"http://127.0.0.1:{port}/v1/chat/completions"
                async with client.post(url, data=body, headers=headers) as response:
                    await response.read()
                    assert response.status == 200, response.status
        books = getattr(app[GatewayState.KEY], "books", None)
        if books is not None:  # held for others (gateway/books.py)
            books.settle()
        await asyncio.sleep(0.05)  # the accounting callback
    finally:
        setattr(module, name, account)
        await runner.cleanup()
        stub.stop()
    return app[GatewayState.KEY], samples[-2:]


def in_flight(metrics: Any) -> Callable[[], object]:
    """The in-flight gauge's +1 and -1 as `run_exchange` makes them (or, in a checkout from before
    `Metrics.requests_in_flight`, as it made them there)."""
    value = getattr(metrics, "requests_in_flight", None)
    if value is None:
        return lambda: (metrics.inflight.inc(), metrics.inflight.dec())
    return lambda: (value.inc(1), value.inc(-1))


def per_call(step: Callable[[], object], calls: int) -> float:
    from gateway.access_log import lines_held

    started = time.process_time()
    for done in range(0, calls, 32):
        with lines_held():  # as the accounting callback writes them: lines of 32 requests flushed once
            for _ in range(min(32, calls - done)):
                step()
    return (time.process_time() - started) / calls * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(prog="python bench/books.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--profile", action="store_true", help="the whole bookkeeping under cProfile instead")
    args = parser.parse_args()
    from gateway.access_log import log_access
    from gateway.session import derive_session_key

    with tempfile.TemporaryDirectory() as tmp:
        state, samples = asyncio.run(served_samples(Path(tmp)))
        prices, metrics = state.prices, state.metrics
        for (exchange, record), kind in zip(samples, ("whole", "stream"), strict=True):

            def books(exchange: Any = exchange) -> None:
                state.observe(exchange.record())

            def priced(record: Any = record) -> object:
                return prices.cost(record.provider, record.upstream_model, record.usage)

            def session_key(exchange: Any = exchange) -> str:
                return derive_session_key(exchange.received, exchange.tenant)

            steps: dict[str, Callable[[], object]] = {
                "record": exchange.record,
                "pricing": priced,
                "metrics": partial(metrics.record, record),
                "inflight": in_flight(metrics),
                "access-log": partial(log_access, record),
                "session-key": session_key,
                "all": books,
            }
            if args.profile:
                import cProfile
                import pstats

                profile = cProfile.Profile()
                profile.runcall(per_call, books, args.calls)
                pstats.Stats(profile).sort_stats("tottime").print_stats(30)
                continue
            figures: dict[str, list[float]] = {name: [] for name in steps}
            for _ in range(args.rounds):
                for name, step in steps.items():
                    figures[name].append(per_call(step, args.calls))
            line = "  ".join(f"{name} {statistics.median(values):5.2f}" for name, values in figures.items())
            print(f"{kind:6}: us/call (median of {args.rounds}): {line}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
