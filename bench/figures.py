"""Each figure of the bench: how it is measured, against the interleaved direct baseline, and what
it reports (milliseconds, requests per second, MiB). Results are keyed by path: "direct" (to the
stub) and one entry per gateway variant (usually one, "gateway"); `added` is a gateway variant
minus direct. With the floor measured (the default), `above_floor` is a gateway variant minus the
floor: the gateway's own cost, without what any aiohttp relay in its place would cost."""

from __future__ import annotations

import asyncio
import itertools
import math
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from bench import load, rig, workloads
from bench.load import Path

T = TypeVar("T")
DIRECT = "direct"
FLOOR = "floor"  # the bare relay (bench/relay.py): the least any aiohttp gateway can cost
Pids = Callable[[], list[int]]


@dataclass(frozen=True)
class Settings:
    rounds: int = 5  # interleaved rounds per figure (each path once per round)
    c1_requests: int = 300  # per round and path
    seconds: float = 2.0  # per throughput round and path
    streams: int = 128
    chunks: int = 64
    interval_ms: int = 10
    stream_rounds: int = 3
    many_streams: int = 512
    sweep: tuple[int, ...] = (10, 100, 1000, 5000)
    sweep_budget: int = 20000  # messages sent per size and path (bounds the repetitions)
    soak: int = 100_000
    slow_ms: int = 20

    @classmethod
    def quick(cls) -> Settings:
        return cls(
            rounds=2,
            c1_requests=40,
            seconds=0.3,
            streams=16,
            chunks=8,
            stream_rounds=1,
            many_streams=32,
            sweep=(10, 100),
            sweep_budget=300,
            soak=1500,
        )


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100); NaN for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def ms(seconds: float) -> float:
    return round(seconds * 1000, 3)


def _median(values: Sequence[float]) -> float:
    return percentile(values, 50)


def _mean_us(nanoseconds: Sequence[int]) -> float:
    return round(sum(nanoseconds) / len(nanoseconds) / 1000, 1) if nanoseconds else math.nan


def _quantiles(values: Sequence[float]) -> dict[str, float]:
    return {"p50": ms(percentile(values, 50)), "p99": ms(percentile(values, 99))}


@dataclass
class CpuTotals:
    """CPU seconds of each part of the rig summed over a path's rounds, and their wall time."""

    seconds: dict[str, float] = field(default_factory=dict)
    wall: float = 0.0

    def add(self, shares: dict[str, float], wall: float) -> None:
        for name, share in shares.items():
            self.seconds[name] = self.seconds.get(name, 0.0) + share * wall
        self.wall += wall

    def shares(self) -> dict[str, float]:
        return {name: round(s / self.wall, 3) for name, s in self.seconds.items()} if self.wall else {}


