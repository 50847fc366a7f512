"""Shared continuity store on Redis, for several gateway replicas behind one balancer.

Tuned to fail fast rather than to persevere: no client-side retries (a retry storm against a
struggling Redis only adds latency to every request; `FailOpenStore` backs off instead), and no
connection at construction, so the gateway starts and serves while Redis is down and picks it up
when it comes back. The bound of each operation is `FailOpenStore`'s (1 s of the event loop's
running time); the client's own connect/read timeouts are hang guards behind it, longer than that
bound: their timers run on wall time, and one that fires after a stall of this process (a long
garbage collection, the process descheduled on a loaded laptop) would call a Redis that answered
in time failed, back the store off and cost the next turns their recorded continuity.

Each tenant's share is bounded (`tenant_max_bytes`): a tenant's writes go through one server-side
script that keeps an index of that tenant's keys (write time, size) and evicts its own oldest
records beyond its share, so one tenant filling the Redis never pushes out another's continuity
(Redis's own `maxmemory` eviction knows nothing of tenants). Without a bound the writes are plain
SETs."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

from gateway.store.base import RecordTooLarge

KEY_PREFIX = "gw:cont:"
# per tenant: a sorted set (key -> write time in ms) and a hash (key -> counted size, and the
# total under the field "" ); both expire with the tenant's last write
_INDEX_PREFIX = "gw:tenant:"
# what a record costs beyond its value (the key, Redis's own entry, the index entries)
_ENTRY_OVERHEAD_BYTES = 256
# KEYS: the tenant's index zset, its sizes hash, then the record keys (prefixed).
# ARGV: now_ms, ttl_ms, max_bytes, size, value.
_PUT_SCRIPT = """
local index, sizes = KEYS[1], KEYS[2]
local now, ttl, cap, size = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local value = ARGV[5]
local function forget(key)
  local old = redis.call('HGET', sizes, key)
  if old then
    redis.call('HDEL', sizes, key)
    redis.call('HINCRBY', sizes, '', -tonumber(old))
  end
  redis.call('ZREM', index, key)
end
for _, key in ipairs(redis.call('ZRANGEBYSCORE', index, '-inf', now - ttl)) do forget(key) end
for i = 3, #KEYS do
  local key = KEYS[i]
  forget(key)
  redis.call('SET', key, value, 'PX', ttl)
  redis.call('ZADD', index, now, key)
  redis.call('HSET', sizes, key, size)
  redis.call('HINCRBY', sizes, '', size)
end
local evicted = 0
while tonumber(redis.call('HGET', sizes, '') or '0') > cap do
  local oldest = redis.call('ZRANGE', index, 0, 0)
  if #oldest == 0 then break end
  forget(oldest[1])
  redis.call('DEL', oldest[1])
  evicted = evicted + 1
end
redis.call('PEXPIRE', index, ttl)
redis.call('PEXPIRE', sizes, ttl)
return evicted
"""
# the client's own timeouts (see the module's docstring): far past FailOpenStore's bound
HANG_GUARD_SECONDS = 5.0
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
        connect_timeout: float = HANG_GUARD_SECONDS,
        op_timeout: float = HANG_GUARD_SECONDS,
        key_prefix: str = KEY_PREFIX,
        tenant_max_bytes: int | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if ttl_seconds <= 0:
            raise ValueError("ttl_seconds must be positive")
        # Milliseconds (PX) so a fractional TTL is honoured; Redis needs at least 1.
        self._ttl_ms = max(1, round(ttl_seconds * 1000))
        self._prefix = key_prefix
        self._tenant_max_bytes = tenant_max_bytes
        self._clock = clock
        pool = BlockingConnectionPool.from_url(
            url,
            max_connections=_MAX_CONNECTIONS,
            timeout=op_timeout,
            socket_connect_timeout=connect_timeout,
            socket_timeout=op_timeout,
            retry=Retry(NoBackoff(), 0),
        )
        self._client = Redis.from_pool(pool)
        self._put_script = self._client.register_script(_PUT_SCRIPT)

    async def get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        if not keys:
            return []
        prefix = self._prefix
        try:
            return await self._client.mget([prefix + key for key in keys])
        except RedisTimeoutError as exc:  # reported as a timeout, not a generic error
            raise TimeoutError(str(exc)) from exc

    async def put(self, keys: Sequence[str], value: bytes, *, tenant: str = "") -> int:
        if not keys:
            return 0
        value = bytes(value)
        prefix, ttl_ms = self._prefix, self._ttl_ms
        if self._tenant_max_bytes is not None:
            size = len(value) + _ENTRY_OVERHEAD_BYTES
            if size > self._tenant_max_bytes:
                raise RecordTooLarge(f"a {len(value)}-byte record is larger than a tenant's share")
            index = f"{_INDEX_PREFIX}{tenant}:"
            try:
                evicted = await self._put_script(
                    keys=[index + "keys", index + "sizes", *(prefix + key for key in keys)],
                    args=[int(self._clock() * 1000), ttl_ms, self._tenant_max_bytes, size, value],
                )
            except RedisTimeoutError as exc:
                raise TimeoutError(str(exc)) from exc
            return int(evicted)
        # One round trip for every key; no MULTI: each SET stands alone and a partial write costs
        # at most a miss later.
        pipe = self._client.pipeline(transaction=False)
        for key in keys:
            pipe.set(prefix + key, value, px=ttl_ms)
        try:
            await pipe.execute()
        except RedisTimeoutError as exc:
            raise TimeoutError(str(exc)) from exc
        return 0

    async def ping(self) -> bool:
        try:
            return bool(await self._client.ping())
        except (RedisError, OSError):
            return False

    async def close(self) -> None:
        await self._client.aclose()
