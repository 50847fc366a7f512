"""A finished request's bookkeeping, in process (no sockets, no rig): CPU time of what the
bookkeeping (`account`, gateway/books.py) does for every request - the metrics update,
the access-log line (through the redacting filter, set up as `gateway serve` does, written to a
file), the inspector's capture - for a small chat request's record. The bench's per-request CPU
holds this among everything else; this is the part a change to the bookkeeping moves, measured
without a shared machine's noise in between.

    python bench/bookkeeping.py [--reps N]

Prints microseconds per request (the best of five rounds) for each part and for the whole.
"""

from __future__ import annotations

import argparse
import gc
import logging
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import orjson
from aiohttp.test_utils import make_mocked_request

from gateway.access_log import ACCESS_LOGGER, configure_logging, log_access
from gateway.books import account
from gateway.config import load_config
from gateway.exchange import Exchange
from gateway.ingress.dialects import DIALECTS
from gateway.inspector import Inspector
from gateway.metrics import Metrics, new_request_id
from gateway.redaction import secrets_redactor
from gateway.state import GatewayState
from gateway.transcript.model import Usage

CONFIG = """
[providers.stub]
kind = "openai_chat"
base_url = "http://127.0.0.1:9/v1"
api_key_env = "STUB_KEY"
[models.stub]
targets = [{ provider = "stub", model = "stub" }]
"""
ENV = {"STUB_KEY": "sk-bench-0123456789abcdefghijklmnop"}
BODY = orjson.dumps({"model": "stub", "messages": [{"role": "user", "content": "What is six times seven?"}]})


def exchange(tmp: Path) -> Exchange:
    """A finished small chat request, as `run_exchange` leaves it (no upstream answer object: the
    parts measured read only what the record and the capture take)."""
    path = tmp / "gateway.toml"
    path.write_text(CONFIG)
    config = load_config(path, env=ENV)
    metrics = Metrics()
    metrics.bind([*config.models, *config.providers], config.providers)
    state = GatewayState(config, metrics, None, None, None, inspector=Inspector())  # type: ignore[arg-type]
    configure_logging("info", secrets_redactor(config, ENV), (tmp / "access.log").open("w"))
    dialect = next(d for d in DIALECTS if d.ingress == "chat_completions")
    http = make_mocked_request("POST", "/v1/chat/completions", headers={"Content-Type": "application/json"})
    done = Exchange(state, dialect, dialect.routes[0].codec, http)
    done.request_id, done.session, done.model, done.status = new_request_id(), "sess_bench", "stub", 200
    done.raw, done.ttft, done.usage = BODY, 0.002, Usage(10, 4, 0, 0, 0)
    return done


def per_call(call: Callable[[], object], reps: int, rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        started = time.process_time()
        for _ in range(reps):
            call()
        best = min(best, (time.process_time() - started) / reps * 1e6)
    return best


@contextmanager
def logging_restored() -> Iterator[None]:
    """configure_logging changes the process's logging: put it back (measured from a test)."""
    root, access = logging.getLogger(), logging.getLogger(ACCESS_LOGGER)
    saved = (list(root.handlers), root.level, list(access.handlers), access.level, access.propagate)
    try:
        yield
    finally:
        root.handlers[:], access.handlers[:] = saved[0], saved[2]
        root.setLevel(saved[1])
        access.setLevel(saved[3])
        access.propagate = saved[4]


def measure(reps: int, rounds: int = 5) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp, logging_restored():
        done = exchange(Path(tmp))
        state, record, headers = done.state, done.record(), done.http.headers
        ended = time.monotonic()
        wall = time.time()
        gc.collect()
        return {
            "metrics": per_call(lambda: state.metrics.record(record), reps, rounds),
            "access line": per_call(lambda: log_access(record), reps, rounds),
            "inspector capture": per_call(lambda: state.inspector.capture(done, headers), reps, rounds),
            "record": per_call(done.record, reps, rounds),
            "account (all)": per_call(lambda: account(done, record, headers, ended, wall), reps, rounds),
        }


def main() -> None:
    parser = argparse.ArgumentParser(prog="python bench/bookkeeping.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=20000, help="requests accounted for per round")
    args = parser.parse_args()
    print("us per request: the parts of a finished request's bookkeeping")
    for part, value in measure(args.reps).items():
        print(f"{part:20} {value:7.2f}")


if __name__ == "__main__":
    main()
