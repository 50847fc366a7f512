"""Where the 128-stream figure's long chunk gaps happen: the floor (bench/relay.py) and gateways
(checkouts) side by side, each round N streams at once as `bench/run.py`'s streams figure sends
them, every gap kept with when it ended. A gap is put in the burst's phase it ended in:

- `setup`: before the last stream's first content chunk (streams still being opened: their
  setup runs on the same loop as the chunks of the streams already going),
- `tail`: after the first stream's last content chunk (finished streams' bookkeeping runs on the
  loop among the chunks of those still going),
- `steady`: between the two.

For each phase: its gaps' p99 and how many of the pooled figure's top 1% it holds; and the stub's
connects during the rounds (upstream connections opened: each one is a connect in the burst).

    python bench/stream_gaps.py [NAME=TREE ...] [--streams 128] [--rounds 3] [--idle SECONDS]

`--idle S` waits S seconds before each timed round (a pool's idle connections older than its
keep-alive are then gone, as in a full `bench/run.py` where the streams figure comes minutes
after the warm-up). Without NAME=TREE, this checkout alone. Wall-clock: compare paths of one run.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import load, rig, wire, workloads  # noqa: E402
from bench.figures import percentile  # noqa: E402
from bench.run import KEY, KEY_ENV, StubConnections, gateway_config  # noqa: E402
from gateway.simulators.base import free_port  # noqa: E402

MARKER = b'"content":"tok'
PHASES = ("setup", "steady", "tail")


async def burst(path: load.Path, body: bytes, count: int, chunks: int) -> list[tuple[float, float, int]]:
    """`count` streams at once: every gap as (when it ended, its length, chunk index), seconds
    from the burst's start."""
    gaps: list[tuple[float, float, int]] = []
    firsts: list[float] = []
    lasts: list[float] = []
    go = asyncio.Event()

    async def one(http: wire.Client, start: list[float]) -> None:
        await go.wait()
        last, seen = 0.0, 0

        def sink(data: bytes, read_at: float) -> None:
            nonlocal last, seen
            now = read_at - start[0]
            n = data.count(MARKER)
            if not n:
                return
            if seen:
                gaps.append((now, now - last, seen))
            else:
                firsts.append(now)
            gaps.extend((now, 0.0, seen + k) for k in range(1, n))
            seen += n
            last = now

        status, _ = await http.exchange(path.request(body), sink)
        if status != 200:
            raise SystemExit(f"{path.name}: status {status}")
        if seen != chunks:
            raise SystemExit(f"{path.name}: a stream had {seen} content chunks, expected {chunks}")
        lasts.append(last)

    start = [0.0]
    async with load.client(path, count) as http:
        tasks = [asyncio.create_task(one(http, start)) for _ in range(count)]
        await asyncio.sleep(0)
        start[0] = time.perf_counter()
        go.set()
        await asyncio.gather(*tasks)
    opened, finished = max(firsts), min(lasts)
    return [*gaps, (-opened, -finished, -1)]  # the last entry marks the phases (see `phases`)


def phases(rounds: list[list[tuple[float, float, int]]]) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {p: [] for p in PHASES}
    for gaps in rounds:
        marks = gaps[-1]
        opened, finished = -marks[0], -marks[1]
        for at, gap, _ in gaps[:-1]:
            out["setup" if at <= opened else "tail" if at >= finished else "steady"].append(gap)
    return out