class Bench:
    """The direct path and each gateway variant to the same upstream stub, the rig's processes,
    and the measured figures."""

    def __init__(
        self,
        settings: Settings,
        paths: dict[str, Path],
        gateways: dict[str, Pids],
        floor: str | None,
        rig_parts: dict[str, Pids],
        connects: Callable[[], Awaitable[int]] | None = None,
    ) -> None:
        self.s = settings
        self.paths = paths  # "direct" first, then the gateway variants
        self.names = list(paths)
        self.variants = [name for name in self.names if name != DIRECT]
        self.gateways = gateways  # variant -> its processes' pids (the workers can change)
        self.floor = floor  # the variant that is the bare relay (None: not measured)
        self.above = [name for name in self.variants if name != floor] if floor else []
        self.rig_parts = rig_parts  # "stub", "load" -> pids
        self.connects = connects  # the connections the stub has accepted so far (None: not counted)
        self.results: dict[str, Any] = {}

    def meter(self, path: str) -> rig.CpuMeter:
        """The rig's CPU while `path` is measured: "gateway" is that variant's processes (the first
        variant's during direct rounds, when it idles)."""
        gateway = self.gateways[path if path != DIRECT else self.variants[0]]
        return rig.CpuMeter({"gateway": gateway(), **{name: pids() for name, pids in self.rig_parts.items()}})

    async def interleaved(
        self,
        rounds: int,
        measure: Callable[[Path], Awaitable[T]],
        units: Callable[[T], int],
        before: Callable[[Path], Awaitable[object]] | None = None,
    ) -> tuple[dict[str, list[T]], dict[str, Any]]:
        """`rounds` rounds of every path, the order reversed every other round (ABBA...), so that a
        change in the machine's load hits every path alike. Returns the per-round results per path,
        and per path the CPU shares, the errors and (gateway variants) the gateway's CPU time per
        unit of work (`units` of a round's result: requests, or chunks), which other programs on
        the machine change less than they change wall-clock figures. `before`, if given, runs
        untimed and unmetered before each round of a path (e.g. filling its connection pool)."""
        out: dict[str, list[T]] = {name: [] for name in self.names}
        cpu = {name: CpuTotals() for name in self.names}
        errors_before = {name: path.errors.count for name, path in self.paths.items()}
        # connections the stub accepted while a path was measured: a gateway's upstream connects
        # (direct: the load generator's own); only one path is measured at a time
        connects: dict[str, list[int]] = {name: [] for name in self.names}
        connects_before: dict[str, list[int]] = {name: [] for name in self.names}  # by `before`
        for r in range(rounds):
            for name in self.names if r % 2 == 0 else self.names[::-1]:
                opened = await self.connects() if self.connects else 0
                if before is not None:
                    await before(self.paths[name])
                    if self.connects:
                        filled = await self.connects()
                        connects_before[name].append(filled - opened)
                        opened = filled
                meter = self.meter(name)
                start = time.monotonic()
                out[name].append(await measure(self.paths[name]))
                cpu[name].add(meter.shares(), time.monotonic() - start)
                if self.connects:
                    connects[name].append(await self.connects() - opened)
        per_unit = {}
        for name in self.variants:
            done = sum(units(result) for result in out[name])
            used = cpu[name].seconds.get("gateway", 0.0)
            per_unit[name] = round(used / done * 1e6, 1) if done else math.nan
        # the rig's own CPU per unit (the stub and the load generator, every path): what it takes
        # from the core they share (small, or the rig rather than the relay sets the pace)
        rig_unit = {}
        for name in self.names:
            done = sum(units(result) for result in out[name])
            used = sum(cpu[name].seconds.get(part, 0.0) for part in self.rig_parts)
            rig_unit[name] = round(used / done * 1e6, 1) if done else math.nan
        extra = {
            "cpu": {name: cpu[name].shares() for name in self.names},
            "gateway_cpu_us_per_unit": per_unit,
            "rig_cpu_us_per_unit": rig_unit,
            "above_floor_cpu_us_per_unit": {
                name: round(per_unit[name] - per_unit[self.floor], 1) for name in self.above
            },
            "errors": {name: path.errors.count - errors_before[name] for name, path in self.paths.items()},
        }
        if self.connects:
            extra["upstream_connects"] = connects  # per round, per path
            if before is not None:
                extra["upstream_connects_before"] = connects_before
        return out, extra

    def _added(self, values: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
        return {
            name: {q: round(values[name][q] - values[DIRECT][q], 3) for q in values[DIRECT]}
            for name in self.variants
        }

    def _above_floor(self, values: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
        """Each gateway variant minus the floor (its own cost); empty when the floor is not measured."""
        return {
            name: {q: round(values[name][q] - values[self.floor][q], 3) for q in values[name]}
            for name in self.above
        }

    def _of_floor(self, values: dict[str, float]) -> dict[str, float]:
        base = values[self.floor] if self.floor else 0
        return {name: round(values[name] / base, 3) if base else math.nan for name in self.above}

    async def warm_up(self) -> None:
        """Untimed: every connection pool filled to the concurrency the figures use (a stream
        figure would otherwise time the gateway opening its upstream connections)."""
        body = workloads.small_body("stub")
        streamed = workloads.small_body(self._stream_model(), stream=True)
        for path in self.paths.values():
            await load.throughput(path, body, 64, 0.5)
            await load.streams(path, streamed, self.s.many_streams, self.s.chunks)

    # -- the figures ---------------------------------------------------------------------------
    async def c1_latency(self) -> dict[str, Any]:
        body = workloads.small_body("stub")
        runs, extra = await self.interleaved(
            self.s.rounds, lambda p: load.sequential(p, body, self.s.c1_requests), len
        )
        pooled = {name: list(itertools.chain.from_iterable(runs[name])) for name in self.names}
        latency = {name: _quantiles(values) for name, values in pooled.items()}
        return {
            "requests": {name: len(values) for name, values in pooled.items()},
            "latency_ms": latency,
            "added_ms": self._added(latency),
            "above_floor_ms": self._above_floor(latency),
            **extra,
        }

    async def _rps(self, model: str, concurrency: int) -> tuple[dict[str, float], dict[str, Any]]:
        body = workloads.small_body(model)

        async def measure(path: Path) -> tuple[int, float]:
            return await load.throughput(path, body, concurrency, self.s.seconds)

        runs, extra = await self.interleaved(self.s.rounds, measure, lambda run: run[0])
        rps = {name: round(_median([done / took for done, took in runs[name]]), 1) for name in self.names}
        return rps, extra

    async def c32_instant(self) -> dict[str, Any]:
        rps, extra = await self._rps("stub", 32)
        ratio = {
            name: round(rps[name] / rps[DIRECT], 3) if rps[DIRECT] else math.nan for name in self.variants
        }
        return {"rps": rps, "ratio": ratio, "of_floor": self._of_floor(rps), **extra}

    async def c64_slow(self) -> dict[str, Any]:
        rps, extra = await self._rps(f"stub-d{self.s.slow_ms}", 64)
        # the no-queue bound: every one of the 64 in flight takes the upstream delay plus the direct
        # c=1 round trip, and nothing waits in a queue
        c1 = self.results.get("c1_latency", {}).get("latency_ms", {}).get(DIRECT, {}).get("p50", 0.0)
        bound = 64 / ((self.s.slow_ms + c1) / 1000)
        return {
            "rps": rps,
            "bound_rps": round(bound, 1),
            "of_bound": {name: round(value / bound, 3) for name, value in rps.items()},
            "of_floor": self._of_floor(rps),
            **extra,
        }

    def _stream_model(self) -> str:
        return f"stub-n{self.s.chunks}-i{self.s.interval_ms}"

    async def _streams(self, count: int, rounds: int) -> tuple[dict[str, load.StreamTimes], dict[str, Any]]:
        body = workloads.small_body(self._stream_model(), stream=True)

        async def fill(path: Path) -> None:
            # every path's upstream pool holds `count` live connections when its burst starts:
            # pools keep idle connections for a keep-alive time (15 s: aiohttp's, the gateway's)
            # and reuse them in different orders (aiohttp's oldest first keeps every pooled one
            # alive under steady load, the gateway's newest first lets those beyond the recent
            # concurrency expire), so after minutes of other figures one path would time
            # `count - 64` connects in its burst and another none. The stub's connects during
            # the timed burst are reported (`upstream_connects`: 0 for a warm gateway)
            await load.streams(path, body, count, self.s.chunks)
            await asyncio.sleep(0.5)  # the finished streams' bookkeeping done before the timing

        runs, extra = await self.interleaved(
            rounds, lambda p: load.streams(p, body, count, self.s.chunks), lambda times: times.chunks, fill
        )
        pooled = {}
        for name in self.names:
            merged = load.StreamTimes()
            for times in runs[name]:
                merged.first += times.first
                merged.gaps += times.gaps
                merged.worst_gap = max(merged.worst_gap, times.worst_gap)
                merged.chunks += times.chunks
            pooled[name] = merged
        return pooled, extra

    async def streams(self) -> dict[str, Any]:
        pooled, extra = await self._streams(self.s.streams, self.s.stream_rounds)
        first = {name: _quantiles(t.first) for name, t in pooled.items()}
        gaps = {name: _quantiles(t.gaps) for name, t in pooled.items()}
        return {
            "streams": self.s.streams,
            "chunks": self.s.chunks,
            "interval_ms": self.s.interval_ms,
            "first_chunk_ms": first,
            "gap_ms": gaps,
            "worst_gap_ms": {name: ms(t.worst_gap) for name, t in pooled.items()},
            "added_first_chunk_ms": self._added(first),
            "added_gap_ms": self._added(gaps),
            "above_floor_first_chunk_ms": self._above_floor(first),
            "above_floor_gap_ms": self._above_floor(gaps),
            **extra,
        }

    async def many_streams(self) -> dict[str, Any]:
        pooled, extra = await self._streams(self.s.many_streams, 1)
        return {
            "streams": self.s.many_streams,
            "chunks": self.s.chunks,
            "worst_gap_ms": {name: ms(t.worst_gap) for name, t in pooled.items()},
            "above_floor_worst_gap_ms": {
                name: ms(pooled[name].worst_gap - pooled[self.floor].worst_gap) for name in self.above
            },
            "first_chunk_p99_ms": {name: ms(percentile(t.first, 99)) for name, t in pooled.items()},
            "gap_p99_ms": {name: ms(percentile(t.gaps, 99)) for name, t in pooled.items()},
            **extra,
        }

    async def sweep(self) -> dict[str, Any]:
        """The agent transcript sweep, c=1, non-streamed: `cold` is a session's first request of
        that length; `warm` is turn N+1 of a session whose turn N the same path just served."""
        tool_defs = workloads.tools()
        sizes: dict[str, Any] = {}
        for size in self.s.sweep:
            reps = max(3, min(30, self.s.sweep_budget // size))

            async def measure(path: Path, size: int = size, reps: int = reps) -> dict[str, list[float]]:
                cold, warm = [], []
                # the gateway's CPU per cold and per warm turn (the round's CPU per request mixes
                # both): read before each turn's write, once the next body is built, so a turn's
                # figure holds what it left for after its answer (its bookkeeping) too
                gateway = self.gateways[path.name]() if path.name != DIRECT else []
                cpu: dict[str, list[int]] = {"cold": [], "warm": []}
                async with load.client(path, 1) as http:
                    used = rig.cpu_ns(gateway)
                    for rep in range(reps):
                        seed = f"{path.name[:3]}{size}x{rep}x{time.monotonic_ns() % 10**9}"
                        messages = workloads.agent_messages(size, seed)
                        first = workloads.agent_body("stub-tool", messages, tool_defs)
                        before, used = used, rig.cpu_ns(gateway)
                        if rep:
                            cpu["warm"].append(used - before)
                        took, answer = await load.agent_turn(path, http, first)
                        if answer is None:
                            continue
                        cold.append(took)
                        turn = workloads.next_turn(messages, answer, seed)
                        body = workloads.agent_body("stub-tool", turn, tool_defs)
                        before, used = used, rig.cpu_ns(gateway)
                        cpu["cold"].append(used - before)
                        took, answer = await load.agent_turn(path, http, body)
                        if answer is not None:
                            warm.append(took)
                    await asyncio.sleep(0.05)  # the last turn's bookkeeping
                    cpu["warm"].append(rig.cpu_ns(gateway) - used)
                return {"cold": cold, "warm": warm, "cpu_cold": cpu["cold"], "cpu_warm": cpu["warm"]}

            runs, extra = await self.interleaved(2, measure, lambda r: len(r["cold"]) + len(r["warm"]))
            entry: dict[str, Any] = {"repetitions": reps * 2}
            for kind in ("cold", "warm"):
                p50 = {n: ms(_median([x for r in runs[n] for x in r[kind]])) for n in self.names}
                added = {n: round(p50[n] - p50[DIRECT], 3) for n in self.variants}
                entry[kind] = {
                    "p50_ms": p50,
                    "added_p50_ms": added,
                    "added_us_per_message": {n: round(a * 1000 / size, 2) for n, a in added.items()},
                    "above_floor_p50_ms": {n: round(p50[n] - p50[self.floor], 3) for n in self.above},
                }
                cpu = {n: _mean_us([ns for r in runs[n] for ns in r[f"cpu_{kind}"]]) for n in self.variants}
                entry[kind]["gateway_cpu_us_per_request"] = cpu
                if self.floor:
                    entry[kind]["above_floor_cpu_us_per_request"] = {
                        n: round(cpu[n] - cpu[self.floor], 1) for n in self.above
                    }
            sizes[str(size)] = {**entry, **extra}
        out: dict[str, Any] = {"sizes": sizes}
        largest, base = max(self.s.sweep), 1000 if 1000 in self.s.sweep else min(self.s.sweep)
        if largest != base:
            out["growth_of"] = [largest, base]  # added time at `largest` over added time at `base`
            out["growth"] = {
                name: {
                    kind: round(sizes[str(largest)][kind]["added_p50_ms"][name] / small, 2)
                    if small > 0
                    else None
                    for kind in ("cold", "warm")
                    for small in [sizes[str(base)][kind]["added_p50_ms"][name]]
                }
                for name in self.variants
            }
        return out

    async def memory(self, idle_mib: dict[str, float]) -> dict[str, Any]:
        """RSS of each gateway variant (every worker): idle before any request (measured by the
        caller), the peak while the soak runs (c=32, small requests over 1,000 session ids), before
        the soak proper (after a warm-up of a twentieth of it) and after it."""
        return {name: await self._soak(name, idle_mib[name]) for name in self.variants}

    async def _soak(self, name: str, idle_mib: float) -> dict[str, Any]:
        path, pids = self.paths[name], self.gateways[name]
        body = workloads.small_body("stub")
        sessions = [{"X-Session-Id": f"soak-{i}"} for i in range(1000)]
        warm = max(200, self.s.soak // 20)
        errors_before = path.errors.count
        peak = 0.0
        sampling = True

        async def sample() -> None:
            nonlocal peak
            while sampling:
                peak = max(peak, rig.rss_mib(pids()))
                await asyncio.sleep(0.2)

        sampler = asyncio.create_task(sample())
        meter = self.meter(name)
        start = time.monotonic()
        await load.count_requests(path, body, 32, warm, sessions)
        await asyncio.sleep(0.5)
        before = rig.rss_mib(pids())
        elapsed = await load.count_requests(path, body, 32, self.s.soak - warm, sessions)
        await asyncio.sleep(0.5)
        after = rig.rss_mib(pids())
        sampling = False
        await sampler
        shares = meter.shares()
        wall = time.monotonic() - start
        return {
            "soak_requests": self.s.soak,
            "idle_mib": round(idle_mib, 1),
            "under_load_mib": round(peak, 1),
            "before_soak_mib": round(before, 1),
            "after_soak_mib": round(after, 1),
            "growth_pct": round((after / before - 1) * 100, 2) if before else math.nan,
            "soak_rps": round((self.s.soak - warm) / elapsed, 1),
            "cpu": shares,
            "gateway_cpu_us_per_unit": round(shares["gateway"] * wall / self.s.soak * 1e6, 1),
            "errors": path.errors.count - errors_before,
        }
