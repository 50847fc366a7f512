"""Gateway overhead measured as ratios in one run: the same streamed chat requests sent directly to
the openai_chat simulator and through the gateway (which decodes, repairs, re-encodes, decodes the
upstream stream and re-encodes it for the client).

    python bench/overhead.py [--requests 400] [--concurrency 8]

Prints median / p95 latency and time to first byte for both paths, throughput, and the ratios.
Machines here are shared and noisy: compare ratios from one run, never absolute numbers across runs.
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import statistics
import time

import aiohttp
import orjson
from aiohttp import web

from gateway.app import create_app
from gateway.config import config_from_dict
from gateway.demo import DEMO_KEY_ENV, TOOLS
from gateway.simulators.base import Reply, SimulatorHub, ToolCallSpec, free_port

TEXT = "The quick brown fox jumps over the lazy dog. " * 20


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


async def main(requests: int, concurrency: int, turns: int) -> None:
    async with SimulatorHub() as hub:
        state = hub.states["openai_chat"]
        state.default_reply = lambda body: Reply(
            text=TEXT, chunk_size=16, tool_calls=[ToolCallSpec("get_weather", {"city": "Oslo"})]
        )
        port = free_port()
        config = config_from_dict(
            {
                "server": {"port": port},
                "providers": {
                    "chat": {
                        "kind": "openai_chat",
                        "base_url": hub.base_url("openai_chat"),
                        "api_key_env": DEMO_KEY_ENV,
                    }
                },
                "models": {"bench": {"targets": [{"provider": "chat", "model": "gpt-4.1"}]}},
            }
        )
        runner = web.AppRunner(
            create_app(config, {DEMO_KEY_ENV: state.api_key}), access_log=None, handle_signals=False
        )
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        try:
            messages = _messages(turns)
            direct_body = orjson.dumps(
                {"model": "gpt-4.1", "messages": messages, "tools": TOOLS, "stream": True}
            )
            gateway_body = orjson.dumps(
                {"model": "bench", "messages": messages, "tools": TOOLS, "stream": True}
            )
            auth = {"Authorization": f"Bearer {state.api_key}", "Content-Type": "application/json"}
            plain = {"Content-Type": "application/json"}
            direct_url = hub.base_url("openai_chat") + "/chat/completions"
            gateway_url = f"http://127.0.0.1:{port}/v1/chat/completions"
            await _run(direct_url, direct_body, auth, 20, concurrency)  # warm up both paths
            await _run(gateway_url, gateway_body, plain, 20, concurrency)
            direct = await _run(direct_url, direct_body, auth, requests, concurrency)
            through = await _run(gateway_url, gateway_body, plain, requests, concurrency)
        finally:
            await runner.cleanup()
    print(f"{requests} streamed requests, concurrency {concurrency}, {len(messages)} messages with tools")
    print(f"{'':18}{'direct':>12}{'gateway':>12}{'ratio':>9}")
    for key, label in (("median", "median latency s"), ("p95", "p95 latency s"), ("ttfb", "first byte s")):
        print(f"{label:18}{direct[key]:12.4f}{through[key]:12.4f}{through[key] / direct[key]:9.2f}")
    print(
        f"{'requests/s':18}{direct['rps']:12.1f}{through['rps']:12.1f}{through['rps'] / direct['rps']:9.2f}"
    )
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS of this process (simulators + gateway + client): {rss:.0f} MiB")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--turns", type=int, default=10, help="finished tool round trips in the transcript")
    args = parser.parse_args()
    asyncio.run(main(args.requests, args.concurrency, args.turns))
