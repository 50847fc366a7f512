"""The steps of a warm agent turn (a long Chat transcript going on from the one before), in process:
CPU time of each step the exchange runs on the sweep's bodies (bench/workloads.py) before the
upstream call, for the turn after a session's first (`warm`) and the one after that (`after`: an
agent loop's steady state), as `bench/turns.py` sends them through the whole gateway:

- `bound`: the body's value bound, counted from the held body's (`values_within_budget`);
- `parse`: the memo's admission and the parse of what is new (`parse_transcript`);
- `decode`: the Chat dialect's decode, resumed; `size`: `check_size`;
- `keys`: restore's lookup keys (`message_keys` and the distinct ones; the sweep's histories
  have no records, so nothing is restored);
- `repair`: `prepare` for an OpenAI Chat target; `encode`: that provider's request body.

    python bench/warm_turn.py [--messages 1000] [--sessions 12] [--tree PATH] [--switch-model]

Prints milliseconds per turn for each step (the median over the sessions, the first two left out:
they warm the interpreter). `--tree`: another checkout's gateway package. `--switch-model`: each
turn names another model (Codex switching model mid-session moves the list in the body)."""

from __future__ import annotations

import argparse
import inspect
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=1000)
    parser.add_argument("--sessions", type=int, default=12)
    parser.add_argument("--tree", type=Path, default=ROOT)
    parser.add_argument(
        "--switch-model",
        action="store_true",
        help="each turn names another model (of another length, as Codex switching model mid-session)",
    )
    return parser.parse_args()


ARGS = _args()
sys.path.insert(0, str(ARGS.tree))
sys.path.insert(1, str(ROOT))

from bench import workloads  # noqa: E402

_argv, sys.argv = sys.argv, sys.argv[:1]  # bench/cold_turn.py reads its own arguments when imported
from bench.cold_turn import ADAPTER, SEALER, SERVER, TARGET, TYPED  # noqa: E402

sys.argv = _argv
from gateway.continuity import restore as restore_module  # noqa: E402
from gateway.ingress.admission import check_size, values_within_budget  # noqa: E402
from gateway.ingress.chat.codec import CODEC  # noqa: E402
from gateway.ingress.memo import SHORT_BODY, DecodeMemo  # noqa: E402
from gateway.ingress.split import parse_transcript  # noqa: E402
from gateway.repair import prepare  # noqa: E402
from gateway.serve import tune_garbage_collector  # noqa: E402


def _keys(request: Any) -> None:
    keyed = getattr(restore_module, "keyed", None)
    if keyed is not None:
        list(keyed(request, "s", "")[1])
    else:  # the tree before `keyed`: what restore_recorded did
        keys = restore_module.message_keys(request, "s", "")
        list(dict.fromkeys(k for k in keys if k is not None))


_SENT: list[Any] = []


def _bound(raw: bytes, held: Any) -> int | None:
    """`values_within_budget`, run to its end here (its steps yield bare to the loop)."""
    steps = values_within_budget(raw, SERVER, held)
    try:
        while True:
            steps.send(None)
    except StopIteration as done:
        return done.value


def _shared(held: Any) -> dict[str, Any]:
    """What counting the values compared, handed on to the read as the exchange does (a tree
    before `shared`: its read found the comparison itself)."""
    return {"shared": held} if "shared" in inspect.signature(parse_transcript).parameters else {}


def turn(memo: DecodeMemo, raw: bytes) -> dict[str, float]:
    """Each step's CPU time (ms) for one turn of `raw`."""
    took: dict[str, float] = {}
    clock = time.process_time
    started = clock()
    held = memo.held_bound("chat\0", raw, "messages")
    values = _bound(raw, held)
    took["bound"] = clock() - started
    started = clock()
    body, items = parse_transcript(raw, "messages", memo, "chat\0", SERVER, values, **TYPED, **_shared(held))
    took["parse"] = clock() - started
    started = clock()
    request = CODEC.decode(body, {}, SEALER, items).request
    took["decode"] = clock() - started
    started = clock()
    check_size(request, SERVER)
    took["size"] = clock() - started
    started = clock()
    _keys(request)
    took["keys"] = clock() - started
    started = clock()
    prepared = prepare(request, TARGET, ADAPTER.capabilities)
    took["repair"] = clock() - started
    started = clock()
    sent = ADAPTER.encode_request(prepared.request, TARGET, "key")
    took["encode"] = clock() - started
    _SENT[:] = [sent]  # kept, as the exchange keeps what it sent (the inspector's capture)
    took["all"] = sum(took.values())
    return {name: value * 1000 for name, value in took.items()}


def _answer(n: int) -> dict[str, Any]:
    call = {"id": f"call_{n}", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}
    return {"role": "assistant", "content": None, "tool_calls": [call]}


def main() -> None:
    memo = DecodeMemo(SERVER.transcript_memo_mib << 20, min_bytes=SHORT_BODY)
    tools = workloads.tools()
    tune_garbage_collector()  # as `gateway serve` does once serving
    runs: dict[str, list[dict[str, float]]] = {"warm": [], "after": []}
    for n in range(ARGS.sessions + 2):
        seed = f"warm{ARGS.messages}x{n}x{time.monotonic_ns() % 10**9}"
        messages = workloads.agent_messages(ARGS.messages, seed)
        turn(memo, workloads.agent_body("m", messages, tools))  # the cold turn
        for kind, model in zip(runs, ("model-two", "m-3") if ARGS.switch_model else ("m", "m"), strict=True):
            messages = workloads.next_turn(messages, _answer(len(messages)), seed)
            figures = turn(memo, workloads.agent_body(model, messages, tools))
            if n >= 2:
                runs[kind].append(figures)
    for kind, figures in runs.items():
        print(f"{ARGS.messages} messages {kind}, ms per turn (median of {len(figures)}; min):")
        for name in figures[0]:
            values = [run[name] for run in figures]
            print(f"  {name:7} {statistics.median(values):7.3f}  ({min(values):.3f})")


if __name__ == "__main__":
    main()
