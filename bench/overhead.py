"""Gateway overhead measured as ratios in one run: the same streamed chat requests sent directly to
the openai_chat simulator and through the gateway (which decodes, restores, repairs, re-encodes,
decodes the upstream stream and re-encodes it for the client). Simulator, gateway and client run
in separate processes.

    python bench/overhead.py [--requests 400] [--concurrency 8]

Prints median / p95 latency and time to first byte for both paths, throughput, and the ratios.
Machines here are shared and noisy: compare ratios from one run, never absolute numbers across runs.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
import orjson

from gateway.demo import DEMO_KEY_ENV, TOOLS
from gateway.simulators.base import free_port


def _messages(turns: int) -> list[dict]:
    """A realistic agent transcript: several finished tool round trips before the question."""
    messages: list[dict] = [{"role": "system", "content": "You are a helpful agent."}]
    for i in range(turns):
        messages.append({"role": "user", "content": f"Step {i}: check the weather."})
        call = {
            "id": f"call_{i:024d}",
            "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
        }
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": call["id"], "content": "sunny, 21C"})
        messages.append({"role": "assistant", "content": f"Paris is sunny (step {i})."})
    messages.append({"role": "user", "content": "Summarize."})
    return messages


async def _one(session: aiohttp.ClientSession, url: str, body: bytes, headers: dict) -> tuple[float, float]:
    start = time.perf_counter()
    first = 0.0
    async with session.post(url, data=body, headers=headers) as resp:
        if resp.status != 200:
            raise RuntimeError(f"{url}: {resp.status} {await resp.text()}")
        async for _ in resp.content.iter_any():
            if not first:
                first = time.perf_counter() - start
    return time.perf_counter() - start, first


async def _run(url: str, body: bytes, headers: dict, requests: int, concurrency: int) -> dict:
    latencies: list[float] = []
    firsts: list[float] = []
    queue = iter(range(requests))
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency)) as session:

        async def worker() -> None:
            for _ in queue:
                total, first = await _one(session, url, body, headers)
                latencies.append(total)
                firsts.append(first)

        start = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        elapsed = time.perf_counter() - start
    latencies.sort()
    return {
        "median": statistics.median(latencies),
        "p95": latencies[int(len(latencies) * 0.95) - 1],
        "ttfb": statistics.median(firsts),
        "rps": requests / elapsed,
    }


def _spawn(args: list[str], env: dict[str, str], ready: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    for line in proc.stdout:
        if ready in line:
            return proc
    raise RuntimeError(f"{args[:3]} exited before it was ready")


async def main(requests: int, concurrency: int, turns: int) -> None:
    """Simulators and gateway each run in their own process, as deployed; this process is the
    client. The simulator answers every request with the same streamed text + tool call."""
    sim_port, gw_port = free_port(), free_port()
    env = {**os.environ, DEMO_KEY_ENV: "sim", "PYTHONUNBUFFERED": "1"}
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "bench.toml"
        config.write_text(
            f"""[server]\nport = {gw_port}\nlog_level = "warning"\n
[providers.chat]\nkind = "openai_chat"\nbase_url = "http://127.0.0.1:{sim_port}/openai_chat/v1"
api_key_env = "{DEMO_KEY_ENV}"\n[models.bench]\ntargets = [{{ provider = "chat", model = "gpt-4.1" }}]\n"""
        )
        sim = _spawn(
            [
                sys.executable,
                "-m",
                "gateway.simulators",
                "--port",
                str(sim_port),
                "--api-key",
                "sim",
                "--bench-reply",
            ],
            env,
            "deepseek",
        )
        gateway = _spawn(
            [sys.executable, "-m", "gateway", "serve", "--config", str(config)], env, "listening"
        )
        try:
            messages = _messages(turns)
            direct_body = orjson.dumps(
                {"model": "gpt-4.1", "messages": messages, "tools": TOOLS, "stream": True}
            )
            gateway_body = orjson.dumps(
                {"model": "bench", "messages": messages, "tools": TOOLS, "stream": True}
            )
            auth = {"Authorization": "Bearer sim", "Content-Type": "application/json"}
            plain = {"Content-Type": "application/json"}
            direct_url = f"http://127.0.0.1:{sim_port}/openai_chat/v1/chat/completions"
            gateway_url = f"http://127.0.0.1:{gw_port}/v1/chat/completions"
            await _run(direct_url, direct_body, auth, 20, concurrency)  # warm up both paths
            await _run(gateway_url, gateway_body, plain, 20, concurrency)
            direct = await _run(direct_url, direct_body, auth, requests, concurrency)
            through = await _run(gateway_url, gateway_body, plain, requests, concurrency)
            gateway_rss = _rss_mib(gateway.pid)
        finally:
            for proc in (gateway, sim):
                proc.send_signal(signal.SIGTERM)
                proc.wait(timeout=30)
    print(f"{requests} streamed requests, concurrency {concurrency}, {len(messages)} messages with tools")
    print(f"{'':18}{'direct':>12}{'gateway':>12}{'ratio':>9}")
    for key, label in (("median", "median latency s"), ("p95", "p95 latency s"), ("ttfb", "first byte s")):
        print(f"{label:18}{direct[key]:12.4f}{through[key]:12.4f}{through[key] / direct[key]:9.2f}")
    print(
        f"{'requests/s':18}{direct['rps']:12.1f}{through['rps']:12.1f}{through['rps'] / direct['rps']:9.2f}"
    )
    print(f"gateway process RSS after the run: {gateway_rss:.0f} MiB")


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--turns", type=int, default=10, help="finished tool round trips in the transcript")
    args = parser.parse_args()
    asyncio.run(main(args.requests, args.concurrency, args.turns))
