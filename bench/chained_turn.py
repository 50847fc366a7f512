"""The parse of an agent turn that goes on from the one before (the decode memo's chain:
gateway/ingress/memo_chain.py), in process: CPU time of `parse_transcript` on the sweep's bodies
(bench/workloads.py), each session's first body and two turns after it sent first, then the
turns after those measured (each decoded, untimed, as the exchange does: the memo records what
the items decode to for the next turn).

    python bench/chained_turn.py [--messages 1000] [--sessions 8] [--tree PATH]

Prints milliseconds per turn (the median; the first two sessions left out: they warm the
interpreter). `--tree`: another checkout's gateway package (the same rig measures main and a
branch)."""

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
    parser.add_argument("--messages", type=int, default=1000)
    parser.add_argument("--sessions", type=int, default=8)
    parser.add_argument("--tree", type=Path, default=ROOT)
    return parser.parse_args()


ARGS = _args()
sys.path.insert(0, str(ARGS.tree))
sys.path.insert(1, str(ROOT))

from bench import workloads  # noqa: E402
from gateway.config.loading import config_from_dict  # noqa: E402
from gateway.ingress.budget import value_bound  # noqa: E402
from gateway.ingress.chat.codec import CODEC  # noqa: E402
from gateway.ingress.memo import SHORT_BODY, DecodeMemo  # noqa: E402
from gateway.ingress.split import parse_transcript  # noqa: E402
from gateway.serve import tune_garbage_collector  # noqa: E402
from gateway.transcript.seal import Sealer  # noqa: E402

SEALER = Sealer(b"b" * 32)
# bench/cold_turn.py's settings, repeated: with `--tree` the `bench` package imported is that tree's, which
# may lack a module shared from here
SERVER = config_from_dict(
    {
        "server": {"host": "127.0.0.1", "port": 8000},
        "providers": {
            "p": {"kind": "openai_chat", "base_url": "https://bench.invalid/v1", "api_key_env": "K"}
        },
        "models": {"m": {"targets": [{"provider": "p", "model": "stub"}]}},
    }
).server
TURNS = 4  # a session's bodies: the first, then three going on (the last two measured)


def _answer(session: int, turn: int) -> dict:
    """The assistant's tool call a turn goes on from (`workloads.next_turn`)."""
    call = {"id": f"call_{session}x{turn}", "type": "function"}
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [{**call, "function": {"name": "read_file", "arguments": "{}"}}],
    }


def main() -> None:
    memo = DecodeMemo(SERVER.transcript_memo_mib << 20, min_bytes=SHORT_BODY)
    tools = workloads.tools()
    tune_garbage_collector()  # as `gateway serve` does once serving
    took: list[float] = []
    found = total = 0  # over the measured turns: items the memo found (held), of all
    for session in range(ARGS.sessions + 2):
        seed = f"chained{ARGS.messages}x{session}x{time.monotonic_ns() % 10**9}"
        messages = workloads.agent_messages(ARGS.messages, seed)
        for turn in range(TURNS):
            if turn:
                messages = workloads.next_turn(messages, _answer(session, turn), seed)
            raw = workloads.agent_body("m", messages, tools)
            values = value_bound(raw, 0, len(raw))  # counted before, as the exchange does
            gc.collect()
            hits, misses = memo.hits, memo.misses
            started = time.process_time()
            body, items = parse_transcript(raw, "messages", memo, "chat\0", SERVER, values)
            elapsed = time.process_time() - started
            CODEC.decode(body, {}, SEALER, items)
            if session >= 2 and turn >= 2:
                took.append(elapsed * 1000)
                found += memo.hits - hits
                total += memo.hits - hits + memo.misses - misses
    print(
        f"{ARGS.messages} messages, a turn going on: parse ms per turn, median "
        f"{statistics.median(took):.2f} (min {min(took):.2f}, n={len(took)}); items found {found} of {total}"
    )


if __name__ == "__main__":
    main()
