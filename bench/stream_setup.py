"""What a streamed request costs the gateway against a whole one, at c=1: gateway CPU per request
for a whole answer, a stream of one content chunk (its setup: what the fan-in of many streams
pays for each before its first chunk), and streams of 4 and 64 chunks sent at once (their
difference over 60 chunks: the cost of a chunk when chunks come together). The upstream is the
bench's stub; several gateways (checkouts) are measured in the same run, alternately.

    python bench/stream_setup.py [NAME=TREE ...] [--requests N] [--rounds R]

Without NAME=TREE, this checkout alone; NAME `floor` runs that tree's bench/relay.py (the bare
aiohttp relay) instead of a gateway: its per-chunk figure is the least a chunk costs. CPU is read
from /proc (10 ms ticks): use enough requests (the default 600 makes a tick ~2% of a figure) and
compare variants of one run. A paced chunk (1 ms apart) costs mostly the process's wake-up.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import load, rig, workloads  # noqa: E402
from bench.run import KEY, KEY_ENV, gateway_config  # noqa: E402
from gateway.simulators.base import free_port  # noqa: E402

KINDS = {  # name: (model, streamed, requests per N)
    "whole": ("stub", False, 1.0),
    "stream 1": ("stub-n1-i0", True, 1.0),
    "stream 4": ("stub-n4-i0", True, 1.0),
    "stream 64": ("stub-n64-i0", True, 0.25),
    # chunks 1 ms apart: each its own socket read and client write, as in the bench's streams
    "paced 4": ("stub-n4-i1", True, 0.25),
    "paced 64": ("stub-n64-i1", True, 0.0625),
}
FLOOR = "floor"  # NAME=floor runs bench/relay.py (the bare aiohttp relay) instead of a gateway


async def measure(
    variants: list[tuple[str, Path]], requests: int, rounds: int
) -> dict[tuple[str, str], list[float]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GATEWAY_")}
    env.update({KEY_ENV: KEY, "PYTHONUNBUFFERED": "1"})
    plan = rig.Pinning.plan(True)
    if plan.rig is not None:
        os.sched_setaffinity(0, plan.rig)
    out: dict[tuple[str, str], list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="gateway-stream-setup-") as name:
        tmp = Path(name)
        stub_port = free_port()
        stub = rig.Child(
            "stub", rig.python("bench/stub.py", "--port", str(stub_port)), env, plan.rig, tmp / "stub.log"
        )
        gateways = []
        try:
            for label, tree in variants:
                port, home = free_port(), tmp / label
                home.mkdir()
                config = home / "bench.toml"
                models = sorted({model for model, _, _ in KINDS.values()})
                config.write_text(gateway_config(port, stub_port, models, "memory", home, None))
                args = rig.python("-m", "gateway", "serve", "--config", str(config))
                if label == FLOOR:
                    upstream = f"http://127.0.0.1:{stub_port}"
                    args = rig.python(
                        "bench/relay.py", "--port", str(port), "--upstream", upstream, "--key-env", KEY_ENV
                    )
                child = rig.Child(label, args, env, plan.gateway, home / "gateway.log", cwd=tree)
                url = f"http://127.0.0.1:{port}/v1/chat/completions"
                gateways.append((label, child, load.Path(label, url, {"Content-Type": "application/json"})))
            stub.wait_ready("stub listening")
            for _, child, _ in gateways:
                child.wait_ready("gateway listening")
            for round_ in range(rounds + 1):  # round 0 warms up
                for label, child, path in gateways if round_ % 2 else gateways[::-1]:
                    for kind, (model, streamed, share) in KINDS.items():
                        body = workloads.small_body(model, streamed)
                        count = max(1, int(requests * share))
                        await load.sequential(path, body, 20)
                        before = rig.cpu_seconds(child.pids())
                        await load.sequential(path, body, count)
                        cpu = rig.cpu_seconds(child.pids()) - before
                        if path.errors.count:
                            raise SystemExit(f"{label}: failed requests: {path.errors}")
                        if round_:
                            out.setdefault((label, kind), []).append(cpu / count * 1e6)
        finally:
            for _, child, _ in gateways:
                child.stop()
            stub.stop()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python bench/stream_setup.py", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("variants", nargs="*", help="NAME=TREE: a checkout's gateway (default: this one)")
    parser.add_argument("--requests", type=int, default=600, help="requests per kind and round (default 600)")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    variants = [(v.partition("=")[0], Path(v.partition("=")[2]).resolve()) for v in args.variants]
    results = asyncio.run(measure(variants or [("this", rig.ROOT)], args.requests, args.rounds))
    print("gateway CPU per request, us (each round; median)")
    for label, _ in variants or [("this", rig.ROOT)]:
        medians = {}
        for kind in KINDS:
            values = sorted(results[(label, kind)])
            medians[kind] = values[len(values) // 2]
            print(
                f"  {label:10} {kind:10} "
                + " ".join(f"{v:6.0f}" for v in results[(label, kind)])
                + f"   median {medians[kind]:.0f}"
            )
        setup = medians["stream 1"] - medians["whole"]
        chunk = (medians["stream 64"] - medians["stream 4"]) / 60
        paced = (medians["paced 64"] - medians["paced 4"]) / 60
        print(
            f"  {label:10} a stream's setup above a whole answer: {setup:+.0f} us;"
            f" a chunk sent together: {chunk:.1f} us; a chunk on its own (1 ms apart): {paced:.1f} us"
        )


if __name__ == "__main__":
    main()
