"""Agent turns through the whole gateway in one process, for a profile of what a cold and a warm
turn cost (the sweep's workload: bench/workloads.py). The gateway app, the bench stub and the
client share one event loop on loopback; the figure is the gateway's own CPU per turn: the
process's CPU time over the turn, minus the same turn sent to the stub directly.

    python bench/turns.py [--messages 1000] [--sessions 10] [--profile cold|warm|after] [--tree PATH]
                          [--dialect chat|responses|gemini]

`warm` is the turn after a session's first (cold) one, as the sweep's; `after` the turn after that
(a turn going on from one that went on: an agent loop's steady state).

`--profile`: a cProfile of those turns (the gateway's functions, by cumulative time). `--tree`:
another checkout's gateway package (the same rig measures main and a branch). `--dialect`: the
client's dialect (bench/dialects.py: Codex's Responses, Gemini CLI's Gemini; the same transcript,
the same Chat stub behind; direct is the Chat body of the same messages)."""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import importlib.util
import pstats
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
    parser.add_argument("--sessions", type=int, default=10)
    parser.add_argument("--profile", choices=("cold", "warm", "after"))
    parser.add_argument("--top", type=int, default=45)
    parser.add_argument("--dump", type=Path, help="also write the profile's stats to this file")
    parser.add_argument(
        "--cpu", action="store_true", help="profile CPU time (process_time: others' load does not count)"
    )
    parser.add_argument("--tree", type=Path, default=ROOT)
    parser.add_argument("--dialect", choices=("chat", "responses", "gemini"), default="chat")
    return parser.parse_args()


ARGS = _args()
sys.path.insert(0, str(ARGS.tree))
sys.path.insert(1, str(ROOT))

import aiohttp  # noqa: E402
import orjson  # noqa: E402
from aiohttp import web  # noqa: E402

from bench import workloads  # noqa: E402
from bench.stub import PATH  # noqa: E402
from gateway.app import create_app  # noqa: E402
from gateway.config.loading import config_from_dict  # noqa: E402
from gateway.metrics import Metrics  # noqa: E402
from gateway.serve import tune_garbage_collector  # noqa: E402

MODEL = "stub-tool"
KEY_ENV = "BENCH_TURNS_KEY"
TOOLS = workloads.tools()


async def _site(app: web.Application) -> tuple[web.AppRunner, int]:
    runner = web.AppRunner(app, handle_signals=False, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    return runner, site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]


def _dialects() -> Any:
    """bench/dialects.py of this checkout (`--tree` names where `bench` itself is imported from)."""
    spec = importlib.util.spec_from_file_location("bench_dialects", ROOT / "bench" / "dialects.py")
    assert spec is not None and spec.loader is not None
    module = sys.modules[spec.name] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.DIALECTS


DIALECT = _dialects()[ARGS.dialect]


def _stub() -> Any:
    """bench/stub.py's Stub of this checkout (as `_dialects`: `--tree` may hold an older one)."""
    spec = importlib.util.spec_from_file_location("bench_stub", ROOT / "bench" / "stub.py")
    assert spec is not None and spec.loader is not None
    module = sys.modules[spec.name] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.Stub()


async def _turn(http: aiohttp.ClientSession, url: str, body: bytes) -> tuple[float, dict]:
    started = time.process_time()
    async with http.post(url, data=body, headers={"Content-Type": "application/json"}) as response:
        answer = await response.read()
        if response.status != 200:
            raise SystemExit(f"{url}: {response.status} {answer[:300]!r}")
    return time.process_time() - started, orjson.loads(answer)


async def _above_direct(
    http: aiohttp.ClientSession,
    direct: str,
    gateway: str,
    messages: list[dict],
    profile: cProfile.Profile | None,
    kind: str,
) -> tuple[float, dict]:
    """The turn's CPU through the gateway minus sent direct, and the gateway's answer (as a Chat
    message); profiled when `profile` is given and `--profile` names this kind of turn."""
    base, _ = await _turn(http, direct, workloads.agent_body(MODEL, messages, TOOLS))
    body = DIALECT.body(MODEL, messages, TOOLS)
    profiling = profile is not None and ARGS.profile == kind
    if profiling:
        profile.enable()
    try:
        took, answer = await _turn(http, gateway, body)
    finally:
        if profiling:
            profile.disable()
    return took - base, DIALECT.answer(answer)


async def main() -> None:
    stub_server = await _stub().serve("127.0.0.1", 0)
    stub_port = stub_server.sockets[0].getsockname()[1]
    config = config_from_dict(
        {
            "server": {"host": "127.0.0.1", "port": 8000},  # not listened on: _site picks a port
            "providers": {
                "stub": {
                    "kind": "openai_chat",
                    "base_url": f"http://127.0.0.1:{stub_port}/v1",
                    "api_key_env": KEY_ENV,
                }
            },
            "models": {MODEL: {"targets": [{"provider": "stub", "model": MODEL}]}},
        }
    )
    gw_runner, gw_port = await _site(create_app(config, {KEY_ENV: "k"}, Metrics()))
    tune_garbage_collector()  # as `gateway serve` does once serving
    direct = f"http://127.0.0.1:{stub_port}{PATH}"
    gateway = f"http://127.0.0.1:{gw_port}{DIALECT.path(MODEL)}"
    profile = None
    if ARGS.profile:
        profile = cProfile.Profile(time.process_time) if ARGS.cpu else cProfile.Profile()
    costs: dict[str, list[float]] = {"cold": [], "warm": [], "after": []}
    try:
        async with aiohttp.ClientSession() as http:
            for n in range(ARGS.sessions + 2):  # the first two warm the interpreter
                seed = f"turns{ARGS.messages}x{n}x{time.monotonic_ns() % 10**9}"
                messages = workloads.agent_messages(ARGS.messages, seed)
                profiled = profile if n >= 2 else None
                cold, answer = await _above_direct(http, direct, gateway, messages, profiled, "cold")
                messages = workloads.next_turn(messages, answer, seed)
                warm, answer = await _above_direct(http, direct, gateway, messages, profiled, "warm")
                # the turn after: an agent loop's steady state (a turn going on from one that went on)
                turn = workloads.next_turn(messages, answer, seed)
                after, _ = await _above_direct(http, direct, gateway, turn, profiled, "after")
                if n >= 2:
                    costs["cold"].append(cold * 1000)
                    costs["warm"].append(warm * 1000)
                    costs["after"].append(after * 1000)
    finally:
        await gw_runner.cleanup()
        stub_server.close()
    for kind, values in costs.items():
        print(
            f"{ARGS.messages} messages {kind} ({ARGS.dialect}): gateway CPU above direct, median"
            f" {statistics.median(values):.2f} ms (min {min(values):.2f}, n={len(values)})"
        )
    if profile is not None:
        stats = pstats.Stats(profile)
        if ARGS.dump:
            stats.dump_stats(ARGS.dump)
        stats.sort_stats("cumulative").print_stats(ARGS.top)
        stats.sort_stats("tottime").print_stats(25)


if __name__ == "__main__":
    asyncio.run(main())
