"""The decode memo's own figures (gateway/ingress/memo.py), measured in-process on the path it
sits on (parse, memo lookup, decode of a Chat Completions body):

- RSS against its budget: agent transcripts (bench/workloads.py, every one distinct) each sent
  twice, until the memo has been full for a while; the process's RSS growth over the same traffic
  with the memo off, and over the budget.
- non-repeating traffic: every request a transcript never seen before; time per request with the
  memo on against off, interleaved round by round so the machine's load hits both alike (a
  transcript of 64+ messages waits on probation at first sight: `--messages 100` shows its cost).

    python bench/memo.py [--budget-mib 32] [--messages 40] [--requests 400]

Each RSS figure runs in a fresh interpreter (what one configuration leaves behind must not count
for the next)."""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.workloads import agent_messages, tools  # noqa: E402
from gateway.config import ServerConfig  # noqa: E402
from gateway.ingress.budget import value_bound  # noqa: E402
from gateway.ingress.chat.codec import CODEC  # noqa: E402
from gateway.ingress.memo import DecodeMemo  # noqa: E402
from gateway.ingress.split import parse_transcript  # noqa: E402
from gateway.serve import GC_THRESHOLDS  # noqa: E402
from gateway.transcript.seal import Sealer  # noqa: E402

SEALER = Sealer(b"bench-memo-secret")
LIMITS = ServerConfig()
TOOLS = tools()


SHORT = False  # --short: chat turns of a few words instead of agent transcripts


def short_messages(count: int, seed: str) -> list[dict[str, Any]]:
    roles = ("user", "assistant")
    return [{"role": roles[i % 2], "content": f"{seed} turn {i}: ok, next."} for i in range(count)]


def body(seed: str, messages: int) -> bytes:
    transcript = short_messages(messages, seed) if SHORT else agent_messages(messages, seed)
    return orjson.dumps({"model": "m", "messages": transcript, "tools": TOOLS})


def handle(raw: bytes, memo: DecodeMemo) -> Any:
    """What the exchange does before routing (gateway/ingress/split.py `parse_transcript`, then the
    codec)."""
    values = value_bound(raw, 0, len(raw))  # counted before any parse, memo or not
    parsed, items = parse_transcript(raw, "messages", memo, "chat\0", LIMITS, values)
    return CODEC.decode(parsed, {}, SEALER, items)


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def rss_child(budget: int, messages: int, rounds: int) -> dict[str, Any]:
    """One configuration, in this (fresh) process: RSS growth over `rounds` distinct transcripts
    each sent twice."""
    memo = DecodeMemo(budget)
    for n in range(20):  # warm the interpreter's own caches first
        handle(body(f"warm{n}", messages), DecodeMemo(0))
    gc.collect()
    before = rss_bytes()
    for n in range(rounds):
        raw = body(f"s{n:06d}", messages)
        handle(raw, memo)
        handle(raw, memo)
    gc.collect()
    return {"rss_growth": rss_bytes() - before, "accounted": memo.size, "entries": len(memo)}


def nonrepeating(budget: int, messages: int, requests: int) -> dict[str, float]:
    bodies = [body(f"n{n:06d}", messages) for n in range(requests)]
    memo = DecodeMemo(budget)
    off = DecodeMemo(0)
    times = {"off": 0.0, "on": 0.0}
    chunk = 20
    for start in range(0, requests, chunk):
        order = ("off", "on") if (start // chunk) % 2 == 0 else ("on", "off")
        for name in order:
            target = off if name == "off" else memo
            began = time.perf_counter()
            for raw in bodies[start : start + chunk]:
                handle(raw, target)
            times[name] += time.perf_counter() - began
    return {name: total / requests * 1000 for name, total in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--budget-mib", type=int, default=32)
    parser.add_argument("--messages", type=int, default=40)
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--short", action="store_true", help="chat turns of a few words")
    parser.add_argument("--rss-child", nargs=3, type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    # the collector as the gateway runs it (gateway/serve.py): what the memo keeps alive is walked
    # at each older collection, and the gateway makes those rare
    gc.set_threshold(*GC_THRESHOLDS)
    global SHORT
    SHORT = args.short
    if args.rss_child:
        print(json.dumps(rss_child(*args.rss_child)))
        return
    budget = args.budget_mib << 20
    # enough distinct transcripts to fill the budget about twice over (2 KB per tool result)
    rounds = max(1, 2 * budget // (args.messages * (300 if args.short else 1200)))
    runs = {}
    for name, size in (("off", 0), ("on", budget)):
        out = subprocess.run(
            [sys.executable, __file__, *(["--short"] if args.short else []), "--rss-child"]
            + [str(size), str(args.messages), str(rounds)],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        runs[name] = json.loads(out)
    own = runs["on"]["rss_growth"] - runs["off"]["rss_growth"]
    speed = nonrepeating(budget, args.messages, args.requests)
    mib = 1 << 20
    kind = "short chat" if args.short else "agent"
    print(
        f"memo budget {args.budget_mib} MiB; {rounds} distinct {args.messages}-message {kind}"
        " transcripts, each sent twice"
    )
    print(
        f"  RSS growth: memo on {runs['on']['rss_growth'] / mib:.1f} MiB,"
        f" off {runs['off']['rss_growth'] / mib:.1f} MiB:"
        f" the memo's own {own / mib:.1f} MiB = {own / budget:.2f}x its budget"
        f" (it accounts {runs['on']['accounted'] / mib:.1f} MiB in {runs['on']['entries']} entries)"
    )
    print(
        f"  non-repeating traffic ({args.requests} requests): {speed['on']:.2f} ms/request with the memo,"
        f" {speed['off']:.2f} without ({(speed['on'] / speed['off'] - 1) * 100:+.0f}%)"
    )


if __name__ == "__main__":
    main()
