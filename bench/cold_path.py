"""Where a lone agent turn's latency goes, in the gateway and in the floor: bench/c1_path.py's marks
(the same wrapped steps), each taking the wall clock (CLOCK_MONOTONIC, the same in every process)
beside this thread's CPU time, on the sweep's transcripts (bench/workloads.py) sent one at a time
by a load generator that notes when it wrote each request and when its answer was complete. The
gateway (or with `--floor` the relay) runs in this process, pinned as bench/run.py pins; the stub
and the load generator are child processes on the other CPU.

    PYTHONPATH=$PWD python bench/cold_path.py [--floor] [--messages 1000] [--turns 12] [--warm]

Each turn is a session's first request (cold); `--warm` sends its next turn too (the turn after
a cold one, as the sweep does) and reports both. Per segment of a request, in ms, the median of
the wall time and of the CPU time spent in it: a segment whose wall time is above its CPU time
waited (for bytes, for the other CPU, or for the kernel to give this one back); the load
generator's own times bracket the gateway's (its write to the first bytes in, the answer's write
to its last bytes out). The bookkeeping (`account`) is placed where it ran: after the answer it
is off the turn's latency, before the next turn's bytes it is not."""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import orjson
from aiohttp import web_protocol

from bench import c1_path, rig
from bench.run import KEY

MODEL = "stub-tool"
# label, wall ns, thread CPU ns
Mark = tuple[str, int, int]
_marks: list[Mark] = []
_left: list[int] = []  # bytes of each upstream write the kernel did not take at once (gateway)


def mark(label: str) -> None:
    _marks.append((label, time.monotonic_ns(), time.thread_time_ns()))
    if label == "in":
        _tracked.append(_young[0] + gc.get_count()[0])


# the collector-tracked objects made and still alive, counted at each request's first bytes: the
# youngest generation's count, plus what it was at each collection (which empties it)
_young = [0]
_tracked: list[int] = []


def _collecting(phase: str, info: dict[str, int]) -> None:
    if phase == "start":
        _young[0] += gc.get_count()[0]
    mark(f"gc{info['generation']}{'' if phase == 'start' else '.'}")


LOAD = r"""
import asyncio, sys, time
import orjson
from bench import load, workloads

port, key, model, messages, turns, warm = sys.argv[1], sys.argv[2], sys.argv[3], *map(int, sys.argv[4:7])
path = load.Path("gw", f"http://127.0.0.1:{port}/v1/chat/completions",
                 {"Authorization": f"Bearer {key}", "Content-Type": "application/json"})
tools = workloads.tools()


async def one(http, body, kind, out):
    sent = time.monotonic_ns()
    data = await path.post(http, body)
    done = time.monotonic_ns()
    if data is None:
        raise SystemExit(f"load generator: {path.errors.first}")
    out.append({"kind": kind, "sent": sent, "done": done, "bytes": len(body)})
    return orjson.loads(data)["choices"][0]["message"]


async def main():
    out = []
    async with load.client(path, 1) as http:
        for turn in range(turns):
            seed = f"cold{messages}x{turn}x{time.monotonic_ns() % 10**9}"
            listed = workloads.agent_messages(messages, seed)
            answer = await one(http, workloads.agent_body(model, listed, tools), "cold", out)
            if warm:
                listed = workloads.next_turn(listed, answer, seed)
                await one(http, workloads.agent_body(model, listed, tools), "warm", out)
            await asyncio.sleep(0.05)  # the turn's bookkeeping done: each turn arrives to an idle gateway
    sys.stdout.write(orjson.dumps(out).decode() + "\n")


asyncio.run(main())
"""


