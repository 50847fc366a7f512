"""The load generator's measurements, one path (direct or through the gateway) at a time. Every
request must answer 200; anything else is counted in `errors` and never timed as a success.
Requests go through bench/wire.py's client (asyncio protocols and llhttp, not aiohttp's client:
the rig's own cost per request is kept small, see its docstring)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from bench import wire

# what aiohttp's client sent besides the path's own headers (the load generator used it until the
# ninth round of issue 23): the gateway sees the same requests as before
DEFAULT_HEADERS = {
    "Accept": "*/*",
    "Accept-Encoding": "gzip, deflate",
    "User-Agent": "Python/3.11 bench-load",
}
# a body this large is written beside its head rather than copied into one buffer with it
JOIN_BELOW = 64 * 1024
# no request of the bench may take longer (a hung path fails its figure, not the whole bench)
TIMEOUT = 300.0


@dataclass
class Errors:
    count: int = 0
    first: str = ""

    def add(self, what: str) -> None:
        self.count += 1
        if not self.first:
            self.first = what[:300]


@dataclass
class Path:
    """Where requests go and how they are addressed: the same body shape, its own model name."""

    name: str  # "direct" | "gateway"
    url: str
    headers: Mapping[str, str]
    errors: Errors = field(default_factory=Errors)
    _heads: dict[tuple[int, tuple[tuple[str, str], ...]], bytes] = field(default_factory=dict, repr=False)

    def request(self, body: bytes, headers: Mapping[str, str] | None = None) -> wire.Request:
        """The whole request: its head rendered once per body length (and extra headers), joined
        to a small body (one write, one packet), beside a large one (no copy of megabytes)."""
        key = (len(body), tuple(headers.items()) if headers else ())
        head = self._heads.get(key)
        if head is None:
            every = {**self.headers, **(headers or {}), **DEFAULT_HEADERS}
            head = self._heads[key] = wire.request_head(self.url, every, len(body))
        return head + body if len(body) < JOIN_BELOW else (head, body)

    async def post(self, http: wire.Client, body: bytes, headers: Mapping[str, str] | None = None):
        """The answer's body, or None (counted) when it is not a 200."""
        try:
            status, data = await http.exchange(self.request(body, headers))
        except wire.WireError as exc:
            self.errors.add(repr(exc))
            return None
        if status == 200:
            return data
        self.errors.add(f"{status} {data[:200]!r}")
        return None


def client(path: Path, concurrency: int) -> wire.Client:
    """Keep-alive connections to the path's origin, at most one per concurrent request."""
    return wire.Client(path.url, concurrency)


async def sequential(path: Path, body: bytes, count: int) -> list[float]:
    """c=1: one request after another on one connection; each one's latency in seconds."""
    out = []
    async with client(path, 1) as http, asyncio.timeout(TIMEOUT):
        for _ in range(count):
            start = time.perf_counter()
            if await path.post(http, body) is not None:
                out.append(time.perf_counter() - start)
    return out


async def throughput(
    path: Path, body: bytes, concurrency: int, seconds: float, headers: list[Mapping[str, str]] | None = None
) -> tuple[int, float]:
    """`concurrency` requests always in flight for `seconds`: (answered with 200, elapsed).
    `headers`, if given, are cycled through request by request (e.g. session ids)."""
    done = 0
    sent = 0
    async with client(path, concurrency) as http, asyncio.timeout(seconds + TIMEOUT):
        start = time.perf_counter()
        deadline = start + seconds

        async def worker() -> None:
            nonlocal done, sent
            while time.perf_counter() < deadline:
                extra = headers[sent % len(headers)] if headers else None
                sent += 1
                if await path.post(http, body, extra) is not None:
                    done += 1

        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return done, time.perf_counter() - start


async def count_requests(path: Path, body: bytes, concurrency: int, total: int, headers=None) -> float:
    """Send exactly `total` requests with `concurrency` in flight; the elapsed seconds."""
    sent = 0
    async with client(path, concurrency) as http, asyncio.timeout(TIMEOUT + total / 100):
        start = time.perf_counter()

        async def worker() -> None:
            nonlocal sent
            while sent < total:
                extra = headers[sent % len(headers)] if headers else None
                sent += 1
                await path.post(http, body, extra)

        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return time.perf_counter() - start


@dataclass
class StreamTimes:
    first: list[float] = field(default_factory=list)  # request sent -> first content chunk, per stream
    gaps: list[float] = field(default_factory=list)  # between consecutive chunks, every stream
    worst_gap: float = 0.0  # the longest gap in any stream (a stall)
    chunks: int = 0


async def streams(path: Path, body: bytes, count: int, expect_chunks: int) -> StreamTimes:
    """`count` streamed requests at once. A chunk is an SSE `data:` event carrying content; its
    time is when the read that completed it returned (events read together are 0 apart)."""
    times = StreamTimes()
    marker = b'"content":"tok'  # the stub's content chunks, as the gateway re-encodes them too
    start_line = asyncio.Event()

    async def one(http: wire.Client) -> None:
        await start_line.wait()
        start = time.perf_counter()
        last = 0.0
        seen = 0

        def sink(data: bytes, now: float) -> None:
            nonlocal last, seen
            n = data.count(marker)
            if not n:
                return
            if not seen:
                times.first.append(now - start)
            elif now != last:  # a read's later events are 0 apart from its first
                gap = now - last
                times.gaps.append(gap)
                times.worst_gap = max(times.worst_gap, gap)
            else:
                times.gaps.append(0.0)
            times.gaps.extend([0.0] * (n - 1))
            seen += n
            last = now

        try:
            status, data = await http.exchange(path.request(body), sink)
        except wire.WireError as exc:
            path.errors.add(repr(exc))
            return
        if status != 200:
            path.errors.add(f"{status} {data[:200]!r}")
            return
        times.chunks += seen
        if seen != expect_chunks:
            path.errors.add(f"stream had {seen} content chunks, expected {expect_chunks}")

    async with client(path, count) as http, asyncio.timeout(TIMEOUT):
        tasks = [asyncio.create_task(one(http)) for _ in range(count)]
        await asyncio.sleep(0)
        start_line.set()
        await asyncio.gather(*tasks)
    return times


async def agent_turn(path: Path, http: wire.Client, body: bytes) -> tuple[float, dict[str, Any] | None]:
    """One non-streamed agent request: (latency, the assistant message answered)."""
    start = time.perf_counter()
    data = await path.post(http, body)
    elapsed = time.perf_counter() - start
    if data is None:
        return elapsed, None
    return elapsed, orjson.loads(data)["choices"][0]["message"]
