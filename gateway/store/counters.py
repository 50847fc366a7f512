"""Counters for the client keys' limits (gateway/limits.py): requests and tokens per minute, USD
per day, each in a fixed window named by the caller.

`RedisCounters` is shared by every worker and replica (one pipelined round trip per check, one per
spend); `MemoryCounters` counts inside one process (a single worker). Both raise on failure; the
caller fails open.

`RedisCounters`' bound on an operation counts the event loop's running time (LoopTimeBound): a
limit check that Redis answered in time is not a store failure because this process stalled (a
long garbage collection, a loaded laptop) while the answer waited to be read. Its client's own
timeouts run on wall time and are hang guards behind that bound."""

from __future__ import annotations

from typing import Protocol

from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from gateway.store.loop_bound import LoopTimeBound
from gateway.store.redis import HANG_GUARD_SECONDS

KEY_PREFIX = "gw:limit:"
MINUTE_TTL = 120  # a minute window is read for a minute; kept a little longer for clock skew
DAY_TTL = 2 * 86400


class Counters(Protocol):
    async def admit(self, key: str, minute: int, day: int) -> tuple[int, int, float]:
        """Count one request of `key` in `minute`; (requests this minute, this one included,
        tokens this minute, USD this day)."""
        ...

    async def spend(self, key: str, minute: int, day: int, tokens: int, usd: float) -> None: ...

    async def close(self) -> None: ...


class MemoryCounters:
    """One process's counts; windows other than the current ones are dropped as they pass."""

    def __init__(self) -> None:
        self._minutes: dict[tuple[str, int], list[int]] = {}  # (key, minute) -> [requests, tokens]
        self._days: dict[tuple[str, int], float] = {}

    def _minute(self, key: str, minute: int) -> list[int]:
        found = self._minutes.get((key, minute))
        if found is None:
            for old in [k for k in self._minutes if k[0] == key and k[1] < minute]:
                del self._minutes[old]
            found = self._minutes[(key, minute)] = [0, 0]
        return found

    async def admit(self, key: str, minute: int, day: int) -> tuple[int, int, float]:
        counts = self._minute(key, minute)
        counts[0] += 1
        return counts[0], counts[1], self._days.get((key, day), 0.0)

    async def spend(self, key: str, minute: int, day: int, tokens: int, usd: float) -> None:
        self._minute(key, minute)[1] += tokens
        if usd:
            for old in [k for k in self._days if k[0] == key and k[1] < day]:
                del self._days[old]
            self._days[(key, day)] = self._days.get((key, day), 0.0) + usd

    async def close(self) -> None:
        return None


class RedisCounters:
    """Counts in Redis, expiring with their window. Fails fast, like the continuity store: an
    operation (one pipelined round trip, a pooled connection's wait and a connect included) is
    bounded by `op_timeout` seconds of the loop's running time."""

    def __init__(self, url: str, *, op_timeout: float = 0.5) -> None:
        pool = BlockingConnectionPool.from_url(
            url,
            max_connections=32,
            timeout=HANG_GUARD_SECONDS,
            socket_connect_timeout=HANG_GUARD_SECONDS,
            socket_timeout=HANG_GUARD_SECONDS,
            retry=Retry(NoBackoff(), 0),
        )
        self._client = Redis.from_pool(pool)
        self._op_timeout = op_timeout

    @staticmethod
    def _names(key: str, minute: int, day: int) -> tuple[str, str, str]:
        base = f"{KEY_PREFIX}{key}:"
        return f"{base}rq:{minute}", f"{base}tk:{minute}", f"{base}usd:{day}"

    async def admit(self, key: str, minute: int, day: int) -> tuple[int, int, float]:
        requests, tokens, usd = self._names(key, minute, day)
        pipe = self._client.pipeline(transaction=False)
        pipe.incr(requests)
        pipe.expire(requests, MINUTE_TTL)
        pipe.get(tokens)
        pipe.get(usd)
        async with LoopTimeBound(self._op_timeout):
            count, _, spent_tokens, spent_usd = await pipe.execute()
        return int(count), int(spent_tokens or 0), float(spent_usd or 0.0)

    async def spend(self, key: str, minute: int, day: int, tokens: int, usd: float) -> None:
        _, token_key, usd_key = self._names(key, minute, day)
        pipe = self._client.pipeline(transaction=False)
        pipe.incrby(token_key, tokens)
        pipe.expire(token_key, MINUTE_TTL)
        if usd:
            pipe.incrbyfloat(usd_key, usd)
            pipe.expire(usd_key, DAY_TTL)
        async with LoopTimeBound(self._op_timeout):
            await pipe.execute()

    async def close(self) -> None:
        await self._client.aclose()
