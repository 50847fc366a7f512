"""The outbound steps of a cold agent turn one by one, in process: each repair pass `prepare` runs
on the sweep's 1,000-message Chat transcript (bench/workloads.py) for an OpenAI Chat target, on
the input it gets there, then `prepare` and the encoder whole, and restore's keys (`keyed`).

    python bench/outbound_steps.py [--messages 1000] [--transcripts 12] [--repeats 7] [--tree PATH]

Every step runs `--repeats` times on each transcript with nothing held from an earlier run (the
passes' resumed walks and the encoder's held wire cleared: each run is a first sight) and counts
its fastest run: the step's own CPU cost, with the least of what other load on the machine adds
(bench/cold_turn.py times the steps once each, in a turn's order, caches as cold as they come).
Prints milliseconds per step, the median over the transcripts. `--tree`: another checkout's
gateway package (the same rig measures main and a branch)."""

from __future__ import annotations

import argparse
import importlib
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=1000)
    parser.add_argument("--transcripts", type=int, default=12)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--tree", type=Path, default=ROOT)
    return parser.parse_args()


ARGS = _args()
sys.path.insert(0, str(ARGS.tree))
sys.path.insert(1, str(ROOT))

from bench import workloads  # noqa: E402
from gateway.config.loading import config_from_dict  # noqa: E402
from gateway.continuity.restore import keyed  # noqa: E402
from gateway.ingress.budget import value_bound  # noqa: E402
from gateway.ingress.chat.codec import CODEC  # noqa: E402
from gateway.ingress.memo import SHORT_BODY, DecodeMemo  # noqa: E402
from gateway.ingress.split import parse_transcript  # noqa: E402
from gateway.providers import get_adapter  # noqa: E402
from gateway.providers.openai_compat.adapter import HELD  # noqa: E402
from gateway.repair import prepare  # noqa: E402
from gateway.repair.empty_text import drop_empty_text  # noqa: E402
from gateway.repair.reasoning_policy import apply_reasoning_policy  # noqa: E402
from gateway.repair.role_order import fix_role_order  # noqa: E402
from gateway.repair.tool_ids import project_tool_ids  # noqa: E402
from gateway.repair.tool_pairing import pair_tool_results, unique_call_ids  # noqa: E402
from gateway.transcript.model import Request  # noqa: E402
from gateway.transcript.resume import Resumable  # noqa: E402
from gateway.transcript.seal import Sealer  # noqa: E402
from gateway.transcript.target import Target  # noqa: E402

holds = importlib.import_module("gateway.repair.holds").holds  # the package names the function
TARGET = Target(provider="stub", kind="openai_chat", model="stub", base_url="https://bench.invalid/v1")
ADAPTER = get_adapter(TARGET.kind)
CAPS = ADAPTER.capabilities
SERVER = config_from_dict(
    {
        "server": {"host": "127.0.0.1", "port": 8000},
        "providers": {
            "p": {"kind": "openai_chat", "base_url": "https://bench.invalid/v1", "api_key_env": "K"}
        },
        "models": {"m": {"targets": [{"provider": "p", "model": "stub"}]}},
    }
).server
TYPED = {"typed": CODEC.typed_items} if getattr(CODEC, "typed_items", None) is not None else {}

# each step on what it gets in a turn: the client's request, the policy's output (`policed`: what
# the passes after it get, this transcript's reasoning being the client's), the prepared request
STEPS: dict[str, Callable[[Request, Any, Request], object]] = {
    "holds": lambda request, policed, prepared: holds(request.messages),
    "policy": lambda request, policed, prepared: apply_reasoning_policy(request.messages, TARGET, CAPS),
    "empty_text": lambda request, policed, prepared: drop_empty_text(policed, CAPS),
    "unique_ids": lambda request, policed, prepared: unique_call_ids(policed),
    "pairing": lambda request, policed, prepared: pair_tool_results(policed),
    "role_order": lambda request, policed, prepared: fix_role_order(policed, CAPS),
    "tool_ids": lambda request, policed, prepared: project_tool_ids(policed, TARGET, CAPS.tool_ids),
    "prepare": lambda request, policed, prepared: prepare(request, TARGET, CAPS),
    "encode": lambda request, policed, prepared: ADAPTER.encode_request(prepared, TARGET, "key"),
    "keyed": lambda request, policed, prepared: keyed(request, "session"),
}


def _forget() -> None:
    """Nothing held from an earlier run: every resumed walk and the encoder's held wire."""
    for name, module in list(sys.modules.items()):
        if name.startswith("gateway."):
            for value in list(vars(module).values()):
                if isinstance(value, Resumable):
                    value.clear()
    HELD.clear()


def _requests() -> list[Request]:
    memo = DecodeMemo(SERVER.transcript_memo_mib << 20, min_bytes=SHORT_BODY)
    out = []
    for n in range(ARGS.transcripts):
        seed = f"out{ARGS.messages}x{n}x{time.monotonic_ns() % 10**9}"
        raw = workloads.agent_body("m", workloads.agent_messages(ARGS.messages, seed), workloads.tools())
        values = value_bound(raw, 0, len(raw))
        body, items = parse_transcript(raw, "messages", memo, "chat\0", SERVER, values, **TYPED)
        out.append(CODEC.decode(body, {}, Sealer(b"b" * 32), items).request)
    return out


def main() -> None:
    clock = time.process_time
    took: dict[str, list[float]] = {name: [] for name in STEPS}
    for request in _requests():
        policed = apply_reasoning_policy(request.messages, TARGET, CAPS)[0]
        prepared = prepare(request, TARGET, CAPS).request
        for name, step in STEPS.items():
            best = float("inf")
            for _ in range(ARGS.repeats):
                _forget()
                started = clock()
                step(request, policed, prepared)
                best = min(best, clock() - started)
            took[name].append(best * 1000)
    runs = f"fastest of {ARGS.repeats}, median of {ARGS.transcripts}"
    print(f"{ARGS.messages} messages, first sight, ms per step ({runs}):")
    for name, values in took.items():
        print(f"  {name:10} {statistics.median(values):6.3f}")


if __name__ == "__main__":
    main()
