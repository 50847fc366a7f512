"""Where the gateway's garbage collections happen under bursts of streams, in its own process:
the real app (as bench/served.py runs it) behind a load generator in a child process that sends
what `bench/run.py`'s stream figures send, round after round: a fill burst, half a second idle,
a timed burst. Each collection is put in the phase it ran in and marked `busy` (requests in
flight: every open stream's next chunk waits for it) or `idle`; its CPU time (thread_time, so
other programs on the machine do not count) is summed per phase.

    python bench/young_gc.py [--rounds 8] [--streams 128] [--ring BYTES] [--tree PATH]

First 3,000 small requests and a double burst warm it up (`warm`). `--ring`: the inspector
ring's max_bytes (default: the config's; a small ring is full and evicting, as after a long
run). `--tree`: another checkout's gateway package (the rig stays this checkout's).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python bench/young_gc.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--streams", type=int, default=128)
    parser.add_argument("--ring", type=int, default=0, help="the inspector ring's max_bytes")
    parser.add_argument("--tree", type=Path, default=ROOT, help="whose gateway package (default: this)")
    return parser.parse_args()


ARGS = _args()
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ARGS.tree))  # its gateway (and bench's rig helpers); stub and load are ours
import bench.rig as rig  # noqa: E402
from bench.run import KEY_ENV, gateway_config  # noqa: E402

STREAMED = "stub-n64-i10"
# the load generator: reads "small N" / "burst N" lines, answers "done ERRORS" after each
LOAD = r"""
import asyncio, sys
sys.path.insert(0, sys.argv[2])
from bench import load, workloads
port = int(sys.argv[1])
path = load.Path("gw", f"http://127.0.0.1:{port}/v1/chat/completions", {"Content-Type": "application/json"})

async def main():
    loop = asyncio.get_running_loop()
    stdin = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stdin), sys.stdin)
    while line := await stdin.readline():
        kind, n = line.split()
        if kind == b"small":
            await load.count_requests(path, workloads.small_body("stub"), 32, int(n))
        else:
            await load.streams(path, workloads.small_body(sys.argv[3], stream=True), int(n), 64)
        sys.stdout.write(f"done {path.errors.count}\n")
        sys.stdout.flush()

try:
    import uvloop
except ImportError:
    asyncio.run(main())
else:
    uvloop.run(main())
"""


async def measure(args: argparse.Namespace, tmp: Path) -> None:
    from gateway.access_log import configure_logging
    from gateway.app import IN_FLIGHT, create_app
    from gateway.config import load_config
    from gateway.redaction import secrets_redactor
    from gateway.serve import start, tune_garbage_collector
    from gateway.simulators.base import free_port

    stub_port, port = free_port(), free_port()
    env = {**os.environ, KEY_ENV: "sk-bench-0123456789abcdefghijklmnop"}
    stub_args = rig.python("bench/stub.py", "--port", str(stub_port))
    stub = rig.Child("stub", stub_args, env, None, tmp / "stub.log", cwd=ROOT)
    stub.wait_ready("stub listening")
    path = tmp / "gateway.toml"
    path.write_text(gateway_config(port, stub_port, ["stub", STREAMED], "memory", tmp, None))
    config = load_config(path, env=env)
    if args.ring:
        config = config.model_copy(
            update={"inspector": config.inspector.model_copy(update={"max_bytes": args.ring})}
        )
    configure_logging(config.server.log_level, secrets_redactor(config, env), (tmp / "gateway.log").open("w"))
    app = create_app(config, env)
    in_flight = app[IN_FLIGHT]
    runner = await start(app, config)
    tune_garbage_collector()
    load = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        LOAD,
        str(port),
        str(ROOT),
        STREAMED,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    assert load.stdin is not None and load.stdout is not None
    phase = "warm"
    started = 0.0
    runs: dict[tuple[str, int, str], list[float]] = defaultdict(list)

    def heard(stage: str, info: dict[str, int]) -> None:
        nonlocal started
        if stage == "start":
            started = time.thread_time()
        else:
            where = "busy" if len(in_flight) else "idle"
            runs[(phase, info["generation"], where)].append(time.thread_time() - started)

    async def send(command: str) -> None:
        assert load.stdin is not None and load.stdout is not None
        load.stdin.write(command.encode() + b"\n")
        line = await load.stdout.readline()
        if line != b"done 0\n":
            raise SystemExit(f"load generator: {line!r}")

    gc.callbacks.append(heard)
    try:
        await send("small 3000")
        await send(f"burst {2 * args.streams}")
        for _ in range(args.rounds):
            phase = "fill"
            await send(f"burst {args.streams}")
            phase = "idle"
            await asyncio.sleep(0.5)
            phase = "timed"
            await send(f"burst {args.streams}")
            phase = "idle"
    finally:
        gc.callbacks.remove(heard)
        load.stdin.close()
        await load.wait()
        await runner.cleanup()
        stub.stop()
    print(f"{args.rounds} rounds of {args.streams} streams (fill, 0.5 s idle, timed); collections by phase:")
    for (name, generation, where), spans in sorted(runs.items()):
        print(
            f"  {name:5} gen {generation} {where}: {len(spans)}, CPU {sum(spans) * 1e3:.1f} ms in all,"
            f" the longest {max(spans) * 1e3:.2f} ms"
        )


def main() -> None:
    args = ARGS
    try:
        import uvloop
    except ImportError:
        uvloop = None
    with tempfile.TemporaryDirectory(prefix="gateway-young-gc-") as tmp:
        (uvloop.run if uvloop is not None else asyncio.run)(measure(args, Path(tmp)))


if __name__ == "__main__":
    main()