def instrument(floor: bool) -> None:
    """bench/c1_path.py's marks (its `mark` replaced by this one's), and every read of a request's
    bytes (`rx`: the last one before the handler runs is when the body was all in)."""
    received = web_protocol.RequestHandler.data_received

    def data_received(self: Any, data: bytes) -> None:
        mark("rx")
        received(self, data)

    # inside c1_path's wrapper, which marks a request's first bytes (`in`) before this `rx`
    web_protocol.RequestHandler.data_received = data_received  # type: ignore[method-assign]
    c1_path.mark = mark  # its wrappers look `mark` up when they run
    c1_path.instrument(floor)
    marked = c1_path._MarkedTransport

    def write_left(name: str) -> Any:
        write = getattr(marked, name)

        def written(self: Any, data: Any) -> None:
            write(self, data)
            _left.append(self._transport.get_write_buffer_size())

        return written

    for name in ("write", "writelines"):
        setattr(marked, name, write_left(name))
    # the cyclic collector's passes, where they ran (`gc2` ... `gc2.`: a full collection)
    gc.callbacks.append(_collecting)


def requests(marks: list[Mark]) -> list[list[Mark]]:
    """The marks split per request, at each request's first bytes (`in`)."""
    out: list[list[Mark]] = []
    for item in marks:
        if item[0] == "in":
            out.append([])
        if out:
            out[-1].append(item)
    return out


def segments(request: list[Mark], sent: int, done: int) -> dict[str, tuple[float, float]]:
    """(wall ms, CPU ms) of each segment of one request, from the load generator's write (`sent`)
    to its last byte read (`done`)."""
    first: dict[str, Mark] = {}
    last: dict[str, Mark] = {}
    for item in request:
        first.setdefault(item[0], item)
        last[item[0]] = item
    ans = first["ans"]
    before = [m for m in request if m[1] <= ans[1]]
    body_in = [m for m in before if m[0] == "rx"][-1]
    up = next(m for m in request if m[0] == "up")
    up_end = [m for m in before if m[0] == "up_end"][-1]
    out = next(m for m in request if m[0] == "out" and m[1] >= ans[1])
    out_end = [m for m in request if m[0] == "out_end"][-1]
    points: list[tuple[str, Mark]] = [
        ("in", first["in"]),
        ("body in", body_in),
        ("upstream write", up),
        ("upstream written", up_end),
        ("answer in", ans),
        ("client write", out),
        ("client written", out_end),
    ]
    found: dict[str, tuple[float, float]] = {
        "load write -> first bytes in": ((first["in"][1] - sent) / 1e6, 0.0)
    }
    for (a, ma), (b, mb) in zip(points, points[1:], strict=False):
        found[f"{a} -> {b}"] = ((mb[1] - ma[1]) / 1e6, (mb[2] - ma[2]) / 1e6)
    found["client written -> load has it all"] = ((done - out_end[1]) / 1e6, 0.0)
    found["TOTAL (load write -> load has it)"] = ((done - sent) / 1e6, (out_end[2] - first["in"][2]) / 1e6)
    for generation in "012":
        starts = [m for m in request if m[0] == f"gc{generation}"]
        if starts:
            ends = [m for m in request if m[0] == f"gc{generation}."]
            wall = sum(b[1] - a[1] for a, b in zip(starts, ends, strict=False)) / 1e6
            cpu = sum(b[2] - a[2] for a, b in zip(starts, ends, strict=False)) / 1e6
            found[f"collector gen{generation} (all passes)"] = (wall, cpu)
    opened = [m for m in request if m[0] == "account0"]
    if opened:
        where = "after the answer" if opened[0][1] >= out_end[1] else "BEFORE the answer"
        closed = [m for m in request if m[0] == "account1"]
        wall = sum(b[1] - a[1] for a, b in zip(opened, closed, strict=False)) / 1e6
        cpu = sum(b[2] - a[2] for a, b in zip(opened, closed, strict=False)) / 1e6
        found[f"bookkeeping ({where})"] = (wall, cpu)
    return found


