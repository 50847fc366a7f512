"""Shared continuity store on Redis, for several gateway replicas behind one balancer.

Tuned to fail fast rather than to persevere: short connect/read timeouts, no client-side retries
(a retry storm against a struggling Redis only adds latency to every request; `FailOpenStore` backs
off instead), and no connection at construction, so the gateway starts and serves while Redis is
down and picks it up when it comes back."""

from __future__ import annotations

from collections.abc import Sequence

from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

KEY_PREFIX = "gw:cont:"
# More concurrent operations than this wait (up to the op timeout) for a pooled connection
# instead of opening ever more sockets.
_MAX_CONNECTIONS = 64


class RedisStore:
    """Entries expire `ttl_seconds` after they were written (Redis expires them server-side)."""

    backend = "redis"

    def __init__(
        self,
        url: str,
        ttl_seconds: float,
        *,
        connect_timeout: float = 0.25,
        op_timeout: float = 0.5,
        key_prefix: str = KEY_PREFIX,
    ) -> None:
        if ttl_seconds <= 0:
            raise ValueError("ttl_seconds must be positive")
        # Milliseconds (PX) so a fractional TTL is honoured; Redis needs at least 1.
        self._ttl_ms = max(1, round(ttl_seconds * 1000))
        self._prefix = key_prefix
        pool = BlockingConnectionPool.from_url(
            url,
            max_connections=_MAX_CONNECTIONS,
            timeout=op_timeout,
            socket_connect_timeout=connect_timeout,
            socket_timeout=op_timeout,
            retry=Retry(NoBackoff(), 0),
        )
        self._client = Redis.from_pool(pool)

    async def get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        if not keys:
            return []
        prefix = self._prefix
        try:
            return await self._client.mget([prefix + key for key in keys])
        except RedisTimeoutError as exc:  # reported as a timeout, not a generic error
            raise TimeoutError(str(exc)) from exc

    async def put(self, keys: Sequence[str], value: bytes) -> None:
        if not keys:
            return
        value = bytes(value)
        prefix, ttl_ms = self._prefix, self._ttl_ms
        # One round trip for every key; no MULTI: each SET stands alone and a partial write costs
        # at most a miss later.
        pipe = self._client.pipeline(transaction=False)
        for key in keys:
            pipe.set(prefix + key, value, px=ttl_ms)
        try:
            await pipe.execute()
        except RedisTimeoutError as exc:
            raise TimeoutError(str(exc)) from exc

    async def ping(self) -> bool:
        try:
            return bool(await self._client.ping())
        except (RedisError, OSError):
            return False

    async def close(self) -> None:
        await self._client.aclose()