async def measure(variants: list[tuple[str, Path]], args: argparse.Namespace) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GATEWAY_")}
    env.update({KEY_ENV: KEY, "PYTHONUNBUFFERED": "1"})
    plan = rig.Pinning.plan(True)
    if plan.rig is not None:
        os.sched_setaffinity(0, plan.rig)
    model = f"stub-n{args.chunks}-i{args.interval}"
    body = workloads.small_body(model, stream=True)
    with tempfile.TemporaryDirectory(prefix="gateway-stream-gaps-") as name:
        tmp = Path(name)
        stub_port = free_port()
        stub = rig.Child(
            "stub", rig.python("bench/stub.py", "--port", str(stub_port)), env, plan.rig, tmp / "stub.log"
        )
        children: list[tuple[str, rig.Child, load.Path]] = []
        counter = StubConnections(stub_port)
        try:
            upstream = f"http://127.0.0.1:{stub_port}"
            for label, tree in [("floor", rig.ROOT), *variants]:
                port, home = free_port(), tmp / label
                home.mkdir()
                if label == "floor":
                    cmd = ["bench/relay.py", "--port", str(port), "--upstream", upstream]
                    cmd += ["--key-env", KEY_ENV]
                else:
                    config = home / "bench.toml"
                    config.write_text(gateway_config(port, stub_port, [model], "memory", home, None))
                    cmd = ["-m", "gateway", "serve", "--config", str(config)]
                child = rig.Child(label, rig.python(*cmd), env, plan.gateway, home / "gateway.log", cwd=tree)
                url = f"http://127.0.0.1:{port}/v1/chat/completions"
                children.append((label, child, load.Path(label, url, {"Content-Type": "application/json"})))
            stub.wait_ready("stub listening")
            for _, child, _ in children:
                child.wait_ready("gateway listening")
            for _, _, path in children:  # every pool filled to the burst's size
                await burst(path, body, args.streams, args.chunks)
            results: dict[str, list[list[tuple[float, float, int]]]] = {label: [] for label, _, _ in children}
            connects: dict[str, list[int]] = {label: [] for label, _, _ in children}
            cpu: dict[str, float] = dict.fromkeys(results, 0.0)
            for r in range(args.rounds):
                for label, child, path in children if r % 2 == 0 else children[::-1]:
                    if args.idle:
                        await asyncio.sleep(args.idle)
                    opened = await counter.opened()
                    before = rig.cpu_seconds(child.pids())
                    results[label].append(await burst(path, body, args.streams, args.chunks))
                    cpu[label] += rig.cpu_seconds(child.pids()) - before
                    connects[label].append(await counter.opened() - opened)
        finally:
            await counter.close()
            for _, child, _ in children:
                child.stop()
            stub.stop()
    chunks = args.rounds * args.streams * args.chunks
    shape = f"{args.streams} streams x {args.chunks} @{args.interval} ms"
    print(f"{shape}, {args.rounds} rounds, idle {args.idle} s")
    heads = f"{'setup p99 (top1%)':>18} {'steady':>16} {'tail':>16}"
    print(f"{'path':10} {'p99 gap':>8} {heads}  connects  CPU/chunk")
    for label, rounds in results.items():
        pooled = [gap for gaps in rounds for _, gap, _ in gaps[:-1]]
        cut = percentile(pooled, 99)
        by_phase = phases(rounds)
        cells = []
        for p in PHASES:
            values = by_phase[p]
            top = sum(1 for v in values if v > cut)
            cells.append(f"{percentile(values, 99) * 1e3:8.2f} ({top:4d})" if values else f"{'-':>16}")
        print(
            f"{label:10} {cut * 1e3:8.2f} {cells[0]:>18} {cells[1]:>16} {cells[2]:>16}"
            f"  {'/'.join(map(str, connects[label])):8}  {cpu[label] / chunks * 1e6:6.1f} us"
        )


def main() -> None:
    parser = argparse.ArgumentParser(prog="python bench/stream_gaps.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("variants", nargs="*", help="NAME=TREE: a checkout's gateway (default: this one)")
    parser.add_argument("--streams", type=int, default=128)
    parser.add_argument("--chunks", type=int, default=64)
    parser.add_argument("--interval", type=int, default=10, help="ms between chunks (default 10)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--idle", type=float, default=0.0, help="seconds idle before each timed round")
    args = parser.parse_args()
    variants = [(v.partition("=")[0], Path(v.partition("=")[2]).resolve()) for v in args.variants]
    try:
        import uvloop
    except ImportError:
        asyncio.run(measure(variants or [("this", rig.ROOT)], args))
    else:
        uvloop.run(measure(variants or [("this", rig.ROOT)], args))


if __name__ == "__main__":
    main()
