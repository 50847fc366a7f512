"""The gateway's bench, in one command: every figure of the performance issue measured against an
interleaved direct baseline, with the rig's CPU shares, printed as a table and written as JSON.

    python bench/run.py [--quick] [--workers N] [--event-loop asyncio|uvloop] [--json PATH]

The upstream is bench/stub.py (an instant OpenAI Chat Completions stub), the gateway is
`gateway serve` with a config pointing at it; both are child processes, and this process is the
load generator. With one gateway worker and two or more CPUs, the gateway is pinned to the first
CPU and the stub and the load generator to the others. See bench/README.md for what each figure
means and how to read it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # `python bench/run.py`: make `bench` and `gateway` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import orjson  # noqa: E402

from bench import load, report, rig  # noqa: E402
from bench.figures import Bench, Settings  # noqa: E402
from gateway import eventloop  # noqa: E402
from gateway.simulators.base import free_port  # noqa: E402

KEY_ENV = "BENCH_STUB_KEY"
KEY = "bench-stub-key"
FIGURES = ("c1_latency", "c32_instant", "c64_slow", "streams", "many_streams", "sweep", "memory")


def gateway_config(
    gw_port: int, stub_port: int, models: list[str], store: str, tmp: Path, loop: str | None
) -> str:
    lines = ["[server]", 'host = "127.0.0.1"', f"port = {gw_port}", 'log_level = "warning"']
    if loop is not None:
        lines.append(f'event_loop = "{loop}"')
    lines += ["[store]", f'backend = "{store}"', f'path = "{tmp / "continuity.db"}"']
    lines += [
        "[providers.stub]",
        'kind = "openai_chat"',
        f'base_url = "http://127.0.0.1:{stub_port}/v1"',
        f'api_key_env = "{KEY_ENV}"',
    ]
    for model in models:  # each group has the stub model's own name: one body serves both paths
        lines += [f'[models."{model}"]', f'targets = [{{ provider = "stub", model = "{model}" }}]']
    return "\n".join(lines) + "\n"


def _git_commit() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=rig.ROOT, capture_output=True, text=True, timeout=10
        )
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=rig.ROOT,
            capture_output=True,
            text=True,
            timeout=10,
        )
        return out.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")
    except OSError:
        return "unknown"


def _loop_name() -> str:
    return type(asyncio.get_running_loop()).__module__.split(".")[0]


async def run(args: argparse.Namespace) -> dict[str, Any]:
    settings = Settings.quick() if args.quick else Settings()
    if args.soak is not None:
        settings = Settings(**{**settings.__dict__, "soak": args.soak})
    if args.sweep is not None:
        settings = Settings(**{**settings.__dict__, "sweep": tuple(args.sweep)})
    wanted = args.only or list(FIGURES)
    cpus = rig.available_cpus()
    pinning = rig.Pinning.plan(args.workers or 1, not args.no_pin)
    if pinning.rig is not None:
        os.sched_setaffinity(0, pinning.rig)  # the load generator
    store = args.store or ("memory" if (args.workers or 1) == 1 else "sqlite")
    models = [
        "stub",
        f"stub-d{settings.slow_ms}",
        f"stub-n{settings.chunks}-i{settings.interval_ms}",
        "stub-tool",
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith("GATEWAY_")}
    env.update({KEY_ENV: KEY, "PYTHONUNBUFFERED": "1"})
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="gateway-bench-") as tmp_name:
        tmp = Path(tmp_name)
        stub_port, gw_port = free_port(), free_port()
        config = tmp / "bench.toml"
        config.write_text(gateway_config(gw_port, stub_port, models, store, tmp, args.event_loop))
        stub = rig.Child(
            "stub", rig.python("bench/stub.py", "--port", str(stub_port)), env, pinning.rig, tmp / "stub.log"
        )
        serve = ["-m", "gateway", "serve", "--config", str(config)]
        if args.workers is not None:
            serve += ["--workers", str(args.workers)]
        gateway = rig.Child("gateway", rig.python(*serve), env, pinning.gateway, tmp / "gateway.log")
        try:
            stub.wait_ready("stub listening")
            gateway.wait_ready("gateway listening")
            await asyncio.sleep(1.0)  # let every worker settle before the idle RSS
            idle = rig.rss_mib(gateway.pids())
            direct = load.Path(
                "direct",
                f"http://127.0.0.1:{stub_port}/v1/chat/completions",
                {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"},
            )
            through = load.Path(
                "gateway",
                f"http://127.0.0.1:{gw_port}/v1/chat/completions",
                {"Content-Type": "application/json"},
            )
            bench = Bench(
                settings,
                direct,
                through,
                {"gateway": gateway.pids, "stub": lambda: [stub.pid], "load": lambda: [os.getpid()]},
            )
            await bench.warm_up()
            warm_up_errors = {name: path.errors.count for name, path in bench.paths.items()}
            for name in FIGURES:
                if name not in wanted:
                    continue
                print(f"measuring {name} ...", file=sys.stderr, flush=True)
                if name == "memory":
                    bench.results[name] = await bench.memory(gateway.pids, idle)
                else:
                    bench.results[name] = await getattr(bench, name)()
            processes = len(gateway.pids())
        finally:
            code = gateway.stop()
            stub.stop()
        if code != 0:
            raise RuntimeError(f"the gateway exited with {code}:\n{gateway.stderr_text()}")
    meta = {
        "commit": _git_commit(),
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "python": platform.python_version(),
        "cpus": cpus,
        "pinning": pinning.describe(),
        "workers": args.workers,
        "gateway_processes": processes,
        "store": store,
        "event_loop": args.event_loop
        or f"auto ({'uvloop' if eventloop.loop_factory('auto') else 'asyncio'})",
        "rig_loop": _loop_name(),
        "warm_up_errors": warm_up_errors,
        "quick": args.quick,
        "settings": settings.__dict__,
        "seconds": round(time.monotonic() - started, 1),
    }
    return {"meta": meta, "figures": bench.results}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python bench/run.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes: checks the bench, measures little")
    parser.add_argument("--workers", type=int, help="gateway serve --workers N (default: the gateway's own)")
    parser.add_argument(
        "--store", choices=("memory", "sqlite"), help="default: memory, sqlite with workers > 1"
    )
    parser.add_argument(
        "--event-loop", choices=("asyncio", "uvloop"), help="the gateway's [server] event_loop"
    )
    parser.add_argument("--soak", type=int, help="requests in the RSS soak (default 100000, --quick 1500)")
    parser.add_argument("--sweep", type=int, nargs="+", help="transcript sizes (default 10 100 1000 5000)")
    parser.add_argument("--only", nargs="+", choices=FIGURES, help="measure only these figures")
    parser.add_argument("--no-pin", action="store_true", help="do not pin the gateway and the rig to CPUs")
    parser.add_argument("--json", default="bench/last-run.json", help="where to write the results")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    results = eventloop.run(run(args))  # the rig is as fast as it can be: uvloop when installed
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_bytes(orjson.dumps(results, option=orjson.OPT_INDENT_2))
    print(report.table(results))
    print(f"\nresults written to {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