def steps(request: list[Mark]) -> dict[str, tuple[float, float]]:
    """(wall ms, CPU ms) between each two marks in a row (numbered when a pair repeats; the
    request's bytes read, `rx`, counted as one step)."""
    found: dict[str, tuple[float, float]] = {}
    marks = [m for i, m in enumerate(request) if m[0] != "rx" or request[i + 1][0] != "rx"]
    for (a, wa, ca), (b, wb, cb) in zip(marks, marks[1:], strict=False):
        key = f"{a}->{b}"
        n = 1
        while f"{key}#{n}" in found or (n == 1 and key in found):
            n += 1
        found[key if n == 1 else f"{key}#{n}"] = ((wb - wa) / 1e6, (cb - ca) / 1e6)
    return found


def report(marks: list[Mark], loads: list[dict[str, Any]], skip: int, fine: bool) -> None:
    per = requests(marks)
    if len(per) != len(loads):
        raise SystemExit(f"{len(per)} requests marked, {len(loads)} sent")
    by_kind: dict[str, dict[str, list[tuple[float, float]]]] = defaultdict(lambda: defaultdict(list))
    made: dict[str, list[int]] = defaultdict(list)
    for sent, before, after in list(zip(loads, _tracked, _tracked[1:], strict=False))[skip:]:
        made[sent["kind"]].append(after - before)
    for kind, counts in made.items():
        left = statistics.median(counts)
        print(
            f"{kind}: collector-tracked objects a request left (until the next one's bytes),"
            f" median {left:,.0f}"
        )
    for request, sent in list(zip(per, loads, strict=True))[skip:]:
        for name, figures in segments(request, sent["sent"], sent["done"]).items():
            by_kind[sent["kind"]][name].append(figures)
        if fine:
            for name, figures in steps(request).items():
                by_kind[sent["kind"] + " steps"][name].append(figures)
    if _left:
        left = statistics.median(_left)
        print(
            f"upstream writes: bytes left to the loop after the write call, median {left:,.0f}"
            f" (max {max(_left):,})"
        )
    for kind, found in by_kind.items():
        count = max(map(len, found.values()))
        print(f"{kind} turns ({count}), ms: wall / CPU (wall - CPU: waiting), median; min wall / CPU")
        for name, values in found.items():
            wall = statistics.median(v[0] for v in values)
            cpu = statistics.median(v[1] for v in values)
            least = f"{min(v[0] for v in values):8.2f} / {min(v[1] for v in values):7.2f}"
            print(f"  {name:44} {wall:8.2f} / {cpu:7.2f}  ({wall - cpu:+6.2f}); {least}")


async def measure(args: argparse.Namespace, tmp: Path) -> None:
    async with c1_path.served_here(args.floor, not args.no_pin, [MODEL], tmp) as (port, env, plan):
        load = await asyncio.create_subprocess_exec(
            sys.executable,
            *("-c", LOAD, str(port), KEY, MODEL, str(args.messages), str(args.turns), str(int(args.warm))),
            stdout=asyncio.subprocess.PIPE,
            cwd=rig.ROOT,
            env={**env, "PYTHONPATH": str(rig.ROOT)},
            preexec_fn=None if plan.rig is None else lambda: os.sched_setaffinity(0, plan.rig),
        )
        output, _ = await load.communicate()
    if load.returncode != 0:
        raise SystemExit(f"load generator failed ({load.returncode})")
    loads = orjson.loads(output.splitlines()[-1])
    report(_marks, loads, 2 * (1 + args.warm), args.steps)  # the first turns warm the interpreter


def main() -> None:
    parser = argparse.ArgumentParser(prog="python bench/cold_path.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--floor", action="store_true", help="the floor (bench/relay.py), not the gateway")
    parser.add_argument("--messages", type=int, default=1000)
    parser.add_argument("--turns", type=int, default=12, help="sessions, each a cold turn (and --warm's)")
    parser.add_argument("--warm", action="store_true", help="each session's next turn too")
    parser.add_argument("--steps", action="store_true", help="also every step between two marks")
    parser.add_argument("--no-pin", action="store_true", help="leave every process unpinned")
    args = parser.parse_args()
    instrument(args.floor)
    c1_path.run_measure(measure, args)


if __name__ == "__main__":
    main()
