"""The steps of a cold agent turn (a long Chat transcript the gateway has not seen), in process: CPU
time of each step the exchange runs on the sweep's body (bench/workloads.py) before the upstream
call, one fresh conversation per turn, as `bench/turns.py` sends them through the whole gateway:

- `bound`: the body's C-speed value bound, as the exchange makes it (`values_within_budget`: a
  long body in steps);
- `parse`: the memo's admission, the body's parse, its depth checks and part counts
  (`parse_transcript`);
- `decode`: the Chat dialect's decode into the canonical Request, the memo recording the items;
- `keys`: restore's lookup keys (`keyed`: a key per assistant turn, a text turn's a hash of its
  text) and `size`: `check_size` (the blocks counted against the caps), as the exchange runs them
  on the decoded request;
- `repair`: `prepare` for an OpenAI Chat target; `encode`: that provider's request body.

A body the exchange hands to its worker thread (`offloads`: 5,000 messages do) is parsed to
encoded with the cyclic collector paused, as there (gateway/offload.py).

    python bench/cold_turn.py [--messages 1000] [--turns 12] [--tree PATH]

Prints milliseconds per turn for each step (the median over the turns, the first two left out:
they warm the interpreter). `--tree`: another checkout's gateway package (the same rig measures
main and a branch)."""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=1000)
    parser.add_argument("--turns", type=int, default=12)
    parser.add_argument("--tree", type=Path, default=ROOT)
    return parser.parse_args()


ARGS = _args()
sys.path.insert(0, str(ARGS.tree))
sys.path.insert(1, str(ROOT))

from bench import workloads  # noqa: E402
from gateway.config.loading import config_from_dict  # noqa: E402
from gateway.continuity.restore import keyed  # noqa: E402
from gateway.ingress.admission import check_size, values_within_budget  # noqa: E402
from gateway.ingress.budget import offloads  # noqa: E402
from gateway.ingress.chat.codec import CODEC  # noqa: E402
from gateway.ingress.memo import SHORT_BODY, DecodeMemo  # noqa: E402
from gateway.ingress.split import parse_transcript  # noqa: E402
from gateway.providers import get_adapter  # noqa: E402
from gateway.repair import prepare  # noqa: E402
from gateway.serve import tune_garbage_collector  # noqa: E402
from gateway.transcript.seal import Sealer  # noqa: E402
from gateway.transcript.target import Target  # noqa: E402

SEALER = Sealer(b"b" * 32)
TARGET = Target(provider="stub", kind="openai_chat", model="stub", base_url="https://bench.invalid/v1")
ADAPTER = get_adapter(TARGET.kind)
# the dialect's typed reading of its items, where the tree has one (as the exchange passes it)
TYPED = {"typed": CODEC.typed_items} if getattr(CODEC, "typed_items", None) is not None else {}
SERVER = config_from_dict(
    {
        "server": {"host": "127.0.0.1", "port": 8000},
        "providers": {
            "p": {"kind": "openai_chat", "base_url": "https://bench.invalid/v1", "api_key_env": "K"}
        },
        "models": {"m": {"targets": [{"provider": "p", "model": "stub"}]}},
    }
).server


def _complete(step: Coroutine[Any, Any, Any]) -> Any:
    """What `step` returns, run without an event loop: between its steps it only yields to let
    other requests run (`asyncio.sleep(0)`)."""
    try:
        while True:
            step.send(None)
    except StopIteration as done:
        return done.value


def turn(memo: DecodeMemo, raw: bytes) -> dict[str, float]:
    """Each step's CPU time (ms) for one cold turn of `raw`."""
    took: dict[str, float] = {}
    clock = time.process_time

    started = clock()
    values = _complete(values_within_budget(raw, SERVER))
    took["bound"] = clock() - started

    # a body the exchange works on in its worker thread is, as there, out of the collector's sight
    # (gateway/offload.py): the collector paused from the parse to the encode
    paused = offloads(values, len(raw)) and gc.isenabled()
    if paused:
        gc.disable()
    try:
        started = clock()
        body, items = parse_transcript(raw, "messages", memo, "chat\0", SERVER, values, **TYPED)
        took["parse"] = clock() - started

        started = clock()
        inbound = CODEC.decode(body, {}, SEALER, items)
        took["decode"] = clock() - started

        started = clock()
        keyed(inbound.request, "sess_bench")
        took["keys"] = clock() - started

        started = clock()
        check_size(inbound.request, SERVER)
        took["size"] = clock() - started

        started = clock()
        prepared = prepare(inbound.request, TARGET, ADAPTER.capabilities)
        took["repair"] = clock() - started

        started = clock()
        ADAPTER.encode_request(prepared.request, TARGET, "key")
        took["encode"] = clock() - started
    finally:
        if paused:
            gc.enable()
    took["all"] = sum(took.values())
    return {name: value * 1000 for name, value in took.items()}


def main() -> None:
    memo = DecodeMemo(SERVER.transcript_memo_mib << 20, min_bytes=SHORT_BODY)
    tools = workloads.tools()
    tune_garbage_collector()  # as `gateway serve` does once serving
    runs: list[dict[str, float]] = []
    for n in range(ARGS.turns + 2):
        seed = f"cold{ARGS.messages}x{n}x{time.monotonic_ns() % 10**9}"
        raw = workloads.agent_body("m", workloads.agent_messages(ARGS.messages, seed), tools)
        gc.collect()  # each turn from the same start: the last one's garbage gone
        figures = turn(memo, raw)
        # what the exchange's bookkeeping does once the answer is on its way (a tree that has it)
        getattr(memo, "settle", lambda: None)()
        if n >= 2:
            runs.append(figures)
    print(f"{ARGS.messages} messages cold, ms per turn (median of {len(runs)}; min):")
    for name in runs[0]:
        values = [run[name] for run in runs]
        print(f"  {name:7} {statistics.median(values):7.2f}  ({min(values):.2f})")


if __name__ == "__main__":
    main()
