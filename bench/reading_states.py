"""What the held reading states of the Responses and Gemini dialects (gateway/ingress/resumed.py)
cost the garbage collector: cold 1,000-message conversations parsed and decoded in process, one
after another, as bench/turns.py sends them (bench/dialects.py), then the objects the collector
still tracks that the turns left held (the decode memo's witnesses, the held fold states) and the
time of a full collection over them.

    python bench/reading_states.py [--dialect responses|gemini] [--turns 25] [--messages 1000] [--tree PATH]

Prints the median CPU time of a turn's parse and decode (the first three left out: they warm the
interpreter), the tracked objects left and a full collection's CPU time. `--tree`: another
checkout's gateway package (the same rig measures main and a branch)."""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--dialect", choices=("responses", "gemini"), default="responses")
    parser.add_argument("--turns", type=int, default=25)
    parser.add_argument("--messages", type=int, default=1000)
    parser.add_argument("--tree", type=Path, default=ROOT)
    return parser.parse_args()


ARGS = _args()
sys.path.insert(0, str(ARGS.tree))
sys.path.insert(1, str(ROOT))

from bench import dialects, workloads  # noqa: E402
from gateway.config.loading import config_from_dict  # noqa: E402
from gateway.ingress.budget import value_bound  # noqa: E402
from gateway.ingress.memo import SHORT_BODY, DecodeMemo  # noqa: E402
from gateway.ingress.split import parse_shared  # noqa: E402
from gateway.serve import tune_garbage_collector  # noqa: E402
from gateway.transcript.seal import Sealer  # noqa: E402

SERVER = config_from_dict(
    {
        "server": {"host": "127.0.0.1", "port": 8000},
        "providers": {
            "p": {"kind": "openai_chat", "base_url": "https://bench.invalid/v1", "api_key_env": "K"}
        },
        "models": {"m": {"targets": [{"provider": "p", "model": "stub"}]}},
    }
).server


def main() -> None:
    if ARGS.dialect == "responses":
        from gateway.ingress.responses.codec import CODEC as codec

        params: dict[str, str] = {}
    else:
        from gateway.ingress.gemini.codec import GENERATE as codec

        params = {"model": "m"}
    sealer = Sealer(b"b" * 32)
    memo = DecodeMemo(SERVER.transcript_memo_mib << 20, min_bytes=SHORT_BODY)
    dialect = dialects.DIALECTS[ARGS.dialect]
    tools = workloads.tools()
    bodies = [
        dialect.body("m", workloads.agent_messages(ARGS.messages, f"held{n}x{time.monotonic_ns()}"), tools)
        for n in range(ARGS.turns)
    ]
    tune_garbage_collector()  # as `gateway serve` does once serving
    before = len(gc.get_objects())
    took = []
    for raw in bodies:
        gc.collect()  # each turn from the same start
        started = time.process_time()
        values, scope = value_bound(raw, 0, len(raw)), f"{ARGS.dialect}\0"
        body, items = parse_shared(raw, codec.transcript_field, memo, scope, SERVER, values, False, None)
        codec.decode(body, {}, sealer, items, params=params)
        took.append(time.process_time() - started)
    del body, items
    gc.collect()
    started = time.process_time()
    gc.collect()
    full = time.process_time() - started
    print(
        f"{ARGS.messages} messages cold ({ARGS.dialect}), {ARGS.turns} conversations: parse+decode "
        f"{statistics.median(took[3:]) * 1000:.2f} ms a turn; tracked objects left held "
        f"{len(gc.get_objects()) - before}; a full collection {full * 1000:.2f} ms"
    )


if __name__ == "__main__":
    main()
