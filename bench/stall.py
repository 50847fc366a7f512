"""Can one request stall the others? Three measures on a `gateway serve` process (any source tree),
in front of the simulators:

- a ~31 MB body of tiny content blocks on every ingress route, while `/healthz` is asked every
  few milliseconds on another connection: the slowest `/healthz` answer is how long the event
  loop was held;
- requests within the default limits (200,000 one-character blocks), accepted and answered, with
  `/healthz` asked meanwhile in the same way;
- N streamed answers whose clients never read: the gateway process's RSS before, with them (once
  it stops growing), and after the write timeout ended them (`--write-timeout`, 60 s by default
  in a config, short here so the run is too).

    python bench/stall.py                      # this tree
    python bench/stall.py --tree ../main       # another checkout's gateway, for a before/after
    python bench/stall.py --only stall         # one of the three measures

Not a test (it measures wall-clock time); tests/security/test_limits.py checks the behaviour.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import multiprocessing
import multiprocessing.synchronize
import os
import statistics
import sys
import tempfile
import time
from multiprocessing.connection import Connection
from pathlib import Path

import aiohttp
import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gateway.simulators.base import Reply, SimulatorHub, free_port  # noqa: E402

KEY = "stall-bench-provider-key-0123"
JSON = {"Content-Type": "application/json"}
BLOCK = {"type": "text", "text": "a"}


def bodies(size: int) -> dict[str, bytes]:
    """Per route, a valid request of about `size` bytes made of one-character blocks."""
    n = size // len(orjson.dumps(BLOCK))
    blocks = [BLOCK] * n
    items = [{"type": "input_text", "text": "a"}] * (size // 37)
    chat_parts = [{"type": "text", "text": "a"}] * n
    return {
        # the reference: as many bytes in one string (nothing to count or decode), refused too
        "one string": orjson.dumps(
            {"model": "claude", "max_tokens": "x", "messages": [{"role": "user", "content": "a" * size}]}
        ),
        "/v1/messages": orjson.dumps(
            {"model": "claude", "max_tokens": 16, "messages": [{"role": "user", "content": blocks}]}
        ),
        "/v1/messages/count_tokens": orjson.dumps(
            {"model": "claude", "messages": [{"role": "user", "content": blocks}]}
        ),
        "/v1/responses": orjson.dumps({"model": "claude", "input": [{"role": "user", "content": items}]}),
        "/v1/chat/completions": orjson.dumps(
            {"model": "claude", "messages": [{"role": "user", "content": chat_parts}]}
        ),
    }


def within_limits(blocks: int) -> dict[str, bytes]:
    """Per route, a streamed request of `blocks` one-character blocks (the default
    `[server] max_blocks` is 200,000): accepted, decoded, repaired, encoded and sent upstream
    (count_tokens: counted by the provider)."""
    text = [{"type": "text", "text": "a"}] * blocks
    items = [{"type": "input_text", "text": "a"}] * blocks
    parts = [{"text": "a"}] * blocks
    return {
        "/v1/messages": orjson.dumps(
            {
                "model": "claude",
                "max_tokens": 16,
                "stream": True,
                "messages": [{"role": "user", "content": text}],
            }
        ),
        "/v1/responses": orjson.dumps(
            {"model": "claude", "stream": True, "input": [{"role": "user", "content": items}]}
        ),
        "/v1/chat/completions": orjson.dumps(
            {"model": "claude", "stream": True, "messages": [{"role": "user", "content": text}]}
        ),
        "/v1beta/models/claude:streamGenerateContent?alt=sse": orjson.dumps(
            {"contents": [{"role": "user", "parts": parts}]}
        ),
        "/v1/messages/count_tokens": orjson.dumps(
            {"model": "claude", "messages": [{"role": "user", "content": text}]}
        ),
    }


def write_config(path: Path, hub: SimulatorHub, port: int, write_timeout: float) -> None:
    path.write_text(
        "\n".join(
            [
                "[server]",
                'host = "127.0.0.1"',
                f"port = {port}",
                "workers = 1",
                'log_level = "warning"',
                f"write_timeout_seconds = {write_timeout}",
                "[providers.claude]",
                'kind = "anthropic"',
                f'base_url = "{hub.base_url("anthropic")}"',
                'api_key_env = "STALL_BENCH_KEY"',
                "[models.claude]",
                'targets = [{ provider = "claude", model = "claude-sonnet-4-5" }]',
            ]
        )
        + "\n"
    )


def healthz_poller(url: str, stop: multiprocessing.synchronize.Event, out: Connection) -> None:
    """In a process of its own: the simulators answering the gateway in the bench's process (a
    200,000-block body to validate, its garbage collections) do not delay the questions."""
    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port))
    latencies = []
    while not stop.is_set():
        started = time.perf_counter()
        conn.request("GET", "/healthz")
        conn.getresponse().read()
        latencies.append(time.perf_counter() - started)
        time.sleep(0.005)
    out.send(latencies)


class Poller:
    """`/healthz` asked every few ms while the block runs: its latencies (p50, max)."""

    def __init__(self, url: str) -> None:
        self.latencies: list[float] = []
        self._stop = multiprocessing.Event()
        self._results, sender = multiprocessing.Pipe(duplex=False)
        self._process = multiprocessing.Process(target=healthz_poller, args=(url, self._stop, sender))

    def __enter__(self) -> Poller:
        self._process.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self.latencies = self._results.recv()
        self._process.join()

    def figures(self) -> str:
        ms = sorted(x * 1000 for x in self.latencies)
        return f"/healthz p50 {statistics.median(ms):.0f} ms, max {ms[-1]:.0f} ms ({len(ms)} asked)"


async def attack(url: str, path: str, body: bytes) -> tuple[int, float, str]:
    """(status, seconds to the answer, /healthz latencies meanwhile)."""
    with Poller(url) as poller:
        await asyncio.sleep(0.2)
        started = time.perf_counter()
        async with aiohttp.ClientSession() as http, http.post(url + path, data=body, headers=JSON) as resp:
            await resp.read()
            status = resp.status
        took = time.perf_counter() - started
        await asyncio.sleep(0.1)
    return status, took, poller.figures()


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


async def stalled_readers(
    url: str, hub: SimulatorHub, pid: int, count: int, write_timeout: float
) -> tuple[float, float, float, int]:
    """RSS before, with `count` streamed answers nobody reads (each 1 MiB of text in deltas of
    12 characters, as the simulator streams; once it stops growing, every stream stalled) and
    after the write timeout ended them; and how many upstream streams were cancelled."""
    simulator = hub.states["anthropic"]
    closed_early = simulator.closed_early
    for _ in range(count):
        hub.states["anthropic"].push(Reply(text="x" * (1 << 20)))
    before = rss_mib(pid)
    body = orjson.dumps(
        {"model": "claude", "max_tokens": 16, "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    )
    head = (
        f"POST /v1/messages HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()
    host, port = url.removeprefix("http://").split(":")
    writers = []
    for _ in range(count):
        reader, writer = await asyncio.open_connection(host, int(port), limit=1024)
        writer.transport.set_write_buffer_limits(0)
        writer.write(head + body)
        writers.append((reader, writer))
        reader._transport.pause_reading()  # type: ignore[attr-defined]  # never read the answer
    with_them, grown = rss_mib(pid), True
    while grown:  # every stream fills what it may buffer
        await asyncio.sleep(3)
        now = rss_mib(pid)
        grown, with_them = now > with_them + 1, now
    await asyncio.sleep(write_timeout + 2)  # the gateway ends each stalled stream
    for _ in range(60):
        if not simulator.open_streams:
            break
        await asyncio.sleep(0.5)
    after = rss_mib(pid)
    for _, writer in writers:
        writer.transport.abort()
    return before, with_them, after, simulator.closed_early - closed_early


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tree", type=Path, default=ROOT, help="the gateway source tree to run")
    parser.add_argument("--size-mb", type=float, default=31.0)
    parser.add_argument("--streams", type=int, default=100)
    parser.add_argument("--write-timeout", type=float, default=10.0, help="[server] write_timeout_seconds")
    parser.add_argument("--blocks", type=int, default=200_000, help="blocks of the accepted requests")
    parser.add_argument(
        "--only", choices=("attack", "accepted", "stall"), help="run one of the three measures"
    )
    args = parser.parse_args()
    tree = args.tree.resolve()
    async with SimulatorHub(api_key=KEY) as hub:
        with tempfile.TemporaryDirectory() as tmp:
            port = free_port()
            config = Path(tmp) / "gateway.toml"
            write_config(config, hub, port, args.write_timeout)
            env = {k: v for k, v in os.environ.items() if not k.startswith("GATEWAY_")}
            env.update(STALL_BENCH_KEY=KEY, PYTHONPATH=str(tree))
            process = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "gateway", "serve", "--config", str(config),
                cwd=tree, env=env, stdout=asyncio.subprocess.PIPE,
            )  # fmt: skip
            try:
                assert process.stdout is not None
                await process.stdout.readline()
                url = f"http://127.0.0.1:{port}"
                print(f"gateway from {tree}")
                with Poller(url) as idle:
                    await asyncio.sleep(1.0)
                print(f"idle: {idle.figures()}")
                for path, body in (
                    bodies(int(args.size_mb * 1e6)).items() if args.only in (None, "attack") else ()
                ):
                    route = "/v1/messages" if path == "one string" else path
                    status, took, worst = await attack(url, route, body)
                    print(
                        f"{path}: {len(body) / 1e6:.1f} MB -> {status} in {took * 1000:.0f} ms;"
                        f" meanwhile {worst}"
                    )
                for path, body in (
                    within_limits(args.blocks).items() if args.only in (None, "accepted") else ()
                ):
                    hub.states["anthropic"].push(Reply(text="ok"))
                    status, took, worst = await attack(url, path, body)
                    print(
                        f"{path}, {args.blocks} blocks: {len(body) / 1e6:.1f} MB -> {status} in"
                        f" {took * 1000:.0f} ms; meanwhile {worst}"
                    )
                if args.only in ("attack", "accepted"):
                    return
                before, with_them, after, cancelled = await stalled_readers(
                    url, hub, process.pid, args.streams, args.write_timeout
                )
                print(
                    f"{args.streams} stalled readers: RSS {before:.0f} MiB -> {with_them:.0f} MiB with them"
                    f" -> {after:.0f} MiB after the write timeout ended them"
                    f" ({cancelled} upstream streams cancelled)"
                )
            finally:
                process.kill()
                await process.wait()


if __name__ == "__main__":
    asyncio.run(main())
